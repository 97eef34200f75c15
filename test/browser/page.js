// The test page of test/browser: a small app built on clients/js/chronoq.js.
// Each panel is one client (its own connection) subscribed to one channel,
// or watching one job; the Go test drives it through window.t (see
// browser_test.go) and reads window.t.snapshot().
//
// Query: server=<default chronoq base URL; t.start can name another>,
// sse=<base URL for SSE, default the page's own origin (with a token
// configured chronoq allows any origin on /v1/sse, so this may be the
// server itself)>, dead=<a loopback port that closes every connection at once>.

import { Chronoq } from "/clients/js/chronoq.js";

const params = new URLSearchParams(location.search);
const server = params.get("server");
const sseBase = params.get("sse") || location.origin;
const deadPort = params.get("dead") || "9";
const deadWS = `ws://127.0.0.1:${deadPort}/v1/ws`;
const deadSSE = `http://127.0.0.1:${deadPort}/v1/sse`;

const panels = new Map();
const blocked = new Set(); // panels whose "network" is down

// Transports that a test can cut: while a panel is blocked, every new
// connection goes to a port that closes it at once.
function flakyWebSocket(name) {
  return class extends WebSocket {
    constructor(url, protocols) {
      super(blocked.has(name) ? deadWS : url, protocols);
      panels.get(name).socket = this;
    }
  };
}

function flakyEventSource(name) {
  return class extends EventSource {
    constructor(url, init) {
      super(blocked.has(name) ? deadSSE : url, init);
      panels.get(name).source = this;
    }
  };
}

function newPanel(name, kind, channel, client) {
  const p = {
    name, kind, channel, client,
    ready: false, done: null, socket: null, source: null,
    pubs: [], resets: [], recovered: [], subscribed: [], errors: [], disconnects: [], events: [],
    transports: [],
  };
  const el = document.createElement("section");
  el.className = "panel";
  el.id = "panel-" + name;
  document.getElementById("panels").append(el);
  p.el = el;
  panels.set(name, p);
  client.on("state", () => render(p));
  client.on("disconnect", (d) => { p.disconnects.push({ code: d.code, reason: d.reason, reconnect: d.reconnect }); render(p); });
  client.on("transport", (e) => { p.transports.push(e.transport); render(p); });
  client.on("error", (e) => { p.errors.push(String(e && e.message || e)); render(p); });
  return p;
}

function clientFor(name, o) {
  const p = { tokenCalls: 0 };
  const getToken = o.tokenUrl
    ? async () => {
      p.tokenCalls++;
      const r = await fetch(o.tokenUrl, { cache: "no-store" });
      if (!r.ok) throw new Error("token: HTTP " + r.status);
      return r.text();
    }
    : undefined;
  const client = new Chronoq(o.server || server, {
    token: o.token,
    getToken,
    refreshBefore: o.refreshBefore,
    transport: o.transport || "auto",
    sseUrl: o.sseUrl || sseBase + "/v1/sse",
    wsUrl: o.wsUrl,
    fallbackAfter: o.fallbackAfter || 3,
    minDelay: o.minDelay || 100,
    maxDelay: o.maxDelay || 1000,
    connectTimeout: o.connectTimeout || 3000,
    WebSocket: flakyWebSocket(name),
    EventSource: flakyEventSource(name),
  });
  client.tokens = p; // for the snapshot
  return client;
}

const t = {
  // A subscriber panel: records every callback of the subscription.
  start(name, o) {
    const client = clientFor(name, o);
    const p = newPanel(name, "subscribe", o.channel, client);
    const sub = client.subscribe(o.channel, {
      onPublication: (data, pub) => { p.pubs.push({ offset: pub.offset, epoch: pub.epoch, data }); render(p); },
      onSubscribed: (i) => { p.subscribed.push(i); render(p); },
      onRecovered: (i) => { p.recovered.push(i); render(p); },
      // A real app reloads its state here; this one marks where the gap is.
      onReset: (i) => { p.resets.push({ ...i, at: p.pubs.length }); render(p); },
      onError: (e) => { p.errors.push(String(e.message)); render(p); },
    });
    p.sub = sub;
    sub.ready.then(() => { p.ready = true; render(p); }, () => {});
    render(p);
    return true;
  },

  // A job panel: watchJob on the job's notify channel.
  watch(name, o) {
    const client = clientFor(name, o);
    const p = newPanel(name, "job " + o.jobId, o.channel, client);
    const w = client.watchJob(o.channel, o.jobId, (ev) => { p.events.push(ev); render(p); }, {
      onReset: (i) => { p.resets.push(i); render(p); },
    });
    w.ready.then(() => { p.ready = true; render(p); }, (e) => { p.errors.push(String(e.message)); render(p); });
    w.done.then((ev) => { p.done = ev; render(p); }, (e) => { p.errors.push("done: " + e.message); render(p); });
    render(p);
    return true;
  },

  // Cuts a panel's network: the current connection drops (close 4000 / a
  // failed stream) and new ones fail until restore().
  cut(name) {
    const p = panels.get(name);
    blocked.add(name);
    if (p.client.transport === "websocket" && p.socket) p.socket.close(4000, "test: network cut");
    if (p.client.transport === "sse" && p.source) {
      p.source.close();
      p.source.dispatchEvent(new Event("error"));
    }
    return true;
  },

  restore(name) {
    blocked.delete(name);
    return true;
  },

  // Publishes from the browser over the panel's WebSocket.
  publish(name, data) {
    const p = panels.get(name);
    return p.client.publish(p.channel, data);
  },

  snapshot() {
    const out = {};
    for (const [name, p] of panels) {
      out[name] = {
        channel: p.channel, state: p.client.state, transport: p.client.transport,
        reconnects: p.client.reconnects, ready: p.ready, position: p.sub ? p.sub.position : null,
        pubs: p.pubs, resets: p.resets, recovered: p.recovered, subscribed: p.subscribed,
        errors: p.errors, disconnects: p.disconnects, events: p.events, done: p.done,
        transports: p.transports, tokenCalls: p.client.tokens.tokenCalls,
        session: p.client.session,
      };
    }
    return out;
  },
};

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}

function render(p) {
  const c = p.client;
  let notes = "";
  if (p.resets.length) notes += `<span class="reset">reset ×${p.resets.length}: state reloaded</span> `;
  if (p.recovered.length) {
    const last = p.recovered[p.recovered.length - 1];
    notes += `<span class="recovered">recovered ${last.to - last.from} missed (×${p.recovered.length})</span> `;
  }
  if (p.client.tokens.tokenCalls > 1) notes += `<span class="recovered">token fetched ×${p.client.tokens.tokenCalls}</span> `;
  const lastDisc = p.disconnects[p.disconnects.length - 1];
  if (c.state === "closed" && lastDisc && !lastDisc.reconnect) notes += `<span class="reset">stopped by the server: ${lastDisc.code} ${esc(lastDisc.reason)}</span> `;
  if (p.errors.length) notes += `<span class="reset">${esc(p.errors[p.errors.length - 1])}</span>`;
  let items;
  if (p.kind === "subscribe") {
    const gaps = new Set(p.resets.map((r) => r.at));
    items = p.pubs.slice(-14).map((x, i, all) => {
      const idx = p.pubs.length - all.length + i;
      return `<li value="${x.offset}"${gaps.has(idx) ? ' class="gap"' : ""}>${esc(JSON.stringify(x.data))}</li>`;
    }).join("");
  } else {
    items = p.events.map((e) => `<li>${esc(e.event)} · ${esc(e.state)} · attempt ${e.attempt}${e.result !== undefined ? " · " + esc(JSON.stringify(e.result)) : ""}</li>`).join("");
    if (p.done) notes += `<span class="recovered">done: ${esc(p.done.event)}</span>`;
  }
  p.el.innerHTML =
    `<h2><span>${esc(p.name)}</span><span class="badge ${c.state}">${esc(c.state)}</span></h2>` +
    `<div class="meta">${esc(p.kind)} · ${esc(p.channel)} · ${esc(c.transport || "-")} · reconnects ${c.reconnects}</div>` +
    `<div class="notes">${notes || "&nbsp;"}</div><ol>${items}</ol>`;
  summary();
}

function summary() {
  let n = 0;
  let up = 0;
  for (const p of panels.values()) {
    n += p.pubs.length + p.events.length;
    if (p.client.state === "connected") up++;
  }
  document.getElementById("summary").textContent = `${panels.size} clients, ${up} connected · ${n} messages received`;
}

window.t = t;
summary();
window.pageReady = true;

// chronoq dashboard (docs/dashboard.md). Plain ES module, no build step.
// Every value that comes from the server is put into the page with
// textContent or as an attribute value through el(): never as markup, so a
// payload or a tag containing <script> is shown, not run. The page calls
// only its own origin: /admin/* and /ui/api/v1/* (the /v1 API re-mounted on
// the admin listener), with the admin token in an Authorization header.
import uPlot from "./uPlot.esm.js";

const TOKEN_KEY = "chronoq.adminToken";
const STATES = ["ready", "delayed", "reserved", "blocked", "dead", "completed"];
const PAGE = 50;

// ---------------------------------------------------------------- DOM helpers

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const $ = (id) => document.getElementById(id);
const view = () => $("view");

function toast(msg, err) {
  const d = el("div", { class: err ? "err" : "" }, msg);
  $("toast").append(d);
  setTimeout(() => d.remove(), err ? 8000 : 4000);
}

// ---------------------------------------------------------------- formatting

const nf = new Intl.NumberFormat();
const num = (n) => (n === undefined || n === null ? "–" : nf.format(n));
const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

function relTime(date) {
  const s = (date.getTime() - Date.now()) / 1000;
  const a = Math.abs(s);
  if (a < 45) return rtf.format(Math.round(s), "second");
  if (a < 2700) return rtf.format(Math.round(s / 60), "minute");
  if (a < 64800) return rtf.format(Math.round(s / 3600), "hour");
  if (a < 86400 * 45) return rtf.format(Math.round(s / 86400), "day");
  return rtf.format(Math.round(s / (86400 * 30)), "month");
}

// A timestamp in the browser's time zone, with "in 3 hours" beside it.
function timeCell(iso) {
  if (!iso) return el("span", { class: "muted" }, "–");
  const d = new Date(iso);
  if (isNaN(d)) return el("span", {}, iso);
  return el("span", { title: iso }, d.toLocaleString(), el("span", { class: "rel" }, "(" + relTime(d) + ")"));
}

function bytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function duration(sec) {
  sec = Math.floor(sec);
  const d = Math.floor(sec / 86400), h = Math.floor((sec % 86400) / 3600), m = Math.floor((sec % 3600) / 60), s = sec % 60;
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

// Go durations ("1h2m3.5s", "250ms") to seconds.
function goDur(s) {
  if (!s) return 0;
  let t = 0;
  for (const [, v, u] of s.matchAll(/([\d.]+)(ns|µs|us|ms|s|m|h)/g)) {
    t += parseFloat(v) * { ns: 1e-9, "µs": 1e-6, us: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 }[u];
  }
  return t;
}

const enc = encodeURIComponent;

// ---------------------------------------------------------------- API

let token = sessionStorage.getItem(TOKEN_KEY) || "";

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (r.status === 204) return null;
  let data = null;
  try { data = await r.json(); } catch { /* empty or not JSON */ }
  if (!r.ok) {
    const e = data && data.error ? data.error : { code: "http_" + r.status, message: r.statusText };
    if (r.status === 401) needLogin(e.message);
    throw new APIError(r.status, e.code, e.message);
  }
  return data;
}
const v1 = (ns, rest) => `/ui/api/v1/ns/${enc(ns)}${rest}`;

// ---------------------------------------------------------------- login

let loginWaiters = [];
function needLogin(msg) {
  const d = $("login");
  $("login-error").textContent = token ? "The server refused this token: " + (msg || "unknown token") : "";
  if (token) { token = ""; sessionStorage.removeItem(TOKEN_KEY); }
  if (!d.open) d.showModal();
  $("login-token").focus();
  stopStream();
}

$("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const t = $("login-token").value.trim();
  if (!t) return;
  token = t;
  try {
    await api("GET", "/admin/stats?window=1s");
  } catch (e) {
    if (e.status === 401 || e.status === 403) {
      token = "";
      $("login-error").textContent = "Refused: " + e.message;
      return;
    }
    $("login-error").textContent = "Could not check the token: " + e.message;
    token = "";
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("login-token").value = "";
  $("login").close();
  $("logout").hidden = false;
  startStream();
  route();
  for (const w of loginWaiters) w();
  loginWaiters = [];
});
$("login").addEventListener("cancel", (ev) => ev.preventDefault()); // nothing works without it

$("logout").addEventListener("click", () => {
  token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  stopStream();
  $("logout").hidden = true;
  needLogin();
});

// ---------------------------------------------------------------- dialogs

function confirmAction({ title, text, word, ok = "Confirm" }) {
  return new Promise((resolve) => {
    const d = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text || "";
    const typed = $("confirm-typed");
    typed.value = "";
    $("confirm-typed-label").hidden = !word;
    $("confirm-word").textContent = word || "";
    const okb = $("confirm-ok");
    okb.textContent = ok;
    okb.disabled = !!word;
    typed.oninput = () => { okb.disabled = typed.value !== word; };
    d.onclose = () => resolve(d.returnValue === "ok" && (!word || typed.value === word));
    d.returnValue = "";
    d.showModal();
    (word ? typed : okb).focus();
  });
}

// A JSON (or text) editor; check returns an error message or "".
function editText({ title, help, text, check }) {
  return new Promise((resolve) => {
    const d = $("editor");
    $("editor-title").textContent = title;
    $("editor-help").textContent = help || "";
    $("editor-error").textContent = "";
    const ta = $("editor-text");
    ta.value = text;
    const form = $("editor-form");
    const onsubmit = (ev) => {
      if (ev.submitter && ev.submitter.value === "ok") {
        const msg = check ? check(ta.value) : "";
        if (msg) { ev.preventDefault(); $("editor-error").textContent = msg; }
      }
    };
    form.addEventListener("submit", onsubmit);
    d.onclose = () => {
      form.removeEventListener("submit", onsubmit);
      resolve(d.returnValue === "ok" ? ta.value : null);
    };
    d.returnValue = "";
    d.showModal();
    ta.focus();
  });
}

const jsonCheck = (s) => { try { JSON.parse(s); return ""; } catch (e) { return "Not valid JSON: " + e.message; } };

// ---------------------------------------------------------------- live stats (SSE over fetch)
// EventSource cannot send an Authorization header, and the token must never
// travel in a URL; so the stream is read with fetch.

let overview = null;
const history = { t: [], put: [], take: [], ack: [], nack: [], mean: [], max: [] };
const listeners = new Set();
let streamAbort = null;

function pushSamples(samples) {
  const last = history.t.length ? history.t[history.t.length - 1] : 0;
  for (const s of samples || []) {
    const t = new Date(s.t).getTime() / 1000;
    if (t <= last) continue;
    history.t.push(t); history.put.push(s.put); history.take.push(s.take); history.ack.push(s.ack); history.nack.push(s.nack);
    history.mean.push(s.commits ? s.commit_mean_ms : null); history.max.push(s.commits ? s.commit_max_ms : null);
  }
  const cut = history.t.length - 900;
  if (cut > 0) for (const k of Object.keys(history)) history[k].splice(0, cut);
}

function setLive(on, text) {
  const l = $("live");
  l.className = "live " + (on ? "on" : "off");
  l.textContent = text;
}

function stopStream() {
  if (streamAbort) streamAbort.abort();
  streamAbort = null;
}

async function startStream() {
  stopStream();
  const ctl = new AbortController();
  streamAbort = ctl;
  let backoff = 1000;
  while (!ctl.signal.aborted) {
    try {
      const headers = { Accept: "text/event-stream" };
      if (token) headers.Authorization = "Bearer " + token;
      // the first answer fills the whole 15-minute history
      if (!history.t.length) {
        const first = await api("GET", "/admin/stats");
        pushSamples(first.samples);
        overview = first;
        notify();
      }
      const r = await fetch("/admin/stats/stream", { headers, signal: ctl.signal, cache: "no-store", credentials: "omit" });
      if (r.status === 401) { needLogin("unknown token"); return; }
      if (!r.ok) throw new Error("stream: HTTP " + r.status);
      setLive(true, "live");
      backoff = 1000;
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let ev = "message", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) ev = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).trim();
          }
          if (ev === "stats" && data) {
            const o = JSON.parse(data);
            pushSamples(o.samples);
            overview = o;
            notify();
          }
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
      if (e.status === 401) return;
    }
    if (ctl.signal.aborted) return;
    setLive(false, "reconnecting…");
    await new Promise((res) => setTimeout(res, backoff));
    backoff = Math.min(backoff * 2, 15000);
  }
}

function notify() {
  for (const fn of listeners) {
    try { fn(overview); } catch (e) { console.error(e); }
  }
}

// ---------------------------------------------------------------- routing

let current = null; // { cleanup }
function params() {
  const [path, q] = location.hash.replace(/^#/, "").split("?");
  return { page: (path || "/overview").replace(/^\//, "") || "overview", q: new URLSearchParams(q || "") };
}
function go(page, q) {
  const s = new URLSearchParams(q).toString();
  location.hash = "#/" + page + (s ? "?" + s : "");
}

const pages = {};
async function route() {
  if (current && current.cleanup) current.cleanup();
  listeners.clear();
  current = {};
  const { page, q } = params();
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === (page === "job" ? "jobs" : page));
  const fn = pages[page] || pages.overview;
  view().replaceChildren();
  try {
    await fn(q, current);
  } catch (e) {
    if (e.status !== 401) view().append(el("p", { class: "error" }, "Could not load this page: " + e.message));
  }
  window.dashboardReady = true;
}
window.addEventListener("hashchange", route);

// live(fn): call fn on every stats event (one a second at most), for as
// long as the page is shown; a slow fn is never called twice at once.
function live(fn) {
  let busy = false;
  const l = async () => {
    if (busy) return;
    busy = true;
    try { await fn(); } catch (e) { if (e.status !== 401) console.warn(e); } finally { busy = false; }
  };
  listeners.add(l);
}

let namespaces = null;
async function nsList() {
  if (namespaces) return namespaces;
  try {
    const r = await api("GET", "/admin/namespaces");
    namespaces = r.namespaces.map((n) => n.name);
  } catch (e) {
    if (e.status === 401) throw e;
    namespaces = ["default"];
  }
  if (!namespaces.length) namespaces = ["default"];
  return namespaces;
}

async function nsSelect(q, page) {
  const all = await nsList();
  const cur = q.get("ns") || (all.includes("default") ? "default" : all[0]);
  const s = el("select", { "aria-label": "Namespace", id: "ns-select", onchange: () => go(page, { ns: s.value }) },
    all.map((n) => el("option", { value: n, selected: n === cur }, n)));
  return { ns: cur, select: el("label", {}, "Namespace ", s) };
}

// ---------------------------------------------------------------- Overview

function chart(container, title, series, data) {
  const box = el("div", { class: "chart" }, el("h3", {}, title));
  container.append(box);
  const width = () => Math.max(300, box.clientWidth - 16);
  const dark = matchMedia("(prefers-color-scheme: dark)").matches;
  const axisColor = dark ? "#9aa6b5" : "#5f6b7a";
  const grid = { stroke: dark ? "#2d3640" : "#e6e9ee", width: 1 };
  const u = new uPlot({
    width: width(), height: 220,
    series: [{ value: (_, t) => (t == null ? "–" : new Date(t * 1000).toLocaleTimeString()) },
      ...series.map((s) => ({ label: s.label, stroke: s.color, width: 1.5, points: { show: false }, spanGaps: false, value: (_, v) => (v == null ? "–" : v.toFixed(s.digits ?? 1)) }))],
    axes: [
      { stroke: axisColor, grid, values: (u, splits) => {
        const secs = u.scales.x.max - u.scales.x.min < 600 ? { second: "2-digit" } : {};
        return splits.map((t) => new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", ...secs }));
      } },
      { stroke: axisColor, grid, size: 55 },
    ],
    // at least the last minute, at most the 15 the server keeps
    scales: { x: { time: true, range: (_, lo, hi) => { const now = Date.now() / 1000; return [Math.min(lo ?? now, now - 60), Math.max(hi ?? now, now)]; } }, y: { range: (_, lo, hi) => [0, hi > 0 ? hi * 1.15 : 1] } },
    legend: { live: true },
    cursor: { drag: { x: false, y: false } },
  }, data(), box);
  const ro = new ResizeObserver(() => u.setSize({ width: width(), height: 220 }));
  ro.observe(box);
  return { update: () => u.setData(data()), destroy: () => { ro.disconnect(); u.destroy(); } };
}

pages.overview = async (q, cur) => {
  const v = view();
  v.append(el("h1", {}, "Overview"));
  const cards = el("div", { class: "cards", id: "ov-cards" });
  const states = el("div", { class: "states cards", id: "ov-states" });
  const charts = el("div", { class: "charts" });
  v.append(cards, el("h2", {}, "Jobs by state, all queues"), states, el("h2", {}, "Last 15 minutes"), charts,
    el("h2", {}, "Cluster"), el("div", { class: "muted", id: "ov-cluster" }, "Single node: this server runs without a cluster, so there are no peers, leader, term or lag to show."));
  if (!overview) overview = await api("GET", "/admin/stats").then((o) => { pushSamples(o.samples); return o; });
  const card = (k, val, sub, id) => el("div", { class: "card", id }, el("div", { class: "k" }, k), el("div", { class: "v" }, val), sub ? el("div", { class: "sub" }, sub) : null);
  const render = () => {
    const o = overview;
    const last = history.t.length - 1;
    const rate = (k) => (last >= 0 ? history[k][last].toFixed(1) + "/s" : "–");
    cards.replaceChildren(
      card("Put", rate("put"), "take " + rate("take") + " · ack " + rate("ack") + " · nack " + rate("nack"), "card-rates"),
      card("Queues", num(o.queues), null, "card-queues"),
      card("Connections", num(Object.values(o.connections || {}).reduce((a, b) => a + b, 0)),
        Object.entries(o.connections || {}).map(([k, n]) => k + " " + n).join(" · ")),
      card("Log on disk", bytes(o.wal.bytes), o.wal.segments + " segment(s) · " + bytes(o.wal.appended_bytes) + " written since start"),
      card("Last snapshot", o.snapshot.at ? relTime(new Date(o.snapshot.at)) : "none yet",
        o.snapshot.at ? new Date(o.snapshot.at).toLocaleString() + " · " + bytes(o.snapshot.bytes) : "written on a clean stop and as the log grows"),
      card("Uptime", duration(o.uptime_seconds), "since " + new Date(o.started_at).toLocaleString()),
      card("Version", o.version.split(" ")[0], o.version.split(" ").slice(1).join(" ")),
    );
    if (o.unavailable) cards.prepend(card("Numbers", "unavailable", o.unavailable, "card-unavailable"));
    states.replaceChildren(...STATES.map((s) => el("a", { class: "card state state-" + s, href: "#/queues", id: "state-" + s },
      el("div", { class: "k" }, s), el("div", { class: "v" }, num(o.jobs[s])))));
    const cl = o.cluster;
    if (cl) {
      const lag = Object.entries(cl.lag || {}).map(([id, n]) => "node " + id + " " + num(n) + " behind").join(" · ");
      document.getElementById("ov-cluster").replaceChildren(
        card("This node", "node " + cl.id, cl.role, "card-node"),
        card("Leader", cl.leader ? "node " + cl.leader : "none", "term " + num(cl.term), "card-leader"),
        card("Log", num(cl.applied) + " applied", "commit index " + num(cl.commit), "card-log"),
        card("Lag", lag ? num(Math.max(...Object.values(cl.lag))) + " max" : "–", lag || "known on the leader", "card-lag"));
      document.getElementById("ov-cluster").className = "cards";
    }
  };
  render();
  const rates = chart(charts, "Jobs per second", [
    { label: "put", color: "#2e7d32" }, { label: "take", color: "#1e88e5" }, { label: "ack", color: "#7e57c2" }, { label: "nack", color: "#c62828" },
  ], () => [history.t, history.put, history.take, history.ack, history.nack]);
  const lat = chart(charts, "Log commit latency (ms)", [
    { label: "mean", color: "#1e88e5", digits: 2 }, { label: "max", color: "#ef6c00", digits: 2 },
  ], () => [history.t, history.mean, history.max]);
  live(() => { render(); rates.update(); lat.update(); });
  cur.cleanup = () => { rates.destroy(); lat.destroy(); };
};

// ---------------------------------------------------------------- Queues

pages.queues = async (q, cur) => {
  const v = view();
  const { ns, select } = await nsSelect(q, "queues");
  const filter = el("input", { type: "search", id: "queue-filter", placeholder: "Filter this page by name  ( / )", "aria-label": "Filter queues", value: q.get("filter") || "" });
  const gotoIn = el("input", { id: "queue-goto", placeholder: "Go to queue by exact name", "aria-label": "Queue name" });
  const gotoForm = el("form", { class: "inline", onsubmit: (ev) => { ev.preventDefault(); if (gotoIn.value) go("jobs", { ns, q: gotoIn.value }); } }, gotoIn);
  v.append(el("h1", {}, "Queues"), el("div", { class: "toolbar" }, select, filter, el("span", { class: "grow" }), gotoForm));
  const table = el("table", { id: "queues" });
  const pager = el("div", { class: "pager" });
  v.append(table, pager);

  const cols = [
    ["name", "Queue", (x) => x.name], ["ready", "Ready", (x) => x.counts.ready, 1], ["delayed", "Delayed", (x) => x.counts.delayed, 1],
    ["reserved", "Reserved", (x) => x.counts.reserved, 1], ["blocked", "Blocked", (x) => x.counts.blocked, 1], ["dead", "Dead", (x) => x.counts.dead, 1],
    ["completed", "Completed", (x) => x.counts.completed, 1], ["put_rate", "Put/s", (x) => x.putRate ?? -1, 1], ["take_rate", "Take/s", (x) => x.takeRate ?? -1, 1],
    ["oldest", "Oldest ready", (x) => goDur(x.oldest_ready_age), 1], ["paused", "State", (x) => (x.paused ? 1 : 0)],
  ];
  let sort = q.get("sort") || "name", desc = q.get("desc") === "1";
  const cursors = [""];
  let page = 0, rows = [], next = "";
  let prevStats = null;

  const load = async () => {
    const cursor = cursors[page];
    const qs = `?limit=${PAGE}` + (cursor ? "&cursor=" + enc(cursor) : "");
    const [list, st] = await Promise.all([api("GET", v1(ns, "/queues" + qs)), api("GET", v1(ns, "/queue-stats" + qs)).catch(() => null)]);
    rows = list.queues;
    next = list.next_cursor || "";
    if (st) {
      const byName = new Map(st.queues.map((x) => [x.name, x]));
      const t = new Date(st.time).getTime() / 1000;
      if (prevStats && t > prevStats.t) {
        const dt = t - prevStats.t;
        for (const r of rows) {
          const a = byName.get(r.name), b = prevStats.by.get(r.name);
          if (a && b) { r.putRate = Math.max(0, a.put - b.put) / dt; r.takeRate = Math.max(0, a.taken - b.taken) / dt; }
        }
      }
      prevStats = { t, by: byName };
    }
    render();
  };

  const act = async (what, fn) => {
    try { const r = await fn(); toast(what + (r && r.deleted !== undefined ? `: ${r.deleted} job(s) deleted` : "")); await load(); } catch (e) { toast(what + " failed: " + e.message, true); }
  };

  const render = () => {
    const f = filter.value.toLowerCase();
    const col = cols.find((c) => c[0] === sort) || cols[0];
    const shown = rows.filter((r) => r.name.toLowerCase().includes(f)).sort((a, b) => {
      const x = col[2](a), y = col[2](b);
      return (x < y ? -1 : x > y ? 1 : 0) * (desc ? -1 : 1);
    });
    const head = el("tr", {}, cols.map(([k, label, , isNum]) => el("th", {
      class: "sortable" + (isNum ? " num" : "") + (k === sort ? (desc ? " sorted-desc" : " sorted-asc") : ""), tabindex: 0, scope: "col",
      onclick: () => { desc = k === sort ? !desc : !!isNum; sort = k; render(); },
      onkeydown: (ev) => { if (ev.key === "Enter") ev.target.click(); },
    }, label)), el("th", {}, "Actions"));
    const body = shown.map((r) => el("tr", { dataset: { queue: r.name } },
      el("td", {}, el("a", { href: `#/jobs?ns=${enc(ns)}&q=${enc(r.name)}` }, r.name)),
      ...["ready", "delayed", "reserved", "blocked"].map((s) => el("td", { class: "num" }, num(r.counts[s]))),
      el("td", { class: "num" }, r.counts.dead ? el("a", { href: `#/jobs?ns=${enc(ns)}&q=${enc(r.name)}&state=dead` }, num(r.counts.dead)) : "0"),
      el("td", { class: "num" }, num(r.counts.completed)),
      el("td", { class: "num" }, r.putRate === undefined ? "–" : r.putRate.toFixed(1)),
      el("td", { class: "num" }, r.takeRate === undefined ? "–" : r.takeRate.toFixed(1)),
      el("td", { class: "num" }, r.counts.ready ? duration(goDur(r.oldest_ready_age)) : "–"),
      el("td", {}, r.paused ? el("span", { class: "badge paused" }, "paused") : el("span", { class: "badge" }, "active")),
      el("td", {}, el("div", { class: "actions" },
        r.paused
          ? el("button", { onclick: () => act("Resumed " + r.name, () => api("POST", v1(ns, `/queues/${enc(r.name)}/resume`))) }, "Resume")
          : el("button", { onclick: () => act("Paused " + r.name, () => api("POST", v1(ns, `/queues/${enc(r.name)}/pause`))) }, "Pause"),
        el("button", { onclick: () => editQueue(ns, r, load) }, "Config"),
        el("button", { class: "danger", "data-action": "purge", onclick: async () => {
          const ok = await confirmAction({ title: `Purge ${r.name}?`, text: `Every job of ${ns}/${r.name} is deleted, reserved ones included (${num(Object.values(r.counts).reduce((a, b) => a + b, 0))} now). This cannot be undone.`, word: r.name, ok: "Purge" });
          if (ok) act("Purged " + r.name, () => api("POST", v1(ns, `/queues/${enc(r.name)}/purge`)));
        } }, "Purge"),
      )),
    ));
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, body.length ? body : el("tr", {}, el("td", { colspan: cols.length + 1, class: "muted" }, rows.length ? "No queue on this page matches the filter." : "No queues in this namespace yet."))));
    pager.replaceChildren(
      el("button", { disabled: page === 0, onclick: () => { page--; load(); } }, "← Previous"),
      el("span", {}, `Page ${page + 1} · ${rows.length} queue(s)` + (f ? ` · ${shown.length} shown` : "")),
      el("button", { disabled: !next, onclick: () => { cursors[page + 1] = next; page++; load(); } }, "Next →"),
    );
  };
  filter.addEventListener("input", render);
  await load();
  live(load);
  const key = (ev) => { if (ev.key === "/" && document.activeElement.tagName !== "INPUT" && document.activeElement.tagName !== "TEXTAREA") { ev.preventDefault(); filter.focus(); } };
  document.addEventListener("keydown", key);
  cur.cleanup = () => document.removeEventListener("keydown", key);
};

async function editQueue(ns, r, done) {
  const text = await editText({
    title: `Configure ${ns}/${r.name}`,
    help: "The queue's configuration (PUT /v1/ns/{ns}/queues/{q}): fields left out keep their values. Durations like \"30s\", \"10m\".",
    text: JSON.stringify(r.config, null, 2), check: jsonCheck,
  });
  if (text === null) return;
  try {
    await api("PUT", v1(ns, `/queues/${enc(r.name)}`), JSON.parse(text));
    toast("Saved the configuration of " + r.name);
    done();
  } catch (e) { toast("Not saved: " + e.message, true); }
}

// ---------------------------------------------------------------- Jobs

pages.jobs = async (q, cur) => {
  const v = view();
  const { ns, select } = await nsSelect(q, "jobs");
  const queue = q.get("q") || "";
  const state = q.get("state") || "ready";
  v.append(el("h1", {}, "Jobs"));
  const qIn = el("input", { id: "jobs-queue", value: queue, placeholder: "queue", "aria-label": "Queue", list: "queue-names" });
  const names = el("datalist", { id: "queue-names" });
  const tagForm = el("form", { class: "inline", id: "cancel-tag", onsubmit: async (ev) => {
    ev.preventDefault();
    const t = tagIn.value.trim();
    const m = t.match(/^([^=]+)=(.*)$/);
    if (!m) { toast("Write the tag as name=value", true); return; }
    const ok = await confirmAction({ title: "Cancel by tag", text: `Every job tagged ${m[1]}=${m[2]} in every queue of namespace ${ns} that is not reserved is deleted.`, ok: "Cancel jobs" });
    if (!ok) return;
    try { const r = await api("DELETE", v1(ns, `/jobs?tag.${enc(m[1])}=${enc(m[2])}`)); toast(`Cancelled ${r.deleted} job(s) tagged ${t}`); reload(); } catch (e) { toast("Cancel failed: " + e.message, true); }
  } });
  const tagIn = el("input", { placeholder: "tag name=value", "aria-label": "Tag to cancel by" });
  tagForm.append(tagIn, el("button", { type: "submit", class: "danger" }, "Cancel by tag (all queues)"));
  v.append(el("div", { class: "toolbar" }, select,
    el("form", { class: "inline", onsubmit: (ev) => { ev.preventDefault(); go("jobs", { ns, q: qIn.value, state }); } }, el("label", {}, "Queue ", qIn), names, el("button", { type: "submit" }, "Show")),
    el("span", { class: "grow" }), tagForm));
  api("GET", v1(ns, "/queues?limit=200")).then((r) => names.replaceChildren(...r.queues.map((x) => el("option", { value: x.name })))).catch(() => {});
  if (!queue) { v.append(el("p", { class: "muted" }, "Pick a queue (or open one from the Queues page).")); return; }

  const tabs = el("div", { class: "tabs", id: "state-tabs" });
  const bulk = el("div", { class: "toolbar", id: "bulk" });
  const table = el("table", { id: "jobs" });
  const pager = el("div", { class: "pager" });
  v.append(tabs, bulk, table, pager);
  const selected = new Set();
  const cursors = [""];
  let page = 0, jobs = [], next = "", counts = {};

  // The counts refresh with every event; the list too, unless listing
  // is slow (a page deep in a queue of a million jobs): then it waits 20
  // times as long as the last listing took, so a dashboard left open costs
  // the server at most about 5% of its time.
  let listedAt = 0, listTook = 0;
  const load = async (force = true) => {
    const listNow = force || Date.now() - listedAt >= Math.max(900, 20 * listTook);
    const t0 = performance.now();
    const [qi, list] = await Promise.all([
      api("GET", v1(ns, `/queues/${enc(queue)}`)),
      listNow ? api("GET", v1(ns, `/queues/${enc(queue)}/jobs?state=${state}&limit=${PAGE}` + (cursors[page] ? "&cursor=" + enc(cursors[page]) : ""))) : null,
    ]);
    counts = qi.counts;
    if (list) {
      listTook = performance.now() - t0;
      listedAt = Date.now();
      jobs = list.jobs;
      next = list.next_cursor || "";
    }
    for (const id of [...selected]) if (!jobs.some((j) => j.id === id)) selected.delete(id);
    render();
  };
  const reload = () => load().catch((e) => toast(e.message, true));

  const act = async (what, fn) => {
    try { await fn(); toast(what); selected.clear(); await load(); } catch (e) { toast(what + " failed: " + e.message, true); await load().catch(() => {}); }
  };
  const eachSelected = (fn) => Promise.all([...selected].map(fn));

  const render = () => {
    tabs.replaceChildren(...STATES.map((s) => el("a", { href: `#/jobs?ns=${enc(ns)}&q=${enc(queue)}&state=${s}`, class: s === state ? "active" : "", id: "tab-" + s }, `${s} (${num(counts[s])})`)));
    const n = selected.size;
    bulk.replaceChildren(...[
      el("span", { class: "muted" }, `${n} selected`),
      state === "dead" ? el("button", { disabled: !n, id: "bulk-respawn", onclick: () => act(`Respawned ${n} job(s)`, () => api("POST", v1(ns, `/queues/${enc(queue)}/dead/respawn`), { ids: [...selected] })) }, "Respawn selected") : null,
      state === "delayed" ? el("button", { disabled: !n, onclick: () => act(`${n} job(s) made ready`, () => eachSelected((id) => api("PATCH", v1(ns, `/queues/${enc(queue)}/jobs/${enc(id)}`), { delay: "0s" }))) }, "Run selected now") : null,
      state !== "reserved" && state !== "completed" ? el("button", { class: "danger", disabled: !n, onclick: async () => {
        if (await confirmAction({ title: `Delete ${n} job(s)?`, text: `The selected ${state} jobs of ${queue} are deleted.`, ok: "Delete" })) act(`Deleted ${n} job(s)`, () => eachSelected((id) => api("DELETE", v1(ns, `/queues/${enc(queue)}/jobs/${enc(id)}`))));
      } }, "Delete selected") : null,
      el("span", { class: "grow" }),
      state === "dead" ? el("button", { id: "respawn-all", disabled: !counts.dead, onclick: async () => {
        if (await confirmAction({ title: `Respawn all ${num(counts.dead)} dead jobs of ${queue}?`, text: "They become ready with attempt 0.", ok: "Respawn all" })) act("Respawned all dead jobs", () => api("POST", v1(ns, `/queues/${enc(queue)}/dead/respawn`), { limit: counts.dead }));
      } }, "Respawn all dead") : null,
      state === "dead" ? el("button", { class: "danger", disabled: !counts.dead, onclick: async () => {
        if (await confirmAction({ title: `Delete all ${num(counts.dead)} dead jobs of ${queue}?`, word: queue, ok: "Delete all dead" })) act("Deleted all dead jobs", () => api("DELETE", v1(ns, `/queues/${enc(queue)}/dead`)));
      } }, "Delete all dead") : null,
    ].filter(Boolean));
    const all = el("input", { type: "checkbox", "aria-label": "Select all on this page", checked: jobs.length > 0 && jobs.every((j) => selected.has(j.id)),
      onchange: (ev) => { for (const j of jobs) ev.target.checked ? selected.add(j.id) : selected.delete(j.id); render(); } });
    const timeCol = state === "delayed" ? ["Runs", "activate_at"] : state === "reserved" ? ["Reserved until", "reserved_until"] : ["Created", "created_at"];
    table.replaceChildren(
      el("thead", {}, el("tr", {}, el("th", {}, all), el("th", {}, "ID"), el("th", {}, "Payload"), el("th", {}, "Tags"), el("th", { class: "num" }, "Attempt"), el("th", {}, "Last error"), el("th", {}, timeCol[0]))),
      el("tbody", {}, jobs.length ? jobs.map((j) => el("tr", { dataset: { id: j.id } },
        el("td", {}, el("input", { type: "checkbox", "aria-label": "Select " + j.id, checked: selected.has(j.id), onchange: (ev) => { ev.target.checked ? selected.add(j.id) : selected.delete(j.id); render(); } })),
        el("td", {}, el("a", { href: `#/job?ns=${enc(ns)}&q=${enc(queue)}&id=${enc(j.id)}` }, j.id)),
        el("td", {}, el("code", {}, preview(j))),
        el("td", {}, tagChips(j.tags)),
        el("td", { class: "num" }, `${j.attempt}/${j.tries || "∞"}`),
        el("td", {}, j.last_error || ""),
        el("td", {}, timeCell(j[timeCol[1]])),
      )) : el("tr", {}, el("td", { colspan: 7, class: "muted" }, `No ${state} jobs.`))),
    );
    pager.replaceChildren(
      el("button", { disabled: page === 0, onclick: () => { page--; reload(); } }, "← Previous"),
      el("span", {}, `Page ${page + 1} · ${jobs.length} of ${num(counts[state])} ${state}`),
      el("button", { disabled: !next, onclick: () => { cursors[page + 1] = next; page++; reload(); } }, "Next →"),
    );
  };
  await load();
  live(() => load(false));
};

function preview(j) {
  let s = j.payload !== undefined ? JSON.stringify(j.payload) : j.payload_base64 !== undefined ? "base64:" + j.payload_base64 : "";
  return s.length > 80 ? s.slice(0, 80) + "…" : s;
}

function tagChips(tags) {
  return Object.entries(tags || {}).map(([k, v]) => el("span", { class: "tag" }, k + "=" + v));
}

function b64bytes(s) {
  const bin = atob(s);
  const b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return b;
}

function hexdump(b) {
  const lines = [];
  for (let i = 0; i < b.length && i < 64 * 1024; i += 16) {
    const row = [...b.slice(i, i + 16)];
    lines.push(i.toString(16).padStart(8, "0") + "  " + row.map((x) => x.toString(16).padStart(2, "0")).join(" ").padEnd(48) + "  " + row.map((x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : ".")).join(""));
  }
  if (b.length > 64 * 1024) lines.push(`… ${b.length - 64 * 1024} more bytes`);
  return lines.join("\n");
}

pages.job = async (q) => {
  const ns = q.get("ns") || "default", queue = q.get("q") || "", id = q.get("id") || "";
  const v = view();
  v.append(el("p", {}, el("a", { href: `#/jobs?ns=${enc(ns)}&q=${enc(queue)}` }, "← " + ns + "/" + queue)));
  const title = el("h1", {}, "Job ", el("code", {}, id));
  const box = el("div", {});
  v.append(title, box);
  const path = v1(ns, `/queues/${enc(queue)}/jobs/${enc(id)}`);
  let mode = "json";
  let job = null;
  const load = async () => {
    try { job = await api("GET", path); } catch (e) {
      if (e.status === 404) { box.replaceChildren(el("p", { class: "muted", id: "job-gone" }, "This job is gone (acked, deleted or expired).")); job = null; return; }
      throw e;
    }
    render();
  };
  const act = async (what, fn) => { try { await fn(); toast(what); await load(); } catch (e) { toast(what + " failed: " + e.message, true); } };
  const render = () => {
    const j = job;
    const isJSON = j.payload !== undefined;
    const raw = isJSON ? new TextEncoder().encode(JSON.stringify(j.payload)) : b64bytes(j.payload_base64 || "");
    if (!isJSON && mode === "json") mode = "text";
    let shown;
    if (mode === "json") shown = JSON.stringify(j.payload, null, 2);
    else if (mode === "text") shown = new TextDecoder("utf-8", { fatal: false }).decode(raw);
    else shown = hexdump(raw);
    const row = (k, val) => [el("dt", {}, k), el("dd", {}, val)];
    const at = el("input", { type: "datetime-local", "aria-label": "Run at", required: true });
    const actions = el("div", { class: "toolbar", id: "job-actions" },
      j.state === "dead" ? el("button", { class: "primary", id: "respawn", onclick: () => act("Respawned", () => api("POST", v1(ns, `/queues/${enc(queue)}/dead/respawn`), { ids: [j.id] })) }, "Respawn") : null,
      j.state === "delayed" ? el("button", { class: "primary", id: "run-now", onclick: () => act("Made ready", () => api("PATCH", path, { delay: "0s" })) }, "Run now") : null,
      ["delayed", "ready", "dead", "blocked"].includes(j.state) ? el("form", { class: "inline", onsubmit: (ev) => {
        ev.preventDefault();
        const d = new Date(at.value);
        if (isNaN(d)) { toast("Pick a date and time", true); return; }
        act("Rescheduled for " + d.toLocaleString(), () => api("PATCH", path, { at: d.toISOString() }));
      } }, at, el("button", { type: "submit" }, "Reschedule")) : null,
      ["delayed", "ready", "dead", "blocked"].includes(j.state) ? el("button", { onclick: async () => {
        const text = await editText({ title: "Edit payload", help: isJSON ? "JSON payload." : "Binary payload, as base64.", text: isJSON ? JSON.stringify(j.payload, null, 2) : j.payload_base64, check: isJSON ? jsonCheck : null });
        if (text === null) return;
        act("Payload saved", () => api("PATCH", path, isJSON ? { payload: JSON.parse(text) } : { payload_base64: text.trim() }));
      } }, "Edit payload") : null,
      j.state !== "reserved" && j.state !== "completed" ? el("button", { class: "danger", id: "delete-job", onclick: async () => {
        if (await confirmAction({ title: "Delete job " + j.id + "?", ok: "Delete" })) act("Deleted", () => api("DELETE", path));
      } }, "Delete") : null,
    );
    { const d = new Date(Date.now() + 3600e3); d.setSeconds(0, 0); at.value = new Date(d - d.getTimezoneOffset() * 60e3).toISOString().slice(0, 16); }
    box.replaceChildren(actions, el("div", { class: "cols" },
      el("dl", { class: "fields", id: "job-fields" },
        row("State", el("span", { class: "badge st-" + j.state, id: "job-state" }, j.state)),
        row("Queue", ns + "/" + j.queue), row("Priority", j.priority), row("Key", j.key || "–"),
        row("Tags", el("span", { id: "job-tags" }, tagChips(j.tags))),
        row("Attempt", `${j.attempt} of ${j.tries || "unlimited"}`), row("TTR", j.ttr),
        row("Last error", el("span", { id: "job-error" }, j.last_error || "–")),
        row("Created", timeCell(j.created_at)), row("Activates", timeCell(j.activate_at)),
        row("Expires", timeCell(j.expire_at)), j.reserved_until ? row("Reserved until", timeCell(j.reserved_until)) : null,
        j.cron ? row("Cron", j.cron) : null, j.reply_to ? row("Reply to", j.reply_to) : null, j.notify ? row("Notify", j.notify) : null,
      ),
      el("div", {},
        el("div", { class: "tabs" }, ...[["json", "JSON"], ["text", "Text"], ["hex", "Hex"]].map(([m, label]) =>
          el("a", { href: "#", class: m === mode ? "active" : "", onclick: (ev) => { ev.preventDefault(); if (m === "json" && !isJSON) return; mode = m; render(); } }, label)),
          el("span", { class: "muted" }, ` ${raw.length} bytes`)),
        el("pre", { id: "payload" }, shown),
        j.result !== undefined ? [el("h2", {}, "Result"), el("pre", {}, JSON.stringify(j.result, null, 2))] : null,
      )));
  };
  await load();
};

// ---------------------------------------------------------------- Scheduled

pages.scheduled = async (q) => {
  const v = view();
  const { ns, select } = await nsSelect(q, "scheduled");
  const range = q.get("range") || "day";
  const spans = { hour: 3600, day: 86400, week: 7 * 86400 };
  const span = spans[range] || 86400;
  v.append(el("h1", {}, "Scheduled"), el("div", { class: "toolbar" }, select,
    el("div", { class: "tabs" }, Object.keys(spans).map((r) => el("a", { href: `#/scheduled?ns=${enc(ns)}&range=${r}`, class: r === range ? "active" : "" }, "next " + r)))));
  const tl = el("div", { class: "timeline", id: "timeline" });
  const list = el("table", { id: "upcoming" });
  v.append(tl, el("h2", {}, "Next activations"), list);
  const PER = 200;
  const load = async () => {
    const qs = (await api("GET", v1(ns, "/queues?limit=1000"))).queues.filter((x) => x.counts.delayed > 0).slice(0, 40);
    const per = await Promise.all(qs.map((x) => api("GET", v1(ns, `/queues/${enc(x.name)}/jobs?state=delayed&limit=${PER}`)).then((r) => ({ q: x, jobs: r.jobs }))));
    const now = Date.now(), end = now + span * 1000;
    const W = 1000, left = 170, rowH = 26, H = 30 + Math.max(1, per.length) * rowH;
    const NS = "http://www.w3.org/2000/svg";
    const s = (tag, attrs, text) => { const e = document.createElementNS(NS, tag); for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, val); if (text !== undefined) e.textContent = text; return e; };
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Upcoming activations per queue" });
    const x = (t) => left + ((t - now) / (end - now)) * (W - left - 10);
    for (let i = 0; i <= 6; i++) {
      const t = now + (i / 6) * (end - now);
      svg.append(s("line", { x1: x(t), x2: x(t), y1: 18, y2: H, class: "axis" }),
        s("text", { x: x(t), y: 12, "text-anchor": i === 0 ? "start" : i === 6 ? "end" : "middle" }, i === 0 ? "now" : span <= 86400 ? new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : new Date(t).toLocaleDateString([], { weekday: "short", day: "numeric" })));
    }
    const upcoming = [];
    per.forEach(({ q: qu, jobs }, i) => {
      const y = 30 + i * rowH + rowH / 2;
      const inRange = jobs.filter((j) => new Date(j.activate_at).getTime() <= end);
      const more = jobs.length === PER && inRange.length === PER ? "+" : "";
      svg.append(s("text", { x: 4, y: y + 4, class: "label" }, (qu.name.length > 18 ? qu.name.slice(0, 17) + "…" : qu.name) + ` (${inRange.length}${more})`));
      for (const j of inRange) {
        const t = Math.max(now, new Date(j.activate_at).getTime());
        const c = s("circle", { cx: x(t), cy: y, r: 4, class: "dot" });
        c.append(s("title", {}, `${j.id} — ${new Date(j.activate_at).toLocaleString()}`));
        svg.append(c);
        upcoming.push({ q: qu.name, j });
      }
    });
    if (!per.length) svg.append(s("text", { x: left, y: 40 }, "Nothing is scheduled in this namespace."));
    tl.replaceChildren(svg);
    upcoming.sort((a, b) => new Date(a.j.activate_at) - new Date(b.j.activate_at));
    list.replaceChildren(el("thead", {}, el("tr", {}, el("th", {}, "When"), el("th", {}, "Queue"), el("th", {}, "Job"), el("th", {}, "Payload"))),
      el("tbody", {}, upcoming.slice(0, 25).map(({ q: qn, j }) => el("tr", {}, el("td", {}, timeCell(j.activate_at)), el("td", {}, qn),
        el("td", {}, el("a", { href: `#/job?ns=${enc(ns)}&q=${enc(qn)}&id=${enc(j.id)}` }, j.id)), el("td", {}, el("code", {}, preview(j)))))));
  };
  await load();
  let n = 0;
  live(() => (++n % 5 === 0 ? load() : null)); // the timeline moves slowly: every 5 s
};

// ---------------------------------------------------------------- Channels

pages.channels = async (q, cur) => {
  const v = view();
  const { ns, select } = await nsSelect(q, "channels");
  const ch = q.get("ch") || "";
  v.append(el("h1", {}, "Channels"), el("div", { class: "toolbar" }, select));
  const table = el("table", { id: "channels" });
  v.append(table);
  const load = async () => {
    const r = await api("GET", v1(ns, "/channels?limit=200"));
    table.replaceChildren(el("thead", {}, el("tr", {}, el("th", {}, "Channel"), el("th", { class: "num" }, "Subscribers"), el("th", { class: "num" }, "Last offset"), el("th", {}, "Epoch"), el("th", { class: "num" }, "In history"))),
      el("tbody", {}, r.channels.length ? r.channels.map((c) => el("tr", {}, el("td", {}, el("a", { href: `#/channels?ns=${enc(ns)}&ch=${enc(c.channel)}` }, c.channel)),
        el("td", { class: "num" }, num(c.subscribers)), el("td", { class: "num" }, num(c.offset)), el("td", {}, el("code", {}, c.epoch)), el("td", { class: "num" }, num(c.history))))
        : el("tr", {}, el("td", { colspan: 5, class: "muted" }, "No live channels in this namespace."))));
  };
  await load();
  live(load);

  const chIn = el("input", { value: ch, placeholder: "channel", "aria-label": "Channel", id: "channel-name" });
  const dataIn = el("textarea", { rows: 3, id: "publish-data", "aria-label": "Message (JSON)" }, '{"hello": "world"}');
  v.append(el("h2", {}, "Tail and publish"), el("form", { class: "inline", onsubmit: (ev) => { ev.preventDefault(); go("channels", { ns, ch: chIn.value }); } }, chIn, el("button", { type: "submit" }, "Tail")));
  if (!ch) return;
  const tailBox = el("div", { class: "tail", id: "tail" });
  v.append(el("div", { class: "cols" },
    el("div", {}, el("h2", {}, "Live tail of ", el("code", {}, ch)), tailBox),
    el("div", {}, el("h2", {}, "Publish a test message"), dataIn, el("p", {}, el("button", { id: "publish", onclick: async () => {
      const msg = jsonCheck(dataIn.value);
      if (msg) { toast(msg, true); return; }
      try { const r = await api("POST", v1(ns, `/channels/${enc(ch)}/publish`), { data: JSON.parse(dataIn.value) }); toast(`Published at offset ${r.offset}`); } catch (e) { toast("Publish failed: " + e.message, true); }
    } }, "Publish")))));
  // The tail long-polls the history (each request waits up to 25 s for the
  // next publication), starting from the last 20 held.
  const ctl = new AbortController();
  cur.cleanup = () => ctl.abort();
  let since = 0, epoch = "";
  const first = await api("GET", v1(ns, `/channels/${enc(ch)}/history?since=0&limit=1000`));
  const show = (pubs) => {
    for (const p of pubs) tailBox.prepend(el("div", { class: "msg" }, el("span", { class: "muted" }, `#${p.offset} ${new Date(p.time).toLocaleTimeString()} `), el("code", {}, JSON.stringify(p.data))));
    while (tailBox.childNodes.length > 200) tailBox.lastChild.remove();
  };
  show(first.publications.slice(-20));
  since = first.offset; epoch = first.epoch;
  (async () => {
    while (!ctl.signal.aborted) {
      try {
        const headers = token ? { Authorization: "Bearer " + token } : {};
        const r = await fetch(v1(ns, `/channels/${enc(ch)}/history?since=${since}&epoch=${enc(epoch)}&wait=25s&limit=100`), { headers, signal: ctl.signal, cache: "no-store" });
        const h = await r.json();
        if (!r.ok) throw new Error(h.error ? h.error.message : r.status);
        if (!h.recovered) tailBox.prepend(el("div", { class: "msg muted" }, "(history moved on: some messages were missed)"));
        show(h.publications);
        since = h.offset; epoch = h.epoch;
      } catch (e) {
        if (ctl.signal.aborted) return;
        await new Promise((res) => setTimeout(res, 2000));
      }
    }
  })();
};

// ---------------------------------------------------------------- Namespaces & tokens

pages.namespaces = async () => {
  const v = view();
  v.append(el("h1", {}, "Namespaces & tokens"));
  const table = el("table", { id: "namespaces" });
  const secret = el("div", { id: "new-token" });
  const nameIn = el("input", { placeholder: "new namespace", "aria-label": "Namespace name", id: "ns-name", required: true });
  v.append(el("form", { class: "inline toolbar", onsubmit: async (ev) => {
    ev.preventDefault();
    try { await api("POST", "/admin/namespaces", { name: nameIn.value }); toast("Created namespace " + nameIn.value); namespaces = null; nameIn.value = ""; load(); } catch (e) { toast("Not created: " + e.message, true); }
  } }, nameIn, el("button", { type: "submit", class: "primary" }, "Create namespace")), secret, table);
  const revokeIn = el("input", { type: "password", placeholder: "token to revoke", "aria-label": "Token to revoke", autocomplete: "off" });
  const revokeNs = el("select", { "aria-label": "Namespace of the token" });
  v.append(el("h2", {}, "Revoke a token"), el("form", { class: "inline", onsubmit: async (ev) => {
    ev.preventDefault();
    if (!(await confirmAction({ title: "Revoke this token?", text: `Clients of ${revokeNs.value} using it are refused from now on.`, ok: "Revoke" }))) return;
    try { await api("DELETE", `/admin/namespaces/${enc(revokeNs.value)}/tokens/${enc(revokeIn.value)}`); toast("Token revoked"); revokeIn.value = ""; } catch (e) { toast("Not revoked: " + e.message, true); }
  } }, revokeNs, revokeIn, el("button", { type: "submit", class: "danger" }, "Revoke")),
  el("p", { class: "muted" }, "Tokens are stored hashed: the server cannot list them, and shows a new token only once."));

  const load = async () => {
    const r = await api("GET", "/admin/namespaces");
    revokeNs.replaceChildren(...r.namespaces.map((n) => el("option", { value: n.name }, n.name)));
    table.replaceChildren(el("thead", {}, el("tr", {}, el("th", {}, "Namespace"), el("th", {}, "Auto-create queues"), el("th", {}, "Channel history"), el("th", {}, "Actions"))),
      el("tbody", {}, r.namespaces.map((n) => el("tr", { dataset: { ns: n.name } },
        el("td", {}, el("a", { href: `#/queues?ns=${enc(n.name)}` }, n.name)),
        el("td", {}, n.auto_create_queues ? "yes" : "no"),
        el("td", {}, n.channel_history ? `size ${n.channel_history.size}, ttl ${n.channel_history.ttl}${n.channel_history.durable ? ", durable" : ""}` : el("span", { class: "muted" }, "server defaults")),
        el("td", {}, el("div", { class: "actions" },
          el("button", { onclick: async () => {
            const desc = prompt("Description of the new token for " + n.name + " (who will use it):", "");
            if (desc === null) return;
            try {
              const t = await api("POST", `/admin/namespaces/${enc(n.name)}/tokens`, { description: desc });
              secret.replaceChildren(el("p", {}, `New token for ${n.name} — copy it now, it is not shown again:`), el("div", { class: "secret" }, t.token),
                el("p", {}, el("button", { onclick: () => { navigator.clipboard?.writeText(t.token); toast("Copied"); } }, "Copy"), " ", el("button", { onclick: () => secret.replaceChildren() }, "Done")));
            } catch (e) { toast("No token: " + e.message, true); }
          } }, "New token"),
          el("button", { onclick: async () => {
            const text = await editText({ title: "History policy of " + n.name, help: "channel_history: size (publications per channel, -1 none), ttl (e.g. \"10m\", \"-1s\" no expiry), durable (through the log).",
              text: JSON.stringify({ auto_create_queues: n.auto_create_queues, channel_history: n.channel_history || { size: 1000, ttl: "10m", durable: false } }, null, 2), check: jsonCheck });
            if (text === null) return;
            try { await api("PUT", `/admin/namespaces/${enc(n.name)}`, JSON.parse(text)); toast("Saved " + n.name); load(); } catch (e) { toast("Not saved: " + e.message, true); }
          } }, "Edit policy"),
        )),
      ))));
  };
  await load();
};

// ---------------------------------------------------------------- keyboard

document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const tag = document.activeElement ? document.activeElement.tagName : "";
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || document.querySelector("dialog[open]")) return;
  const n = "123456".indexOf(ev.key);
  if (n >= 0) { go(["overview", "queues", "jobs", "scheduled", "channels", "namespaces"][n], {}); ev.preventDefault(); }
});

// ---------------------------------------------------------------- start

(async () => {
  if (token) $("logout").hidden = false;
  try {
    await api("GET", "/admin/stats?window=1s");
  } catch (e) {
    if (e.status === 401) return; // the login form is up; it starts everything
    view().replaceChildren(el("p", { class: "error" }, "The server did not answer: " + e.message));
    return;
  }
  startStream();
  route();
})();

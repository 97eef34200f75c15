// chronoq.js — browser client for chronoq's real-time channels.
//
// One dependency-free ES module, no build step. It speaks the protocol of
// docs/realtime.md: WebSocket (/v1/ws) with recovery of missed
// publications, reconnection with exponential backoff and full jitter, and a
// Server-Sent Events (/v1/sse) fallback for networks where WebSocket does not
// get through. See README.md next to this file.
//
//   import { Chronoq } from "./chronoq.js";
//   const cq = new Chronoq("https://queue.example.com", { getToken: fetchJwt });
//   cq.subscribe("app/news", {
//     onPublication: (data, pub) => show(data),
//     onReset: () => reloadNewsFromTheApi(),   // a gap could not be recovered
//   });

const STABLE_MS = 10000; // a connection this old resets the backoff when lost

const TERMINAL_JOB_EVENTS = new Set(["completed", "dead", "expired", "cancelled"]);

// A channel without a known position inside an SSE stream whose other
// channels resume: the server wants one since/epoch per channel, and an
// epoch no channel has answers recovered:false with nothing replayed —
// that is, "from now on", which is what a new subscription means.
const NO_EPOCH = "-";

/** An error answered by the server ({code, message}) or raised by the client. */
export class ChronoqError extends Error {
  constructor(code, message) {
    super(message ? `${code}: ${message}` : code);
    this.name = "ChronoqError";
    this.code = code;
  }
}

/** Whether a close code (or a disconnect push) asks the client to come back. */
export function shouldReconnect(code) {
  if (code >= 4000 && code <= 4499) return true;
  if (code >= 4500 && code <= 4999) return false;
  // 1002 protocol error, 1007 invalid UTF-8, 1009 message too big: a broken
  // client; coming back would only repeat it.
  if (code === 1002 || code === 1007 || code === 1009) return false;
  return true; // 1000, 1001, 1006 (no close frame), 1011, 1012, ...
}

/** Delay before reconnect attempt n (0-based): full jitter, capped. */
export function backoffDelay(attempt, minDelay, maxDelay, random = Math.random) {
  const ceiling = Math.min(maxDelay, minDelay * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}

function report(err) {
  // A throwing application callback must not break the client; surface it
  // the way an uncaught error in an event handler would be.
  if (typeof globalThis.reportError === "function") globalThis.reportError(err);
  else setTimeout(() => { throw err; }, 0);
}

function call(fn, ...args) {
  if (typeof fn !== "function") return;
  try {
    fn(...args);
  } catch (err) {
    report(err);
  }
}

function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  promise.catch(() => {}); // rejections are for whoever awaits; never "unhandled"
  return { promise, resolve, reject };
}

function splitBase(url) {
  // Accepts the server's base URL (http, https, ws, wss, or relative to the
  // page) and returns it without a trailing /v1/ws, /v1/sse or slash.
  const base = typeof location !== "undefined" ? location.href : undefined;
  const u = new URL(url || "/", base);
  u.hash = "";
  u.search = "";
  u.pathname = u.pathname.replace(/\/v1\/(ws|sse)\/?$/, "").replace(/\/+$/, "");
  return u;
}

function withScheme(u, secure, plain) {
  const c = new URL(u.href);
  const isSecure = c.protocol === "https:" || c.protocol === "wss:";
  c.protocol = isSecure ? secure : plain;
  return c;
}

/**
 * A client for chronoq channels. It connects by itself (unless
 * options.autoConnect is false) and keeps reconnecting until close() or
 * until the server says not to come back.
 */
export class Chronoq {
  /**
   * @param {string} url  the server, e.g. "https://queue.example.com" (or a
   *   ws(s):// URL, or "" for the page's own origin)
   * @param {object} [options]
   * @param {string} [options.token]  namespace token or JWT
   * @param {() => (string|Promise<string>)} [options.getToken]  called for
   *   every (re)connect and before the token expires (JWT refresh)
   * @param {"auto"|"websocket"|"sse"} [options.transport="auto"]
   * @param {string} [options.wsUrl]  override of <url>/v1/ws
   * @param {string} [options.sseUrl]  override of <url>/v1/sse
   * @param {number} [options.fallbackAfter=3]  failed WebSocket attempts
   *   (never connected) before "auto" switches to SSE
   * @param {number} [options.minDelay=500]  backoff base, ms
   * @param {number} [options.maxDelay=30000]  backoff cap, ms
   * @param {number} [options.connectTimeout=10000]  ms to open and connect
   * @param {number} [options.refreshBefore=10000]  ms before a JWT expires
   *   to refresh it (with getToken)
   * @param {boolean} [options.autoConnect=true]
   * @param {Function} [options.WebSocket]  implementation (default: global)
   * @param {Function} [options.EventSource]  implementation (default: global)
   */
  constructor(url, options = {}) {
    const base = splitBase(url);
    /** The options in effect (token is updated by getToken). */
    this.options = {
      transport: "auto",
      fallbackAfter: 3,
      minDelay: 500,
      maxDelay: 30000,
      connectTimeout: 10000,
      refreshBefore: 10000,
      autoConnect: true,
    };
    for (const [k, v] of Object.entries(options)) {
      if (v !== undefined) this.options[k] = v; // undefined keeps the default
    }
    const o = this.options;
    const page = typeof location !== "undefined" ? location.href : undefined;
    this.wsUrl = withScheme(o.wsUrl ? new URL(o.wsUrl, page) : new URL("v1/ws", base.href.replace(/\/?$/, "/")), "wss:", "ws:").href;
    this.sseUrl = withScheme(o.sseUrl ? new URL(o.sseUrl, page) : new URL("v1/sse", base.href.replace(/\/?$/, "/")), "https:", "http:").href;
    this._WebSocket = o.WebSocket !== undefined ? o.WebSocket : globalThis.WebSocket;
    this._EventSource = o.EventSource !== undefined ? o.EventSource : globalThis.EventSource;

    this.state = "idle"; // idle | connecting | connected | disconnected | closed
    this.transport = null; // "websocket" | "sse" while connecting/connected
    this.session = null; // the connect answer (WebSocket): namespace, user, expires
    this.reconnects = 0; // successful connections after the first

    this._listeners = new Map();
    this._chans = new Map(); // "ns/name" -> channel record
    this._gen = 0; // bumps on every transport change; stale callbacks check it
    this._attempt = 0;
    this._wsFailures = 0;
    this._wsEverConnected = false;
    this._useSSE = o.transport === "sse" || (o.transport === "auto" && !this._WebSocket);
    this._everConnected = false;
    this._afterLoss = false;
    this._connectedAt = 0;
    this._timer = null;
    this._refreshTimer = null;
    this._ws = null;
    this._es = null;
    this._nextId = 0;
    this._pending = new Map();
    this._outbox = []; // publishes waiting for a connection
    this._sseReopen = false;

    if (typeof globalThis.addEventListener === "function") {
      this._onOnline = () => {
        if (this.state === "disconnected") this._retryNow();
      };
      globalThis.addEventListener("online", this._onOnline);
    }
    if (o.autoConnect) queueMicrotask(() => { if (this.state === "idle") this.connect(); });
  }

  // ---- events ---------------------------------------------------------

  /**
   * Listen to client events: "state" ({state, transport}), "connected"
   * ({transport, session}), "disconnect" ({code, reason, reconnect}),
   * "transport" ({transport}, on a switch to SSE), "error" (Error).
   * Returns a function that removes the listener.
   */
  on(type, fn) {
    if (!this._listeners.has(type)) this._listeners.set(type, new Set());
    this._listeners.get(type).add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    this._listeners.get(type)?.delete(fn);
  }

  _emit(type, ev) {
    for (const fn of [...(this._listeners.get(type) || [])]) call(fn, ev);
  }

  _setState(state) {
    if (this.state === state) return;
    this.state = state;
    this._emit("state", { state, transport: this.transport });
  }

  // ---- lifecycle ------------------------------------------------------

  /** Starts connecting (again, after close() or a "do not reconnect"). */
  connect() {
    if (this.state === "connecting" || this.state === "connected") return;
    this._attempt = 0;
    this._wsFailures = 0;
    this._open();
  }

  /** Closes the connection for good (until connect()). */
  close() {
    this._stop(new ChronoqError("closed", "client closed"));
    this._setState("closed");
  }

  /** Releases the client entirely (close() plus dropping listeners). */
  destroy() {
    this.close();
    if (this._onOnline) globalThis.removeEventListener("online", this._onOnline);
    this._chans.clear();
    this._listeners.clear();
  }

  _stop(err) {
    this._gen++;
    clearTimeout(this._timer);
    clearTimeout(this._refreshTimer);
    this._timer = this._refreshTimer = null;
    this._dropTransport();
    this._failPending(err);
    for (const p of this._outbox.splice(0)) p.reject(err);
  }

  _dropTransport() {
    if (this._ws) {
      const ws = this._ws;
      this._ws = null;
      ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
      try { ws.close(1000); } catch { /* already closed */ }
    }
    if (this._es) {
      this._es.close();
      this._es = null;
    }
    clearTimeout(this._connectTimer);
    this.session = null;
    for (const ch of this._chans.values()) {
      if (ch.status !== "gone") ch.status = "pending";
    }
  }

  _failPending(err) {
    for (const p of this._pending.values()) p.reject(err);
    this._pending.clear();
  }

  async _token() {
    const o = this.options;
    if (typeof o.getToken === "function") {
      const t = await o.getToken();
      if (t) o.token = t;
    }
    return o.token || "";
  }

  _open() {
    clearTimeout(this._timer);
    this._timer = null;
    this._gen++;
    this._dropTransport();
    this.transport = this._useSSE ? "sse" : "websocket";
    this._setState("connecting");
    if (this._useSSE) this._openSSE(this._gen);
    else this._openWS(this._gen);
  }

  // Lost the connection (or failed to get one): come back with backoff, or
  // stop when the server said so.
  _lost(gen, info) {
    if (gen !== this._gen) return;
    this._gen++;
    this._dropTransport();
    clearTimeout(this._refreshTimer);
    const err = new ChronoqError(info.reason || "disconnected", "connection lost");
    this._failPending(err);
    this._emit("disconnect", { code: info.code, reason: info.reason, reconnect: info.reconnect });
    // The backoff starts over only after a connection that lasted: one
    // that is cut again and again right after connecting (a flapping
    // proxy, a server that keeps failing) keeps backing off.
    if (this._connectedAt && Date.now() - this._connectedAt >= STABLE_MS) this._attempt = 0;
    this._connectedAt = 0;
    if (!info.reconnect) {
      for (const p of this._outbox.splice(0)) p.reject(err);
      this._setState("closed");
      return;
    }
    if (info.neverOpened && !this._useSSE && this.options.transport === "auto" && !this._wsEverConnected) {
      this._wsFailures++;
      if (this._wsFailures >= this.options.fallbackAfter && this._EventSource) {
        this._useSSE = true;
        this._attempt = 0;
        const e = new ChronoqError("not_supported", "publish needs the WebSocket transport");
        for (const p of this._outbox.splice(0)) p.reject(e);
        this._emit("transport", { transport: "sse" });
      }
    }
    this._afterLoss = true;
    this._setState("disconnected");
    const delay = backoffDelay(this._attempt++, this.options.minDelay, this.options.maxDelay);
    this._timer = setTimeout(() => this._open(), delay);
  }

  _retryNow() {
    clearTimeout(this._timer);
    this._open();
  }

  _connected(session) {
    this._connectedAt = Date.now();
    if (this._afterLoss && this._everConnected) this.reconnects++;
    this._afterLoss = false;
    this._everConnected = true;
    this.session = session || null;
    this._setState("connected");
    this._emit("connected", { transport: this.transport, session: this.session });
  }

  // ---- WebSocket ------------------------------------------------------

  async _openWS(gen) {
    let token;
    try {
      token = await this._token();
    } catch (err) {
      this._emit("error", err);
      this._lost(gen, { code: 0, reason: "get_token_failed", reconnect: true, neverOpened: false });
      return;
    }
    if (gen !== this._gen) return;
    let ws;
    try {
      ws = new this._WebSocket(this.wsUrl);
    } catch (err) {
      this._emit("error", err);
      this._lost(gen, { code: 0, reason: "websocket_failed", reconnect: true, neverOpened: true });
      return;
    }
    this._ws = ws;
    // "Never connected" (no connect answer: refused, blocked by a proxy,
    // or frames that never get through) is what counts towards falling
    // back to SSE.
    let connected = false;
    let disconnect = null; // the server's {"disconnect"} push, if any
    this._connectTimer = setTimeout(() => {
      if (gen === this._gen && !connected) {
        this._lost(gen, { code: 0, reason: "connect_timeout", reconnect: true, neverOpened: true });
      }
    }, this.options.connectTimeout);

    ws.onopen = () => {
      if (gen !== this._gen) return;
      this._command("connect", token ? { token } : {}).then(
        (res) => {
          connected = true;
          this._wsConnected(gen, res);
        },
        (err) => {
          if (gen !== this._gen) return;
          this._emit("error", err);
          // The server closes the socket after a failed connect; an expired
          // JWT (4003) is worth another try only with a way to get a new one.
          if (err.code === "token_expired" && typeof this.options.getToken !== "function") {
            disconnect = { code: 4003, reason: "token_expired", reconnect: false };
          }
        },
      );
    };
    ws.onmessage = (ev) => {
      if (gen !== this._gen) return;
      let m;
      try {
        m = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (m.pub) this._onPub(m.pub, gen);
      else if (m.disconnect) disconnect = disconnect || m.disconnect;
      else if (m.unsubscribed) this._onUnsubscribed(m.unsubscribed);
      else if (typeof m.id === "number" && m.id > 0) {
        const p = this._pending.get(m.id);
        if (!p) return;
        this._pending.delete(m.id);
        if (m.error) p.reject(new ChronoqError(m.error.code, m.error.message));
        else p.resolve(m.result);
      } else if (m.error) {
        this._emit("error", new ChronoqError(m.error.code, m.error.message));
      }
      // {"job":...} pushes are for workers (consume); this client does not consume.
    };
    ws.onerror = () => { /* onclose follows with the code */ };
    ws.onclose = (ev) => {
      if (gen !== this._gen) return;
      const info = disconnect
        ? { code: disconnect.code, reason: disconnect.reason, reconnect: !!disconnect.reconnect }
        : { code: ev.code, reason: ev.reason || "closed", reconnect: shouldReconnect(ev.code) };
      info.neverOpened = !connected;
      this._lost(gen, info);
    };
  }

  _command(op, body) {
    const ws = this._ws;
    if (!ws || ws.readyState !== 1) return Promise.reject(new ChronoqError("not_connected", "no open WebSocket"));
    const id = ++this._nextId;
    const d = deferred();
    this._pending.set(id, d);
    ws.send(JSON.stringify({ id, [op]: body }));
    return d.promise;
  }

  _wsConnected(gen, res) {
    if (gen !== this._gen) return;
    clearTimeout(this._connectTimer);
    this._wsEverConnected = true;
    this._connected(res);
    this._scheduleRefresh(gen, res);
    for (const ch of this._chans.values()) this._wsSubscribe(ch, gen);
    for (const p of this._outbox.splice(0)) this._sendPublish(p);
  }

  _scheduleRefresh(gen, res) {
    clearTimeout(this._refreshTimer);
    this._refreshTimer = null;
    if (!res || !res.expires || typeof this.options.getToken !== "function") return;
    const at = Date.parse(res.expires);
    if (!Number.isFinite(at)) return;
    const delay = Math.max(1000, at - Date.now() - this.options.refreshBefore);
    this._refreshTimer = setTimeout(async () => {
      if (gen !== this._gen) return;
      try {
        const token = await this.options.getToken();
        if (gen !== this._gen) return;
        this.options.token = token;
        const r = await this._command("refresh", { token });
        if (gen !== this._gen) return;
        this.session = r;
        this._scheduleRefresh(gen, r);
      } catch (err) {
        // The server closes with 4003 at expiry; the reconnect asks
        // getToken again.
        if (gen === this._gen) this._emit("error", err);
      }
    }, delay);
  }

  _wsSubscribe(ch, gen) {
    const body = { channel: ch.key };
    const resume = ch.known;
    if (resume) {
      body.since = ch.offset;
      body.epoch = ch.epoch;
    }
    ch.status = "subscribing";
    const from = { offset: ch.offset, epoch: ch.epoch };
    this._command("subscribe", body).then(
      (res) => {
        if (gen !== this._gen || this._chans.get(ch.key) !== ch) return;
        this._subscribed(ch, res, resume, from);
      },
      (err) => {
        if (gen !== this._gen || this._chans.get(ch.key) !== ch) return;
        if (err.code === "not_connected") return; // the reconnect subscribes again
        this._dropChannel(ch, err);
      },
    );
  }

  // ---- SSE ------------------------------------------------------------

  async _openSSE(gen) {
    if (!this._EventSource) {
      this._emit("error", new ChronoqError("no_transport", "neither WebSocket nor EventSource is available"));
      this._lost(gen, { code: 0, reason: "no_transport", reconnect: false });
      return;
    }
    let token;
    try {
      token = await this._token();
    } catch (err) {
      this._emit("error", err);
      this._lost(gen, { code: 0, reason: "get_token_failed", reconnect: true });
      return;
    }
    if (gen !== this._gen) return;
    const chans = [...this._chans.values()].filter((ch) => ch.status !== "gone");
    if (chans.length === 0) {
      // Nothing to stream yet: the first subscribe opens the stream.
      this._connected(null);
      return;
    }
    const u = new URL(this.sseUrl);
    for (const ch of chans) u.searchParams.append("channel", ch.key);
    const resume = chans.some((ch) => ch.known);
    const from = new Map();
    for (const ch of chans) {
      from.set(ch, { offset: ch.offset, epoch: ch.epoch, known: ch.known });
      if (resume) {
        u.searchParams.append("since", String(ch.known ? ch.offset : 0));
        u.searchParams.append("epoch", ch.known ? ch.epoch : NO_EPOCH);
      }
      ch.status = "subscribing";
    }
    if (token) u.searchParams.set("token", token);
    const es = new this._EventSource(u.href);
    this._es = es;
    let opened = false;
    this._connectTimer = setTimeout(() => {
      if (gen === this._gen && !opened) this._lost(gen, { code: 0, reason: "connect_timeout", reconnect: true });
    }, this.options.connectTimeout);

    es.onopen = () => {
      if (gen !== this._gen) return;
      opened = true;
      clearTimeout(this._connectTimer);
      this._connected(null);
    };
    es.addEventListener("subscribed", (ev) => {
      if (gen !== this._gen) return;
      let res;
      try { res = JSON.parse(ev.data); } catch { return; }
      const ch = this._chans.get(res.channel);
      const f = ch && from.get(ch);
      if (!ch || !f || ch.status === "gone") return;
      this._subscribed(ch, res, f.known, f);
    });
    es.addEventListener("pub", (ev) => {
      if (gen !== this._gen) return;
      let pub;
      try { pub = JSON.parse(ev.data); } catch { return; }
      this._onPub(pub, gen);
    });
    es.addEventListener("disconnect", (ev) => {
      if (gen !== this._gen) return;
      let d = {};
      try { d = JSON.parse(ev.data); } catch { /* keep defaults */ }
      // Close it before EventSource reconnects by itself with the old URL
      // (and an old token): we reconnect with positions and a fresh token.
      this._lost(gen, { code: d.code, reason: d.reason || "disconnected", reconnect: !!d.reconnect });
    });
    es.onerror = () => {
      if (gen !== this._gen) return;
      if (opened) {
        this._lost(gen, { code: 1006, reason: "stream_ended", reconnect: true });
        return;
      }
      // Failed before the stream started: an HTTP error (400, 401, 403, 503)
      // or no server at all. EventSource does not say which; ask once.
      this._probeSSE(gen, u.href);
    };
  }

  async _probeSSE(gen, href) {
    let info = { code: 0, reason: "unreachable", reconnect: true };
    const ctl = typeof AbortController === "function" ? new AbortController() : null;
    try {
      const resp = await fetch(href, { signal: ctl?.signal, headers: { Accept: "text/event-stream" } });
      if (resp.status === 400 || resp.status === 401 || resp.status === 403) {
        let code = resp.status === 401 ? "unauthorized" : resp.status === 403 ? "forbidden" : "bad_request";
        let message = "";
        try {
          const body = await resp.json();
          code = body.error?.code || code;
          message = body.error?.message || "";
        } catch { /* not JSON */ }
        this._emit("error", new ChronoqError(code, message));
        // An expired JWT is worth another try with getToken; anything else
        // needs a change by the application.
        const retry = code === "token_expired" && typeof this.options.getToken === "function";
        info = { code: resp.status, reason: code, reconnect: retry };
      } else {
        info = { code: resp.status, reason: resp.status === 200 ? "stream_ended" : "http_" + resp.status, reconnect: true };
      }
    } catch {
      // network error or CORS: keep retrying
    } finally {
      ctl?.abort();
    }
    this._lost(gen, info);
  }

  // A subscribe/unsubscribe changes the stream's channel list: reopen it
  // (once per tick) with every position.
  _sseChanged() {
    if (this._sseReopen || !this._useSSE) return;
    if (this.state !== "connected" && this.state !== "connecting") return;
    this._sseReopen = true;
    queueMicrotask(() => {
      this._sseReopen = false;
      if (this._useSSE && (this.state === "connected" || this.state === "connecting")) this._open();
    });
  }

  // ---- channels -------------------------------------------------------

  /**
   * Subscribes to a channel "ns/name". Handlers (all optional):
   *  - onPublication(data, pub): each publication once, in offset order
   *    (pub: {channel, offset, epoch, data})
   *  - onSubscribed({channel, offset, epoch, recovered}): every (re)subscribe
   *  - onRecovered({channel, from, to, epoch}): after a reconnect, the
   *    missed publications (from+1..to) have all been delivered
   *  - onReset({channel, offset, epoch, previous}): the gap could NOT be
   *    recovered (server restarted without durable history, or history too
   *    short): reload your state, then continue from here
   *  - onUnsubscribed({channel, reason}): the server dropped it
   *  - onError(err): the subscription was refused (e.g. forbidden)
   * options.position ({offset, epoch}) resumes from a saved position
   * (e.g. localStorage after a page reload).
   *
   * Returns {channel, ready (Promise), position, unsubscribe()}.
   */
  subscribe(channel, handlers = {}, options = {}) {
    if (typeof channel !== "string" || !/^[^/]+\/.+$/.test(channel)) {
      throw new ChronoqError("bad_request", `channel: want "ns/name", got ${JSON.stringify(channel)}`);
    }
    let ch = this._chans.get(channel);
    const fresh = !ch;
    if (fresh) {
      ch = {
        key: channel,
        listeners: new Set(),
        offset: 0,
        epoch: "",
        known: false,
        status: "pending", // pending | subscribing | active | gone
        recoverTo: -1,
        recoverFrom: null,
      };
      const pos = options.position;
      if (pos && pos.epoch && Number.isSafeInteger(pos.offset) && pos.offset >= 0) {
        ch.offset = pos.offset;
        ch.epoch = pos.epoch;
        ch.known = true;
      }
      this._chans.set(channel, ch);
    }
    const ready = deferred();
    const listener = { handlers, ready, settled: false };
    ch.listeners.add(listener);
    if (ch.status === "active") {
      listener.settled = true;
      ready.resolve({ channel, offset: ch.offset, epoch: ch.epoch });
    }
    if (fresh) {
      if (this._useSSE) this._sseChanged();
      else if (this.state === "connected" && this._ws) this._wsSubscribe(ch, this._gen);
    }
    const client = this;
    return {
      channel,
      ready: ready.promise,
      get position() {
        return ch.known ? { offset: ch.offset, epoch: ch.epoch } : null;
      },
      unsubscribe() {
        client._removeListener(ch, listener);
      },
    };
  }

  _removeListener(ch, listener) {
    if (!ch.listeners.delete(listener)) return;
    if (!listener.settled) listener.ready.reject(new ChronoqError("unsubscribed", "unsubscribed before the subscription was ready"));
    if (ch.listeners.size > 0 || this._chans.get(ch.key) !== ch) return;
    this._chans.delete(ch.key);
    const wasLive = ch.status === "active" || ch.status === "subscribing";
    ch.status = "gone";
    if (this._useSSE) this._sseChanged();
    else if (wasLive && this._ws && this.state === "connected") {
      this._command("unsubscribe", { channel: ch.key }).catch(() => {});
    }
  }

  _dropChannel(ch, err) {
    this._chans.delete(ch.key);
    ch.status = "gone";
    for (const l of ch.listeners) {
      if (!l.settled) l.ready.reject(err);
      l.settled = true;
      call(l.handlers.onError, err);
    }
    ch.listeners.clear();
  }

  _onUnsubscribed(u) {
    const ch = this._chans.get(u.channel);
    if (!ch) return;
    this._chans.delete(ch.key);
    ch.status = "gone";
    for (const l of ch.listeners) {
      if (!l.settled) l.ready.reject(new ChronoqError(u.reason || "unsubscribed", "dropped by the server"));
      l.settled = true;
      call(l.handlers.onUnsubscribed, { channel: u.channel, reason: u.reason });
    }
    ch.listeners.clear();
  }

  // The answer to a subscribe (WebSocket result or SSE "subscribed" event).
  _subscribed(ch, res, resumed, from) {
    const info = { channel: ch.key, offset: res.offset, epoch: res.epoch };
    ch.status = "active";
    ch.recoverTo = -1;
    if (resumed && res.recovered === true) {
      // The missed publications follow as ordinary pubs and move the
      // position on; it stays where it was until then.
      info.recovered = true;
      ch.epoch = res.epoch;
      if (res.offset > ch.offset) {
        ch.recoverTo = res.offset;
        ch.recoverFrom = ch.offset;
      }
    } else {
      if (resumed) info.recovered = false;
      ch.offset = res.offset;
      ch.epoch = res.epoch;
      ch.known = true;
    }
    for (const l of ch.listeners) {
      if (!l.settled) {
        l.settled = true;
        l.ready.resolve(info);
      }
      call(l.handlers.onSubscribed, info);
      if (resumed && res.recovered === false) {
        call(l.handlers.onReset, { channel: ch.key, offset: res.offset, epoch: res.epoch, previous: { offset: from.offset, epoch: from.epoch } });
      }
    }
    if (resumed && res.recovered === true && ch.recoverTo < 0) {
      this._recoveredDone(ch, ch.offset, ch.offset);
    }
  }

  _recoveredDone(ch, fromOffset, to) {
    for (const l of ch.listeners) call(l.handlers.onRecovered, { channel: ch.key, from: fromOffset, to, epoch: ch.epoch });
  }

  _onPub(pub, gen) {
    const ch = this._chans.get(pub.channel);
    if (!ch || ch.status !== "active") return; // not ours, or being resubscribed
    if (pub.epoch === ch.epoch && pub.offset <= ch.offset) return; // already seen
    if (pub.epoch !== ch.epoch || pub.offset !== ch.offset + 1) {
      // A hole the server did not announce: never skip it silently.
      this._resync(ch, gen);
      return;
    }
    ch.offset = pub.offset;
    for (const l of [...ch.listeners]) call(l.handlers.onPublication, pub.data, pub);
    if (ch.recoverTo >= 0 && ch.offset >= ch.recoverTo) {
      const fromOffset = ch.recoverFrom;
      ch.recoverTo = -1;
      this._recoveredDone(ch, fromOffset, ch.offset);
    }
  }

  _resync(ch, gen) {
    if (this._useSSE) {
      this._open(); // reopen the stream from every channel's position
      return;
    }
    ch.status = "subscribing";
    // Ordered: the unsubscribe's answer comes before the new subscribe's,
    // and every pub before that answer is dropped (status not active).
    this._command("unsubscribe", { channel: ch.key }).catch(() => {});
    this._wsSubscribe(ch, gen);
  }

  // ---- publish --------------------------------------------------------

  /**
   * Publishes data (any JSON value) to "ns/name" over the WebSocket;
   * resolves with {offset, epoch}. Waits for a connection if there is none
   * yet; rejects if it is lost before the answer (the publication may or
   * may not have been made). Not available over SSE.
   */
  publish(channel, data) {
    if (this._useSSE) return Promise.reject(new ChronoqError("not_supported", "publish needs the WebSocket transport"));
    if (this.state === "closed") return Promise.reject(new ChronoqError("closed", "client closed"));
    const d = deferred();
    const p = { channel, data, resolve: d.resolve, reject: d.reject };
    if (this.state === "connected" && this._ws) this._sendPublish(p);
    else this._outbox.push(p);
    return d.promise;
  }

  _sendPublish(p) {
    this._command("publish", { channel: p.channel, data: p.data }).then(p.resolve, p.reject);
  }

  // ---- jobs -----------------------------------------------------------

  /**
   * Watches one job's lifecycle on its notify channel ("ns/name", the
   * channel given as "notify" when the job was put). handler(event) gets
   * every event of that job: {event: "reserved"|"completed"|"nacked"|
   * "dead"|"expired"|"cancelled", id, queue, namespace, state, attempt,
   * result?}. Subscribe before the job can run (await w.ready), or events
   * before it are missed.
   *
   * Returns {ready, done, stop()}: done resolves with the terminal event
   * (completed, dead, expired, cancelled) and rejects if the subscription
   * is refused or stop() is called first. options.onReset is called when
   * events may have been missed (check the job over HTTP then).
   */
  watchJob(channel, jobId, handler, options = {}) {
    const d = deferred();
    let finished = false;
    const sub = this.subscribe(channel, {
      onPublication: (data) => {
        if (finished || !data || typeof data !== "object" || data.id !== jobId) return;
        call(handler, data);
        if (TERMINAL_JOB_EVENTS.has(data.event)) {
          finished = true;
          sub.unsubscribe();
          d.resolve(data);
        }
      },
      onReset: (info) => call(options.onReset, { ...info, jobId }),
      onError: (err) => {
        finished = true;
        d.reject(err);
      },
      onUnsubscribed: (info) => {
        finished = true;
        d.reject(new ChronoqError(info.reason || "unsubscribed", "dropped by the server"));
      },
    });
    return {
      ready: sub.ready,
      done: d.promise,
      stop() {
        if (finished) return;
        finished = true;
        sub.unsubscribe();
        d.reject(new ChronoqError("stopped", "watch stopped"));
      },
    };
  }
}

export default Chronoq;

package ws

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SSE is the fallback transport for subscribers: one GET, a stream of
// events, nothing sent back. Events:
//
//	event: subscribed   data: {"channel","offset","epoch","recovered"?}
//	event: pub          data: {"channel","offset","epoch","data"}
//	event: disconnect   data: {"code","reason","reconnect"}
//
// Every pub (and the last subscribed) event carries an id that is the
// stream's position in all its channels, "epoch:offset" per channel joined
// by commas in the order the channels were given — exactly "epoch:offset"
// for the usual single channel. A browser's EventSource sends it back as
// Last-Event-ID when it reconnects, which is enough to recover every
// channel of the stream, not just the one that happened to speak last.

type ssePos struct {
	key    string
	epoch  string
	offset uint64
	known  bool
}

func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request) {
	if !s.originAllowed(w, r) {
		return
	}
	// Once a credential is configured any page may read a stream it holds
	// a token for: authentication is the token (header or ?token=), never
	// a cookie, so allowing every origin gives a foreign page nothing it
	// could not get by asking the server directly. Without it a browser
	// refuses EventSource across origins and the status of a failed stream
	// is unreadable. While the server is open (origin.go) only its own
	// origin may read, which needs no header.
	if s.authRequired() {
		w.Header().Set("Access-Control-Allow-Origin", "*")
	}
	q := r.URL.Query()
	chans := append([]string(nil), q["channel"]...)
	for _, list := range q["channels"] {
		for ch := range strings.SplitSeq(list, ",") {
			if ch = strings.TrimSpace(ch); ch != "" {
				chans = append(chans, ch)
			}
		}
	}
	if len(chans) == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "channel: give at least one ?channel=ns/name")
		return
	}
	if len(chans) > s.opts.MaxSubscriptions {
		writeError(w, http.StatusBadRequest, "bad_request", "channel: at most "+strconv.Itoa(s.opts.MaxSubscriptions)+" channels")
		return
	}
	tok, ok := bearer(r)
	if !ok {
		tok = q.Get("token")
	}
	id, err := s.authenticate(tok)
	if err != nil {
		ce := errorOf(err)
		w.Header().Set("WWW-Authenticate", `Bearer realm="chronoq"`)
		writeError(w, http.StatusUnauthorized, ce.Code, ce.Message)
		return
	}
	since, epochs, err := ssePositions(r, q, len(chans))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", errorOf(err).Message)
		return
	}
	keys := make([]string, len(chans))
	for i, full := range chans {
		ns, ch, err := splitChannel(id, full)
		if err == nil {
			err = id.canSubscribe(ns, ch)
		}
		if err != nil {
			ce := errorOf(err)
			status := http.StatusBadRequest
			if ce.Code == "forbidden" {
				status = http.StatusForbidden
			}
			writeError(w, status, ce.Code, ce.Message)
			return
		}
		keys[i] = ns + "/" + ch
		for _, k := range keys[:i] {
			if k == keys[i] {
				writeError(w, http.StatusBadRequest, "bad_request", "channel: "+k+" given twice")
				return
			}
		}
	}
	rc := http.NewResponseController(w)
	if !s.admit(w) {
		return
	}
	c := &conn{s: s, sse: true, kick: make(chan struct{}, 1)}
	c.ssePos = make([]ssePos, len(keys))
	for i, k := range keys {
		c.ssePos[i].key = k
	}
	s.register(c)
	defer c.teardown()
	defer c.recoverPanic("sse", nil)
	c.setIdentity(id)

	// A stream outlives the listener's read and write timeouts; ours are
	// set per write instead.
	rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	for i, key := range keys {
		var sp *uint64
		var ep *string
		if since != nil {
			sp, ep = &since[i], &epochs[i]
		}
		err := c.subscribe(key, sp, ep, func(res subscribeResult) {
			pos := &ssePos{key: key, epoch: res.Epoch, offset: res.Offset, known: true}
			if res.Recovered != nil && *res.Recovered {
				pos.offset = *sp // the recovered publications follow and advance it
			}
			c.send(outMsg{kind: kindSubscribed, data: marshal(res), pos: pos})
		})
		if err != nil {
			c.disconnect(discBadRequest)
			break
		}
	}

	ping := time.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	var buf bytes.Buffer
	var batch []outMsg
	for {
		select {
		case <-c.kick:
		case <-ping.C:
			buf.WriteString(": ping\n\n")
		case <-r.Context().Done():
			return
		}
		c.mu.Lock()
		batch = c.takeQueue(batch)
		closing := c.closing
		c.mu.Unlock()
		for i := range batch {
			c.writeSSE(&buf, &batch[i])
		}
		clear(batch)
		if buf.Len() > 0 {
			rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
			_, err := w.Write(buf.Bytes())
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				return
			}
		}
		if buf.Cap() > 4*maxBatch {
			buf = bytes.Buffer{}
		} else {
			buf.Reset()
		}
		if closing {
			c.mu.Lock()
			c.finalLocked()
			c.mu.Unlock()
			return
		}
	}
}

// ssePositions reads where a stream resumes: Last-Event-ID (header, or
// ?last_event_id= for clients that cannot set headers) wins over
// since/epoch, which give one value per channel in order. A position that
// cannot be read still asks for recovery, so it ends as recovered:false
// rather than a silent fresh start.
func ssePositions(r *http.Request, q map[string][]string, n int) ([]uint64, []string, error) {
	last := r.Header.Get("Last-Event-ID")
	if last == "" && len(q["last_event_id"]) > 0 {
		last = q["last_event_id"][0]
	}
	since := make([]uint64, n)
	epochs := make([]string, n)
	if last != "" {
		parts := strings.Split(last, ",")
		for i := range since {
			epochs[i] = "-" // never an epoch: fails to match unless parsed below
		}
		if len(parts) != n {
			return since, epochs, nil
		}
		for i, p := range parts {
			e, o, ok := strings.Cut(p, ":")
			off, err := strconv.ParseUint(o, 10, 64)
			if ok && err == nil {
				since[i], epochs[i] = off, e
			}
		}
		return since, epochs, nil
	}
	ss, es := q["since"], q["epoch"]
	if len(ss) == 0 && len(es) == 0 {
		return nil, nil, nil
	}
	if len(ss) != n || len(es) > n {
		return nil, nil, badRequest("since: give one since (and epoch) per channel, in the order of the channels")
	}
	for i := range since {
		off, err := strconv.ParseUint(ss[i], 10, 64)
		if err != nil {
			return nil, nil, badRequest("since: must be an offset (a whole number), got %q", ss[i])
		}
		since[i] = off
		if i < len(es) {
			epochs[i] = es[i]
		}
	}
	return since, epochs, nil
}

func (c *conn) writeSSE(buf *bytes.Buffer, m *outMsg) {
	switch m.kind {
	case kindPub:
		p := m.pub
		key := p.Namespace + "/" + p.Channel
		for i := range c.ssePos {
			if c.ssePos[i].key == key {
				c.ssePos[i].epoch, c.ssePos[i].offset, c.ssePos[i].known = p.Epoch, p.Offset, true
			}
		}
		buf.WriteString("event: pub\n")
		c.writeID(buf)
		buf.WriteString("data: ")
		buf.Write(wireOf(p).json)
		buf.WriteString("\n\n")
	case kindSubscribed:
		for i := range c.ssePos {
			if c.ssePos[i].key == m.pos.key {
				c.ssePos[i] = *m.pos
			}
		}
		buf.WriteString("event: subscribed\n")
		c.writeID(buf)
		buf.WriteString("data: ")
		buf.Write(m.data)
		buf.WriteString("\n\n")
	case kindText:
		ev := m.event
		if ev == "" {
			ev = "message"
		}
		buf.WriteString("event: " + ev + "\ndata: ")
		buf.Write(m.data)
		buf.WriteString("\n\n")
	}
}

// writeID writes the position vector once every channel's is known.
func (c *conn) writeID(buf *bytes.Buffer) {
	for i := range c.ssePos {
		if !c.ssePos[i].known {
			return
		}
	}
	buf.WriteString("id: ")
	for i := range c.ssePos {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(c.ssePos[i].epoch)
		buf.WriteByte(':')
		buf.WriteString(strconv.FormatUint(c.ssePos[i].offset, 10))
	}
	buf.WriteByte('\n')
}

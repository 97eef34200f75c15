// Package ws is chronoq's real-time API: WebSocket (GET /v1/ws) and
// Server-Sent Events (GET /v1/sse) for channel subscribers, publishers and
// push-consuming workers, with namespace tokens or JWT, and the limits that
// keep a crowd of connections from taking the server down. The protocol is
// documented in docs/realtime.md; no queue rule lives here.
package ws

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// Backend is what the real-time API needs from the broker (*broker.Broker
// implements it). Errors are *engine.Error for rejected input.
type Backend interface {
	TokenNamespace(token string) (ns string, ok bool)
	HasTokens() bool
	Publish(ctx context.Context, ns, ch string, data []byte) (offset uint64, epoch string, err error)
	Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error)
	// PutQueued starts a put and returns at once; puts started one after
	// another run in that order. wait gives the durable answer and must be
	// called exactly once; req.Payload must not change until then.
	PutQueued(ctx context.Context, ns, q string, req engine.PutRequest) (wait func() (engine.PutResult, error))
	Take(ctx context.Context, ns string, req engine.TakeRequest, wait time.Duration) ([]engine.Job, error)
	Ack(ctx context.Context, ns, q, id string, req engine.AckRequest) (engine.AckResult, error)
	Nack(ctx context.Context, ns, q, id string, req engine.NackRequest) (engine.State, error)
	Touch(ctx context.Context, ns, q, id string, req engine.TouchRequest) (time.Time, error)
	Bury(ctx context.Context, ns, q, id string, req engine.BuryRequest) error
}

// Options configure a Server. Zero values pick the defaults in brackets.
type Options struct {
	// AdminToken is accepted by connect (every namespace) and required by
	// the admin handler when set.
	AdminToken string
	// RequireAuth refuses connections without a token even when no token
	// exists yet (listeners beyond loopback).
	RequireAuth bool
	// JWT enables JSON Web Tokens for browser connections.
	JWT JWTOptions

	// MaxConnections caps WebSocket plus SSE connections; above it a new
	// one is refused with 503 before the upgrade [10000]. Keep it below
	// the listener's own cap so plain HTTP calls still get through.
	MaxConnections int
	// ConnectRate and ConnectBurst limit new connections per second
	// (token bucket), so a mass reconnect after a deploy is spread out
	// instead of melting the server [1000/s, burst 2×rate].
	ConnectRate  float64
	ConnectBurst int

	// MaxPayload caps published data and put payloads [1 MiB];
	// MaxMessageSize caps one incoming frame [MaxPayload×2 + 64 KiB, room
	// for a base64 payload].
	MaxPayload     int64
	MaxMessageSize int64
	// MaxConnectMessage caps a message until connect has succeeded [8 KiB,
	// room for a JWT with long channel lists]: a socket without a token
	// can make the server hold no more than that.
	MaxConnectMessage int64
	// MaxQueue and MaxQueueBytes bound what may wait to be written to one
	// connection [1024 messages, 8 MiB]. A client that falls that far
	// behind is disconnected with code 4002 (slow consumer) and recovers
	// on reconnect; its queue never grows past the bound.
	MaxQueue      int
	MaxQueueBytes int
	// MaxSubscriptions per connection [256]; MaxInflight async commands
	// (ack, nack, touch, bury) per connection [128]; MaxPrefetch [1000].
	MaxSubscriptions int
	MaxInflight      int
	MaxPrefetch      int

	// PingInterval is how often the server pings [25s]; a connection
	// silent for PingInterval+PongTimeout is dead [10s].
	PingInterval time.Duration
	PongTimeout  time.Duration
	// WriteTimeout bounds one write to a socket [10s].
	WriteTimeout time.Duration
	// PubWriteInterval is the least time between two writes of live
	// publications to one WebSocket connection [0: none]. A connection
	// that wrote publications less than this ago waits for the next tick
	// of a shared timer, and then takes everything queued meanwhile in one
	// write (flusher.go): fewer writes per delivery on a hot channel, for
	// at most this much more latency.
	PubWriteInterval time.Duration
	// ConnectTimeout is how long a WebSocket may stay without connect [10s].
	ConnectTimeout time.Duration
	// ExpiryGrace is how long past a JWT's exp a connection may live
	// before it must have sent refresh [5s].
	ExpiryGrace time.Duration
	// ConsumeWait is the long-poll of one take by a push consumer [30s].
	ConsumeWait time.Duration

	// CheckOrigin decides on browser origins once a credential is
	// configured (origin.go holds the rule while none is). Default: allow
	// every origin, because authentication is the token inside the
	// connect command, never a cookie, so a foreign page gains nothing by
	// opening a socket.
	CheckOrigin func(r *http.Request) bool
	Logger      *slog.Logger
	// Clock is for tests [time.Now].
	Clock func() time.Time
}

func (o *Options) defaults() {
	setInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	setInt(&o.MaxConnections, 10000)
	if o.ConnectRate <= 0 {
		o.ConnectRate = 1000
	}
	setInt(&o.ConnectBurst, int(2*o.ConnectRate))
	if o.MaxPayload <= 0 {
		o.MaxPayload = 1 << 20
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = 2*o.MaxPayload + 64<<10
	}
	if o.MaxConnectMessage <= 0 {
		o.MaxConnectMessage = min(8<<10, o.MaxMessageSize)
	}
	setInt(&o.MaxQueue, 1024)
	setInt(&o.MaxQueueBytes, 8<<20)
	setInt(&o.MaxSubscriptions, 256)
	setInt(&o.MaxInflight, 128)
	setInt(&o.MaxPrefetch, 1000)
	setDur(&o.PingInterval, 25*time.Second)
	setDur(&o.PongTimeout, 10*time.Second)
	setDur(&o.WriteTimeout, 10*time.Second)
	setDur(&o.ConnectTimeout, 10*time.Second)
	setDur(&o.ExpiryGrace, 5*time.Second)
	setDur(&o.ConsumeWait, 30*time.Second)
	if o.CheckOrigin == nil {
		o.CheckOrigin = func(*http.Request) bool { return true }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
}

// Server serves the real-time API. Create it with New.
type Server struct {
	b    Backend
	hub  *pubsub.Hub
	opts Options
	log  *slog.Logger
	jwt  *jwtVerifier

	upgrader websocket.Upgrader
	limiter  bucket

	active atomic.Int64
	closed atomic.Bool

	mu     sync.Mutex
	conns  map[*conn]struct{}
	byUser map[string]map[*conn]struct{}
	byJTI  map[string]map[*conn]struct{}
	// byToken holds namespace-token connections by the token's hash, with
	// the token itself, to close them when the token is revoked.
	byToken map[string]*tokenConns
	// anon holds the connections made without a token while none existed,
	// to close them once one does.
	anon map[*conn]struct{}

	// bg tracks work that must finish before the broker closes: the
	// nacks of consumers whose socket went away.
	bg sync.WaitGroup

	flush flushers // shared writers of publications (flusher.go)

	slowDisconnects atomic.Int64
	refused         atomic.Int64
	panicsWS        atomic.Int64
	panicsSSE       atomic.Int64
}

// New builds a server over the broker b and its channel hub.
func New(b Backend, hub *pubsub.Hub, opts Options) (*Server, error) {
	opts.defaults()
	v, err := newJWTVerifier(opts.JWT, opts.Clock)
	if err != nil {
		return nil, err
	}
	s := &Server{
		b:       b,
		hub:     hub,
		opts:    opts,
		log:     opts.Logger,
		jwt:     v,
		conns:   map[*conn]struct{}{},
		byUser:  map[string]map[*conn]struct{}{},
		byJTI:   map[string]map[*conn]struct{}{},
		byToken: map[string]*tokenConns{},
		anon:    map[*conn]struct{}{},
	}
	s.limiter = bucket{rate: opts.ConnectRate, burst: float64(opts.ConnectBurst), tokens: float64(opts.ConnectBurst)}
	s.upgrader = websocket.Upgrader{
		// Small read buffers and no write buffer at all (this package
		// frames its own writes) are what keep an idle connection at a
		// few KB: see docs/realtime.md for the measurement.
		ReadBufferSize:   512,
		WriteBufferPool:  unusedPool{},
		HandshakeTimeout: 10 * time.Second,
		CheckOrigin:      opts.CheckOrigin,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			writeError(w, status, "bad_request", reason.Error())
		},
	}
	return s, nil
}

// unusedPool satisfies gorilla's WriteBufferPool so that it allocates no
// per-connection write buffer; every frame is written by conn.flush.
type unusedPool struct{}

func (unusedPool) Get() any  { return nil }
func (unusedPool) Put(x any) {}

// Handler serves GET /v1/ws and GET /v1/sse.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ws", s.serveWS)
	mux.HandleFunc("GET /v1/sse", s.serveSSE)
	return mux
}

// AdminHandler serves POST /admin/disconnect, for the admin listener.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admin/disconnect", s.adminDisconnect)
	return mux
}

// Stats are the server's counters.
type Stats struct {
	Connections     int64
	SlowDisconnects int64 // slow consumers cut off
	Refused         int64 // connections refused by the cap or the rate limit
	PanicsWS        int64 // connections closed after a panic in one of their goroutines
	PanicsSSE       int64
}

// Stats returns the current counters.
func (s *Server) Stats() Stats {
	return Stats{Connections: s.active.Load(), SlowDisconnects: s.slowDisconnects.Load(), Refused: s.refused.Load(),
		PanicsWS: s.panicsWS.Load(), PanicsSSE: s.panicsSSE.Load()}
}

// disconnectAll closes every connection open now with why and answers
// how many it closed.
func (s *Server) disconnectAll(why disconnectReason) int {
	s.mu.Lock()
	all := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		all = append(all, c)
	}
	s.mu.Unlock()
	for _, c := range all {
		c.disconnect(why)
	}
	return len(all)
}

// Shutdown disconnects every client with code 4001 (reconnect: the server
// is restarting) and waits until their connections are gone and the jobs
// pushed to consumers are given back. Call it before closing the broker.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closed.Store(true)
	s.disconnectAll(discShutdown)
	done := make(chan struct{})
	go func() {
		for s.active.Load() > 0 && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		s.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// admit runs before any upgrade: refusing here costs a few hundred bytes of
// response instead of a connection's state.
func (s *Server) admit(w http.ResponseWriter) bool {
	if s.closed.Load() {
		s.refuse(w, "shutting_down", "server is shutting down")
		return false
	}
	if !s.limiter.allow(s.opts.Clock()) {
		s.refuse(w, "rate_limited", "too many new connections per second; retry with backoff")
		return false
	}
	if s.active.Add(1) > int64(s.opts.MaxConnections) {
		s.active.Add(-1)
		s.refuse(w, "too_many_connections", "connection limit reached; retry later")
		return false
	}
	return true
}

func (s *Server) refuse(w http.ResponseWriter, code, msg string) {
	s.refused.Add(1)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, code, msg)
}

func (s *Server) register(c *conn) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

// index records who a JWT connection belongs to, for admin disconnect.
func (s *Server) index(c *conn, old, cur *identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != nil {
		s.unindexLocked(c, old)
	}
	if cur != nil {
		if cur.kind == authAnonymous {
			s.anon[c] = struct{}{}
		}
		addIndex(s.byUser, cur.user, c)
		addIndex(s.byJTI, cur.jti, c)
		if cur.tokHash != "" {
			tc := s.byToken[cur.tokHash]
			if tc == nil {
				tc = &tokenConns{tok: cur.tok, hash: cur.tokHash, ns: cur.ns, conns: map[*conn]struct{}{}}
				s.byToken[cur.tokHash] = tc
			}
			// Connections of one token share its strings: a service's
			// thousand sockets need not hold a thousand copies.
			cur.tok, cur.tokHash = tc.tok, tc.hash
			tc.conns[c] = struct{}{}
		}
	}
}

type tokenConns struct {
	tok, hash, ns string
	conns         map[*conn]struct{}
}

func (s *Server) unindexLocked(c *conn, id *identity) {
	delete(s.anon, c)
	unindex(s.byUser, id.user, c)
	unindex(s.byJTI, id.jti, c)
	if tc := s.byToken[id.tokHash]; tc != nil {
		delete(tc.conns, c)
		if len(tc.conns) == 0 {
			delete(s.byToken, id.tokHash)
		}
	}
}

// TokensChanged tells the server that namespace tokens were created or
// revoked (the broker calls it; see cmd/chronoq/serve.go). Connections
// whose token no longer names their namespace are closed with 4503
// token_revoked: a revoked token must not live on in open sockets. Once
// the first token exists, connections made without one (allowed only
// while none existed) are closed with 4501. It returns at once; the check
// runs in the background, because the broker calls it from its loop.
func (s *Server) TokensChanged() {
	go s.revalidateTokens()
}

func (s *Server) revalidateTokens() {
	type entry struct {
		tok, ns string
		conns   []*conn
	}
	s.mu.Lock()
	var anon []*conn
	if s.authRequired() {
		for c := range s.anon {
			anon = append(anon, c)
		}
	}
	all := make([]entry, 0, len(s.byToken))
	for _, tc := range s.byToken {
		e := entry{tok: tc.tok, ns: tc.ns}
		for c := range tc.conns {
			e.conns = append(e.conns, c)
		}
		all = append(all, e)
	}
	s.mu.Unlock()
	for _, c := range anon {
		c.disconnect(discUnauthorized)
	}
	for _, e := range all {
		if ns, ok := s.b.TokenNamespace(e.tok); ok && ns == e.ns {
			continue
		}
		for _, c := range e.conns {
			c.disconnect(discRevoked)
		}
	}
}

func addIndex(m map[string]map[*conn]struct{}, k string, c *conn) {
	if k == "" {
		return
	}
	set := m[k]
	if set == nil {
		set = map[*conn]struct{}{}
		m[k] = set
	}
	set[c] = struct{}{}
}

func unindex(m map[string]map[*conn]struct{}, k string, c *conn) {
	if set := m[k]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

func (s *Server) unregister(c *conn, id *identity) {
	s.mu.Lock()
	delete(s.conns, c)
	if id != nil {
		s.unindexLocked(c, id)
	}
	s.mu.Unlock()
	s.active.Add(-1)
}

func (s *Server) isNamespaceToken(tok string) bool {
	_, ok := s.b.TokenNamespace(tok)
	return ok
}

func (s *Server) isAdminToken(tok string) bool {
	a := s.opts.AdminToken
	return a != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a)) == 1
}

// adminDisconnect closes every connection of a user, or of one token id.
// It is not a ban: with "reconnect": true clients come back at once (to
// pick up changed permissions); the default false tells well-behaved
// clients to stay away, but only refusing the token stops a hostile one.
func (s *Server) adminDisconnect(w http.ResponseWriter, r *http.Request) {
	if s.opts.AdminToken != "" {
		// As every admin route (docs/api.md): no token or an unknown one is
		// 401, a namespace token 403.
		tok, ok := bearer(r)
		switch {
		case ok && s.isAdminToken(tok):
		case ok && s.isNamespaceToken(tok):
			writeError(w, http.StatusForbidden, "forbidden", "admin calls need the admin token, not a namespace token")
			return
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="chronoq"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "admin calls need the admin token")
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "reading body: "+err.Error())
		return
	}
	var req struct {
		User      *string `json:"user"`
		TokenID   *string `json:"token_id"`
		Reconnect bool    `json:"reconnect"`
	}
	if err := strictUnmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if (req.User == nil) == (req.TokenID == nil) {
		writeError(w, http.StatusBadRequest, "bad_request", "user: give exactly one of user and token_id")
		return
	}
	s.mu.Lock()
	var victims []*conn
	if req.User != nil {
		for c := range s.byUser[*req.User] {
			victims = append(victims, c)
		}
	} else {
		// A token id is a JWT's jti, or a namespace token's SHA-256 hex
		// (as the admin API lists tokens), or the namespace token itself.
		for c := range s.byJTI[*req.TokenID] {
			victims = append(victims, c)
		}
		for _, h := range []string{*req.TokenID, tokenHash(*req.TokenID)} {
			if tc := s.byToken[h]; tc != nil {
				for c := range tc.conns {
					victims = append(victims, c)
				}
			}
		}
	}
	s.mu.Unlock()
	d := discAdmin
	if req.Reconnect {
		d = discAdminReconnect
	}
	// a connection an earlier call cut may not have left the maps yet:
	// only the ones this call cuts count
	n := 0
	for _, c := range victims {
		if c.disconnect(d) {
			n++
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"disconnected": n})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeError answers in the native API's error shape.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]map[string]string{"error": {"code": code, "message": msg}})
}

// bucket is a token bucket: rate tokens per second, at most burst saved.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func (b *bucket) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens += now.Sub(b.last).Seconds() * b.rate
		if b.tokens > b.burst {
			b.tokens = b.burst
		}
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

var errNotObject = errors.New("must be a JSON object")

// strictUnmarshal refuses unknown fields and trailing data, so a typo in a
// field name is an error rather than a silently ignored setting.
func strictUnmarshal(data []byte, v any) error {
	data = trimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return errNotObject
	}
	dec := json.NewDecoder(bytesReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

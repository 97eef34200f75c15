// Package lmstfy serves the HTTP API of bitleak/lmstfy on top
// of the broker, so lmstfy clients can switch by changing the address:
// /api/... on the main listener, /token/..., /info, /pools and /version on
// the admin listener. Routes, parameters, status codes, JSON bodies and
// error strings follow lmstfy's server code, quirks included; where chronoq
// cannot or should not do the same, the deviation is noted where it happens.
package lmstfy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/api/httpkit"
	"github.com/chronoq/chronoq/internal/engine"
)

// Options configure a Server. Zero values pick the defaults.
type Options struct {
	// AdminToken, when set, is required on the admin routes and accepted as
	// the token of every namespace on /api.
	AdminToken string
	// RequireAuth demands a token on /api even while no namespace token
	// exists (listeners beyond loopback). Without it, and with no admin
	// token and no namespace token, /api runs like lmstfy's dev mode.
	RequireAuth bool
	// MaxPayload caps one job's body. Default 1 MiB, lmstfy's limit.
	MaxPayload int64
	// MaxBody caps a whole request body, which bounds a bulk publish.
	// Default 16 MiB.
	MaxBody int64
	// MaxWait caps a consume's long-poll. Default 600 s: lmstfy clients
	// refuse timeouts of 600 s and more, so nothing they send is cut short.
	MaxWait time.Duration
	// Logger receives server errors and recovered panics. Default
	// slog.Default().
	Logger *slog.Logger
	// Observe, when set, is told each request's operation, status code and
	// duration (request metrics).
	Observe func(op string, code int, d time.Duration)
	// Clock gives the time a job's ttl and elapsed_ms are computed at; pass
	// the broker's clock. Default time.Now.
	Clock func() time.Time
	// Bodies bounds the memory of request bodies being read, shared with
	// the native API's listeners. Default: a budget of this server's own.
	Bodies *httpkit.BodyBudget
	// Failures brakes sources that keep failing authentication, shared
	// like Bodies. Default: one of this server's own.
	Failures *httpkit.FailureLimiter
}

// Server holds the two handlers of the lmstfy API.
type Server struct {
	b      Backend
	opts   Options
	log    *slog.Logger
	routes map[string]route // "METHOD[ suffix]" → route; see match
	auth   httpkit.Auth
}

const (
	defaultMaxPayload = 1 << 20
	defaultMaxBody    = 16 << 20
	defaultMaxWait    = 600 * time.Second
)

// New builds the server.
func New(b Backend, opts Options) *Server {
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = defaultMaxPayload
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = defaultMaxBody
	}
	opts.MaxBody = max(opts.MaxBody, opts.MaxPayload)
	if opts.MaxWait <= 0 {
		opts.MaxWait = defaultMaxWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Bodies == nil {
		opts.Bodies = httpkit.NewBodyBudget(httpkit.BodyBudgetFor(opts.MaxBody))
	}
	if opts.Failures == nil {
		opts.Failures = httpkit.NewFailureLimiter(0, 0, 0, nil)
	}
	s := &Server{b: b, opts: opts, log: opts.Logger}
	s.auth = httpkit.Auth{AdminToken: opts.AdminToken, RequireAuth: opts.RequireAuth,
		HasTokens: b.HasTokens, TokenNamespace: b.TokenNamespace, Failures: opts.Failures}
	s.routes = s.routeTable()
	return s
}

// Main serves everything under /api/ (mount it at "/api/").
func (s *Server) Main() http.Handler { return s.wrap(http.HandlerFunc(s.serveAPI)) }

// Admin serves /token/..., /info, /pools and /version.
func (s *Server) Admin() http.Handler { return s.wrap(http.HandlerFunc(s.gateAdmin)) }

func (s *Server) wrap(h http.Handler) http.Handler {
	return httpkit.Recover(s.log, "lmstfy", s.opts.Bodies.Wrap(s.opts.MaxBody, h), func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusInternalServerError, "internal error")
	})
}

// gateAdmin applies httpkit's auth rule to the admin routes. lmstfy's admin
// server uses HTTP basic auth, so the token is accepted as the basic auth
// password (any user name), as a bearer token, or in X-Token; never in
// ?token=, which POST /token uses for the new token's value.
func (s *Server) gateAdmin(w http.ResponseWriter, r *http.Request) {
	var toks []string
	if _, pw, ok := r.BasicAuth(); ok {
		toks = append(toks, pw)
	}
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		toks = append(toks, strings.TrimSpace(tok))
	}
	toks = append(toks, r.Header.Get("X-Token"))
	switch v := s.auth.Decide(r, httpkit.NeedAdmin, "", toks...); v.Reason {
	case httpkit.Allowed:
		s.serveAdmin(w, r)
	case httpkit.Throttled, httpkit.Foreign:
		s.refuse(w, v)
	default:
		// gin's BasicAuth answer: a challenge and no body.
		w.Header().Set("WWW-Authenticate", `Basic realm="Authorization Required"`)
		w.WriteHeader(http.StatusUnauthorized)
	}
}

// refuse answers a throttled or foreign request (httpkit.Verdict).
func (s *Server) refuse(w http.ResponseWriter, v httpkit.Verdict) {
	if v.Reason == httpkit.Throttled {
		w.Header().Set("Retry-After", strconv.Itoa(v.RetryAfterSeconds()))
		writeError(w, http.StatusTooManyRequests, v.Message)
		return
	}
	writeError(w, http.StatusForbidden, v.Message)
}

// ---------------------------------------------------------------------------
// Routing

// access says what a route checks before its handler runs, in lmstfy's
// middleware order: names first, then the token.
type access int

const (
	accessToken   access = iota // names, then the namespace token
	accessConsume               // the comma-separated queue list, then the token
	accessPublic                // names only: size and dead-letter size
)

type route struct {
	op     string
	access access
	h      func(w http.ResponseWriter, r *http.Request, p params)
}

// params are the path parameters of an /api route.
type params struct {
	ns, q, id string
}

// match finds the route for a method and the path segments after /api/.
// lmstfy's router (gin) answers a wrong method like an unknown path.
func (s *Server) match(method string, seg []string) (route, params, bool) {
	for _, x := range seg {
		if x == "" {
			return route{}, params{}, false
		}
	}
	if len(seg) < 2 {
		return route{}, params{}, false
	}
	p := params{ns: seg[0], q: seg[1]}
	key := method
	switch len(seg) {
	case 2:
	case 3:
		key += " " + seg[2]
	case 4:
		switch {
		case seg[2] == "job":
			key += " job/:id"
			p.id = seg[3]
		case seg[2] == "deadletter" && seg[3] == "size":
			key += " deadletter/size"
		default:
			return route{}, params{}, false
		}
	default:
		return route{}, params{}, false
	}
	rt, ok := s.routes[key]
	return rt, p, ok
}

func (s *Server) routeTable() map[string]route {
	return map[string]route{
		"PUT":                 {"publish", accessToken, s.publish},
		"GET":                 {"consume", accessConsume, s.consume},
		"DELETE":              {"destroy", accessToken, s.destroy},
		"PUT bulk":            {"publish_bulk", accessToken, s.publishBulk},
		"GET peek":            {"peek_queue", accessToken, s.peekQueue},
		"GET size":            {"size", accessPublic, s.size},
		"GET deadletter":      {"peek_deadletter", accessToken, s.peekDeadLetter},
		"PUT deadletter":      {"respawn_deadletter", accessToken, s.respawnDeadLetter},
		"DELETE deadletter":   {"delete_deadletter", accessToken, s.deleteDeadLetter},
		"GET deadletter/size": {"deadletter_size", accessPublic, s.deadLetterSize},
		"PUT job/:id":         {"republish", accessToken, s.publish},
		"GET job/:id":         {"peek_job", accessToken, s.peekJob},
		"DELETE job/:id":      {"delete", accessToken, s.ack},
	}
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok {
		writeError(w, http.StatusNotFound, "api not found")
		return
	}
	rt, p, ok := s.match(r.Method, strings.Split(rest, "/"))
	if !ok {
		// gin redirects a path with a trailing slash to the one without
		// when that one has a route.
		if trimmed, cut := strings.CutSuffix(rest, "/"); cut {
			if _, _, ok := s.match(r.Method, strings.Split(trimmed, "/")); ok {
				u := *r.URL
				u.Path = "/api/" + trimmed
				code := http.StatusMovedPermanently
				if r.Method != http.MethodGet {
					code = http.StatusTemporaryRedirect
				}
				http.Redirect(w, r, u.String(), code)
				return
			}
		}
		writeError(w, http.StatusNotFound, "api not found")
		return
	}
	if obs := s.opts.Observe; obs != nil {
		start := time.Now()
		sw := httpkit.NewStatusWriter(w)
		w = sw
		defer func() { obs(rt.op, sw.Status, time.Since(start)) }()
	}
	if rt.access == accessConsume {
		if msg := checkConsumeNames(p.ns, p.q); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
	} else if msg := checkNames(p.ns, p.q); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if rt.access != accessPublic {
		if v := s.authorize(r, p.ns); !v.OK() {
			switch v.Reason {
			case httpkit.Throttled, httpkit.Foreign:
				s.refuse(w, v)
			case httpkit.Missing:
				writeError(w, http.StatusUnauthorized, "token not found")
			default:
				writeError(w, http.StatusUnauthorized, "invalid token")
			}
			return
		}
	} else if s.auth.Open(httpkit.NeedNamespace) {
		if msg := httpkit.Guard(r); msg != "" {
			s.refuse(w, httpkit.Verdict{Reason: httpkit.Foreign, Message: msg})
			return
		}
	}
	rt.h(w, r, p)
}

// ---------------------------------------------------------------------------
// Auth

// authorize checks the token of an /api call the way lmstfy does: X-Token,
// else ?token=, an optional "pool:" prefix (chronoq has one pool, so the
// prefix is accepted and ignored), and a token of the path's namespace. The
// admin token is every namespace's token. The decision is httpkit's.
func (s *Server) authorize(r *http.Request, ns string) httpkit.Verdict {
	raw := r.Header.Get("X-Token")
	if raw == "" {
		raw = r.URL.Query().Get("token")
	}
	return s.auth.Decide(r, httpkit.NeedNamespace, ns, stripPool(raw))
}

// stripPool drops lmstfy's optional "{pool}:" token prefix.
func stripPool(raw string) string {
	if _, tok, ok := strings.Cut(raw, ":"); ok {
		return tok
	}
	return raw
}

// ---------------------------------------------------------------------------
// Answers

// errorBody is lmstfy's error answer. Its bodies are gin.H maps, which
// encoding/json writes with sorted keys; the structs here list their
// fields alphabetically so the bytes come out the same.
type errorBody struct {
	Error string `json:"error"`
}

type msgBody struct {
	Msg string `json:"msg"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeIndented is gin's IndentedJSON, which lmstfy's admin routes use.
func writeIndented(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// writeEngineError answers a backend failure. lmstfy answers every storage
// failure with 500 "internal error"; chronoq's failures carry more meaning
// and keep lmstfy's shape, with status codes its clients already handle
// (5xx is retried by its client).
func (s *Server) writeEngineError(w http.ResponseWriter, r *http.Request, err error) {
	var e *engine.Error
	if !errors.As(err, &e) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// The client went away; nobody reads this answer.
			writeError(w, http.StatusServiceUnavailable, "request cancelled")
			return
		}
		s.log.Error("lmstfy api: backend failure", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	switch e.Code {
	case engine.CodeUnavailable, "not_leader", "no_quorum", "unknown_outcome": // the last three: docs/cluster.md
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "service unavailable: "+e.Message)
	case engine.CodePayloadTooLarge:
		writeError(w, http.StatusRequestEntityTooLarge, "body too large")
	case engine.CodeQueueFull:
		// lmstfy's throttler answers 429 to slow producers down.
		writeError(w, http.StatusTooManyRequests, "queue is full")
	case engine.CodeQueueNotFound:
		writeError(w, http.StatusNotFound, "queue not found")
	case engine.CodeNamespaceNotFound:
		writeError(w, http.StatusNotFound, "namespace not found")
	case engine.CodeJobNotFound:
		writeError(w, http.StatusNotFound, "job not found")
	case engine.CodeForbidden:
		writeError(w, http.StatusForbidden, e.Error())
	case engine.CodeConflict:
		writeError(w, http.StatusConflict, e.Error())
	case engine.CodeBadRequest:
		writeError(w, http.StatusBadRequest, e.Error())
	default:
		s.log.Error("lmstfy api: backend failure", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

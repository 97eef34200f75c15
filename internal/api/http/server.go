// Package httpapi is chronoq's native HTTP API (/v1 on the main listener,
// /admin on the admin listener) as docs/api.md defines it. It decodes, checks
// auth and limits, calls the Backend and encodes; no queue rule lives here.
package httpapi

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"slices"
	"time"

	"github.com/chronoq/chronoq/internal/api/httpkit"
	"github.com/chronoq/chronoq/internal/engine"
)

// Options configure a Server. Zero values pick the documented defaults.
type Options struct {
	// AdminToken, when set, is accepted on every route and required on the
	// admin routes.
	AdminToken string
	// MaxPayload is the server-wide cap on a payload, a result or a
	// published message, checked before the Backend sees the request.
	// Default 1 MiB.
	MaxPayload int64
	// MaxBody caps a whole request body (413 above it). Default: room for
	// one payload at MaxPayload in base64 with its fields, at least 16 MiB,
	// which also bounds a batch.
	MaxBody int64
	// MaxWait caps the long-poll waits (take, result, call). Default 60s.
	MaxWait time.Duration
	// Logger receives server errors and recovered panics. Default
	// slog.Default().
	Logger *slog.Logger
	// RequireAuth demands a token on /v1 even when no token exists yet, for
	// listeners that are not loopback-only.
	RequireAuth bool
	// Metrics, when set, is served at GET /metrics on the admin listener.
	Metrics http.Handler
	// Observe, when set, is told each request's route pattern, status code
	// and duration (request metrics).
	Observe func(op string, code int, d time.Duration)
	// Bodies bounds the memory of request bodies being read; share it
	// with the other listeners' servers (Server.Bodies). Default: a budget
	// of httpkit.BodyBudgetFor(MaxBody) of this server's own.
	Bodies *httpkit.BodyBudget
	// Failures brakes sources that keep failing authentication; share it
	// like Bodies (Server.Failures). Default: one of this server's own with
	// httpkit's defaults.
	Failures *httpkit.FailureLimiter
}

// Server holds the two handlers of the HTTP API.
type Server struct {
	b       Backend
	opts    Options
	lim     limits
	maxBody int64
	log     *slog.Logger
	main    *router
	admin   *router
	auth    httpkit.Auth
}

const (
	defaultMaxPayload = 1 << 20
	defaultMaxWait    = 60 * time.Second
	minMaxBody        = 16 << 20
)

// New builds the server and registers every route.
func New(b Backend, opts Options) *Server {
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = defaultMaxPayload
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = defaultMaxWait
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = max(minMaxBody, 2*opts.MaxPayload+1<<20)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Bodies == nil {
		opts.Bodies = httpkit.NewBodyBudget(httpkit.BodyBudgetFor(opts.MaxBody))
	}
	if opts.Failures == nil {
		opts.Failures = httpkit.NewFailureLimiter(0, 0, 0, nil)
	}
	s := &Server{
		b:       b,
		opts:    opts,
		lim:     limits{maxPayload: opts.MaxPayload, maxWait: opts.MaxWait},
		maxBody: opts.MaxBody,
		log:     opts.Logger,
		auth: httpkit.Auth{
			AdminToken:     opts.AdminToken,
			RequireAuth:    opts.RequireAuth,
			HasTokens:      b.HasTokens,
			TokenNamespace: b.TokenNamespace,
			Failures:       opts.Failures,
		},
	}
	s.main = newRouter(s)
	s.admin = newRouter(s)
	s.registerMain()
	s.registerAdmin()
	return s
}

// Main is the handler of the main listener: /v1 and /healthz.
func (s *Server) Main() http.Handler { return s.wrap(s.main) }

// Admin is the handler of the admin listener: /admin, /healthz, /readyz,
// /debug/pprof/ and /metrics.
func (s *Server) Admin() http.Handler { return s.wrap(s.admin) }

// Bodies is the body budget, for the other listeners to share.
func (s *Server) Bodies() *httpkit.BodyBudget { return s.opts.Bodies }

// Failures is the failed-authentication brake, for the other listeners to
// share.
func (s *Server) Failures() *httpkit.FailureLimiter { return s.opts.Failures }

// wrap adds panic recovery and the body budget around a listener's routes.
func (s *Server) wrap(h http.Handler) http.Handler {
	return httpkit.Recover(s.log, "http", s.opts.Bodies.Wrap(s.maxBody, h), func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errors.New("panic"))
	})
}

// Routes lists every "METHOD /pattern" of both listeners, sorted, each once.
func (s *Server) Routes() []string {
	all := slices.Concat(s.main.patterns, s.admin.patterns)
	slices.Sort(all)
	return slices.Compact(all)
}

func (s *Server) registerMain() {
	m := s.main
	m.handle("GET /healthz", scopePublic, s.healthz)

	m.handle("GET /v1/ns/{ns}/queues", scopeNamespace, s.listQueues)
	m.handle("PUT /v1/ns/{ns}/queues/{q}", scopeNamespace, s.putQueue)
	m.handle("GET /v1/ns/{ns}/queues/{q}", scopeNamespace, s.getQueue)
	m.handle("DELETE /v1/ns/{ns}/queues/{q}", scopeNamespace, s.deleteQueue)
	m.handle("POST /v1/ns/{ns}/queues/{q}/pause", scopeNamespace, s.pauseQueue)
	m.handle("POST /v1/ns/{ns}/queues/{q}/resume", scopeNamespace, s.resumeQueue)
	m.handle("POST /v1/ns/{ns}/queues/{q}/purge", scopeNamespace, s.purgeQueue)

	m.handle("POST /v1/ns/{ns}/queues/{q}/jobs", scopeNamespace, s.put)
	m.handle("POST /v1/ns/{ns}/queues/{q}/jobs/batch", scopeNamespace, s.putBatch)
	m.handle("GET /v1/ns/{ns}/queues/{q}/jobs", scopeNamespace, s.list)
	m.handle("DELETE /v1/ns/{ns}/queues/{q}/jobs", scopeNamespace, s.cancelByFilter)
	m.handle("GET /v1/ns/{ns}/queues/{q}/jobs/{id}", scopeNamespace, s.peek)
	m.handle("PATCH /v1/ns/{ns}/queues/{q}/jobs/{id}", scopeNamespace, s.update)
	m.handle("DELETE /v1/ns/{ns}/queues/{q}/jobs/{id}", scopeNamespace, s.cancel)
	m.handle("POST /v1/ns/{ns}/queues/{q}/jobs/{id}/ack", scopeNamespace, s.ack)
	m.handle("POST /v1/ns/{ns}/queues/{q}/jobs/{id}/nack", scopeNamespace, s.nack)
	m.handle("POST /v1/ns/{ns}/queues/{q}/jobs/{id}/touch", scopeNamespace, s.touch)
	m.handle("POST /v1/ns/{ns}/queues/{q}/jobs/{id}/bury", scopeNamespace, s.bury)
	m.handle("GET /v1/ns/{ns}/queues/{q}/jobs/{id}/result", scopeNamespace, s.result)
	m.handle("POST /v1/ns/{ns}/queues/{q}/take", scopeNamespace, s.take)
	m.handle("POST /v1/ns/{ns}/queues/{q}/ack", scopeNamespace, s.ackBatch)
	m.handle("POST /v1/ns/{ns}/take", scopeNamespace, s.take)
	m.handle("POST /v1/ns/{ns}/queues/{q}/call", scopeNamespace, s.call)
	m.handle("POST /v1/ns/{ns}/queues/{q}/dead/respawn", scopeNamespace, s.respawn)
	m.handle("DELETE /v1/ns/{ns}/queues/{q}/dead", scopeNamespace, s.purgeDead)
	m.handle("DELETE /v1/ns/{ns}/jobs", scopeNamespace, s.cancelByFilter)

	m.handle("POST /v1/ns/{ns}/channels/{ch}/publish", scopeNamespace, s.publish)
	m.handle("GET /v1/ns/{ns}/channels/{ch}/history", scopeNamespace, s.history)
}

func (s *Server) registerAdmin() {
	a := s.admin
	a.handle("GET /healthz", scopePublic, s.healthz)
	a.handle("GET /readyz", scopePublic, s.readyz)

	a.handle("POST /admin/namespaces", scopeAdmin, s.createNamespace)
	a.handle("GET /admin/namespaces", scopeAdmin, s.listNamespaces)
	a.handle("PUT /admin/namespaces/{ns}", scopeAdmin, s.putNamespace)
	a.handle("POST /admin/namespaces/{ns}/tokens", scopeAdmin, s.createToken)
	a.handle("DELETE /admin/namespaces/{ns}/tokens/{token}", scopeAdmin, s.revokeToken)

	// pprof goes on this mux, never on http.DefaultServeMux, so that it is
	// reachable only on the admin listener and behind the admin token.
	a.handleHTTP("GET /debug/pprof/", scopeAdmin, http.HandlerFunc(pprof.Index))
	a.handleHTTP("GET /debug/pprof/cmdline", scopeAdmin, http.HandlerFunc(pprof.Cmdline))
	a.handleHTTP("GET /debug/pprof/profile", scopeAdmin, http.HandlerFunc(pprof.Profile))
	a.handleHTTP("GET /debug/pprof/symbol", scopeAdmin, http.HandlerFunc(pprof.Symbol))
	a.handleHTTP("POST /debug/pprof/symbol", scopeAdmin, http.HandlerFunc(pprof.Symbol))
	a.handleHTTP("GET /debug/pprof/trace", scopeAdmin, http.HandlerFunc(pprof.Trace))
	if s.opts.Metrics != nil {
		a.handleHTTP("GET /metrics", scopeAdmin, s.opts.Metrics)
	}
}

// exactBodyMax bounds the buffer readBody sizes from Content-Length alone,
// so a client that announces a body and sends none holds at most this much
// (io.ReadAll grows only with what arrives).
const exactBodyMax = 4 << 10

// readKnown reads a body of n announced bytes to its EOF into a buffer of
// n+1 (the spare byte holds the read that sees the EOF).
func readKnown(rd io.Reader, n int64) ([]byte, error) {
	buf := make([]byte, n+1)
	m := 0
	for {
		k, err := rd.Read(buf[m:])
		m += k
		switch {
		case err == io.EOF && int64(m) != n:
			return nil, fmt.Errorf("body of %d bytes, its Content-Length says %d", m, n)
		case err == io.EOF:
			return buf[:m], nil
		case err != nil:
			return nil, err
		case m == len(buf):
			return nil, fmt.Errorf("body longer than its Content-Length %d", n)
		}
	}
}

// readBody reads a request body up to MaxBody. Nothing is decoded before
// the whole body is in, so an oversized body costs at most MaxBody bytes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= s.maxBody && n <= exactBodyMax {
		// The length is known: one buffer of that size instead of
		// io.ReadAll's growing ones. Reading goes on to the EOF (net/http
		// ends the body at n bytes), as io.ReadAll does: net/http learns
		// only then that the body is done.
		body, err = readKnown(r.Body, n)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge("", "request body is larger than %d bytes", s.maxBody)
		}
		var ee *engine.Error
		if errors.As(err, &ee) {
			return nil, ee // the body budget (httpkit.ErrBodyBudget): 503
		}
		return nil, newAPIError(http.StatusBadRequest, "bad_request", "reading request body: %v", err)
	}
	return body, nil
}

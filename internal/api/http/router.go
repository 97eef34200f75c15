package httpapi

import (
	"bytes"
	"net/http"
	"time"

	"github.com/chronoq/chronoq/internal/api/httpkit"
)

// handler is a route's code: it writes its own success answer and returns
// the error to answer otherwise, so every failure goes through writeError.
// t holds the route's path parts, already checked.
type handler func(w http.ResponseWriter, r *http.Request, t target) error

// router is a ServeMux that answers unknown routes and wrong methods in the
// API's JSON error shape instead of ServeMux's plain text.
//
// Every route is in two muxes: mux, which also has a catch-all "/" that
// calls fallback, and routes, which has the routes alone. A request is
// matched once, by mux; only a request no route takes is matched again,
// by routes, to learn whether it is a 404 or a 405. (Asking mux.Handler
// first and then serving through the mux matched every request twice.)
type router struct {
	s        *Server
	mux      *http.ServeMux
	routes   *http.ServeMux
	patterns []string
}

func newRouter(s *Server) *router {
	rt := &router{s: s, mux: http.NewServeMux(), routes: http.NewServeMux()}
	rt.mux.HandleFunc("/", rt.fallback)
	return rt
}

func (rt *router) handle(pattern string, sc scope, h handler) {
	rt.handleHTTP(pattern, sc, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := pathTarget(r, pattern)
		if err == nil {
			err = h(w, r, t)
		}
		if err != nil {
			rt.s.writeError(w, r, err)
		}
	}))
}

func (rt *router) handleHTTP(pattern string, sc scope, h http.Handler) {
	rt.patterns = append(rt.patterns, pattern)
	var route http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if obs := rt.s.opts.Observe; obs != nil {
			start := time.Now()
			sw := httpkit.NewStatusWriter(w)
			w = sw
			defer func() { obs(pattern, sw.Status, time.Since(start)) }()
		}
		if err := rt.s.authorize(r, sc); err != nil {
			rt.s.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
	rt.mux.Handle(pattern, route)
	rt.routes.Handle(pattern, route)
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.mux.ServeHTTP(w, r) }

// fallback answers what no route took. ServeMux knows whether that is a
// 404, a 405 (and which methods are allowed) or a redirect to a cleaned
// path; let the routes alone decide into a buffer, then answer 404 and 405
// in JSON.
func (rt *router) fallback(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	rt.routes.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		rt.s.writeError(w, r, newAPIError(http.StatusNotFound, "not_found", "no route for %s %s", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		rt.s.writeError(w, r, newAPIError(http.StatusMethodNotAllowed, "method_not_allowed", "method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow")))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	}
}

// recorder captures ServeMux's fallback answers (small, bodies of a line).
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

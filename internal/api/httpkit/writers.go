// Package httpkit holds what chronoq's HTTP listeners share: the one
// decision on who may call (Auth.Decide) with its loopback browser guard
// and its brake on failed authentication, the bound on request-body memory
// across listeners, panic recovery and the response writers the
// middlewares need. The native API (internal/api/http) and the lmstfy API
// (internal/api/lmstfy) each keep their own wire shapes; only the
// decisions live here. docs/api.md describes the resulting behaviour.
package httpkit

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
)

// Recover keeps one bad request from taking the process down: it logs the
// panic with its stack and, when nothing was written yet, lets answer write
// the protocol's 500. http.ErrAbortHandler is re-raised: it is net/http's
// own way to abort a response.
func Recover(log *slog.Logger, what string, next http.Handler, answer func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &TrackingWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			log.Error("panic in "+what+" handler", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !tw.Wrote {
				answer(tw, r)
			}
		}()
		next.ServeHTTP(tw, r)
	})
}

// TrackingWriter remembers whether anything was written, so a recovered
// panic answers only when the response has not started.
type TrackingWriter struct {
	http.ResponseWriter
	Wrote bool
}

func (t *TrackingWriter) WriteHeader(status int) {
	t.Wrote = true
	t.ResponseWriter.WriteHeader(status)
}

func (t *TrackingWriter) Write(b []byte) (int, error) {
	t.Wrote = true
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines (pprof's
// profile and trace, long polls).
func (t *TrackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// StatusWriter remembers the status code for request metrics.
type StatusWriter struct {
	http.ResponseWriter
	Status int
}

// NewStatusWriter starts at 200, what net/http sends when a handler only
// writes a body.
func NewStatusWriter(w http.ResponseWriter) *StatusWriter {
	return &StatusWriter{ResponseWriter: w, Status: http.StatusOK}
}

func (w *StatusWriter) WriteHeader(code int) {
	w.Status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (flush, deadlines).
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

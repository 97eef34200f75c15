package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/chronoq/chronoq/internal/engine"
)

// ErrUnavailable is what the broker wraps when the server cannot take a
// request right now (log not writable, shutting down). The API answers 503
// with Retry-After so clients back off and retry instead of giving up.
var ErrUnavailable = errors.New("unavailable")

// apiError is an error that this package decides on its own, for things the
// engine knows nothing about: auth, routing, body size.
type apiError struct {
	status     int
	code       string
	msg        string
	retryAfter string // Retry-After header, when set
}

func (e *apiError) Error() string { return e.msg }

func newAPIError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// badField builds the error for a rejected input field. It is an engine
// error so that decoding errors and the engine's own validation errors read
// the same way on the wire ("field: message").
func badField(field, format string, args ...any) error {
	return &engine.Error{Code: engine.CodeBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

func tooLarge(field, format string, args ...any) error {
	return &engine.Error{Code: engine.CodePayloadTooLarge, Field: field, Message: fmt.Sprintf(format, args...)}
}

var statusOfCode = map[engine.Code]int{
	engine.CodeBadRequest:        http.StatusBadRequest,
	engine.CodeNamespaceNotFound: http.StatusNotFound,
	engine.CodeQueueNotFound:     http.StatusNotFound,
	engine.CodeJobNotFound:       http.StatusNotFound,
	engine.CodeConflict:          http.StatusConflict,
	engine.CodePayloadTooLarge:   http.StatusRequestEntityTooLarge,
	engine.CodeQueueFull:         http.StatusTooManyRequests,
	engine.CodeUnavailable:       http.StatusServiceUnavailable,
	engine.CodeForbidden:         http.StatusForbidden,
	// a cluster member that cannot serve (docs/cluster.md)
	"not_leader":      http.StatusServiceUnavailable,
	"no_quorum":       http.StatusServiceUnavailable,
	"unknown_outcome": http.StatusServiceUnavailable,
}

// classify maps any error a handler returns to its status, wire code and
// message. Internal errors get a generic message: their text may carry file
// paths or other details that are none of the client's business.
func classify(err error) (status int, code, msg string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status, ae.code, ae.msg
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		if st, ok := statusOfCode[ee.Code]; ok {
			return st, string(ee.Code), ee.Error()
		}
		return http.StatusInternalServerError, "internal", "internal error"
	}
	if errors.Is(err, ErrUnavailable) {
		return http.StatusServiceUnavailable, string(engine.CodeUnavailable), err.Error()
	}
	return http.StatusInternalServerError, "internal", "internal error"
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := classify(err)
	var ae *apiError
	if errors.As(err, &ae) && ae.retryAfter != "" {
		w.Header().Set("Retry-After", ae.retryAfter)
	}
	switch status {
	case http.StatusInternalServerError:
		s.log.Error("http request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="chronoq"`)
	}
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

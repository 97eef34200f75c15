package ws

import (
	"net/http"

	"github.com/chronoq/chronoq/internal/api/httpkit"
)

// With no credential configured (the loopback development mode of
// authRequired), anything that reaches the server may use every namespace
// without a token, and a browser would let any web page the developer
// visits do the same: WebSocket and EventSource are not held back by the
// same-origin policy, and a page can rebind a DNS name of its own to
// 127.0.0.1. So in that mode the request must pass the same rule as the
// HTTP APIs (httpkit.Guard: a local Host, the server's own origin). Once
// any credential exists the token is the guard, never a cookie, and pages
// of every origin may connect.

// originAllowed answers 403 and reports false for a request the open mode
// refuses. A request without Origin is not from a browser page (or is a
// same-origin GET, for which browsers send none) and passes the Origin
// part of the rule.
func (s *Server) originAllowed(w http.ResponseWriter, r *http.Request) bool {
	if s.authRequired() {
		return true
	}
	if msg := httpkit.Guard(r); msg != "" {
		writeError(w, http.StatusForbidden, "forbidden_origin", msg+"; configure a token (namespace, admin or JWT) to allow pages of other origins")
		return false
	}
	return true
}

package ws

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// With no credential configured (the loopback development mode of
// authRequired), anything that reaches the server may use every namespace
// without a token, and a browser would let any web page the developer
// visits do the same: WebSocket and EventSource are not held back by the
// same-origin policy. So in that mode a browser request must come from a
// page of the server's own origin. Once any credential exists the token
// is the guard, never a cookie, and pages of every origin may connect.

// originAllowed answers 403 and reports false for a foreign Origin while
// the server is open. A request without Origin is not from a browser page
// (or is a same-origin GET, for which browsers send none) and passes.
func (s *Server) originAllowed(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || s.authRequired() || sameOrigin(origin, r) {
		return true
	}
	writeError(w, http.StatusForbidden, "forbidden_origin",
		"Origin "+origin+" is not this server ("+r.Host+"): while no token is configured only pages served by the server's own host:port may connect; configure a token (namespace, admin or JWT) to allow pages of other origins")
	return false
}

// sameOrigin compares the Origin's host:port with the request's Host,
// filling in the scheme's default port on either side.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // "null" (sandboxed frames, files) and garbage
	}
	reqScheme := "http"
	if r.TLS != nil {
		reqScheme = "https"
	}
	return strings.EqualFold(withPort(u.Host, u.Scheme), withPort(r.Host, reqScheme))
}

func withPort(hostport, scheme string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	port := "80"
	if scheme == "https" || scheme == "wss" {
		port = "443"
	}
	return net.JoinHostPort(strings.Trim(hostport, "[]"), port)
}

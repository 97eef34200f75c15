package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// scope says who may call a route.
type scope int

const (
	scopePublic    scope = iota // health checks: probes carry no credentials
	scopeNamespace              // /v1/ns/{ns}/...: that namespace's token or the admin token
	scopeAdmin                  // admin listener: the admin token when one is configured
)

func (s *Server) authorize(r *http.Request, sc scope) error {
	switch sc {
	case scopePublic:
		return nil
	case scopeAdmin:
		if s.opts.AdminToken == "" {
			return nil
		}
	case scopeNamespace:
		// Loopback development mode: nothing configured, nothing asked. The
		// moment a token exists, every call must present one.
		if !s.opts.RequireAuth && s.opts.AdminToken == "" && !s.b.HasTokens() {
			return nil
		}
	}
	tok, ok := bearer(r)
	if !ok {
		return newAPIError(http.StatusUnauthorized, "unauthorized", "missing bearer token (Authorization: Bearer <token>)")
	}
	if s.isAdminToken(tok) {
		return nil
	}
	ns, known := s.b.TokenNamespace(tok)
	if !known {
		return newAPIError(http.StatusUnauthorized, "unauthorized", "unknown token")
	}
	if sc == scopeAdmin {
		return newAPIError(http.StatusForbidden, "forbidden", "admin calls need the admin token, not a namespace token")
	}
	if want := r.PathValue("ns"); ns != want {
		return newAPIError(http.StatusForbidden, "forbidden", "token of namespace %q cannot be used on namespace %q", ns, want)
	}
	return nil
}

// isAdminToken compares in constant time so the comparison does not leak
// how much of a guess was right.
func (s *Server) isAdminToken(tok string) bool {
	a := s.opts.AdminToken
	return a != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a)) == 1
}

// bearer extracts the token of an "Authorization: Bearer <token>" header;
// the scheme is case-insensitive (RFC 7235).
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

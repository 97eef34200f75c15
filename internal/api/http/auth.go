package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/chronoq/chronoq/internal/api/httpkit"
)

// scope says who may call a route.
type scope int

const (
	scopePublic    scope = iota // health checks: probes carry no credentials
	scopeNamespace              // /v1/ns/{ns}/...: that namespace's token or the admin token
	scopeAdmin                  // admin listener: the admin token when one is configured
)

// authorize applies httpkit's one auth rule (internal/api/httpkit/auth.go)
// and words its refusals in this API's error shape.
func (s *Server) authorize(r *http.Request, sc scope) error {
	if sc == scopePublic {
		return nil
	}
	need := httpkit.NeedNamespace
	if sc == scopeAdmin {
		need = httpkit.NeedAdmin
	}
	tok, _ := bearer(r)
	ns := r.PathValue("ns")
	v := s.auth.Decide(r, need, ns, tok)
	switch v.Reason {
	case httpkit.Allowed:
		return nil
	case httpkit.Missing:
		return newAPIError(http.StatusUnauthorized, "unauthorized", "missing bearer token (Authorization: Bearer <token>)")
	case httpkit.Unknown:
		return newAPIError(http.StatusUnauthorized, "unauthorized", "unknown token")
	case httpkit.NotAdmin:
		return newAPIError(http.StatusForbidden, "forbidden", "admin calls need the admin token, not a namespace token")
	case httpkit.WrongNamespace:
		got, _ := s.b.TokenNamespace(tok)
		return newAPIError(http.StatusForbidden, "forbidden", "token of namespace %q cannot be used on namespace %q", got, ns)
	case httpkit.Throttled:
		e := newAPIError(http.StatusTooManyRequests, "rate_limited", "%s", v.Message)
		e.retryAfter = strconv.Itoa(v.RetryAfterSeconds())
		return e
	default: // httpkit.Foreign
		return newAPIError(http.StatusForbidden, "forbidden", "%s", v.Message)
	}
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

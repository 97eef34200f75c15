package httpkit

import (
	"crypto/subtle"
	"net/http"
	"time"
)

// Need says what a route asks of its caller.
type Need int

const (
	// NeedNamespace: the namespace's token or the admin token; nothing
	// while no credential exists at all and the listeners are loopback.
	NeedNamespace Need = iota
	// NeedAdmin: the admin token when one is configured.
	NeedAdmin
)

// Reason says why a call was refused; each protocol words it its own way.
type Reason int

const (
	Allowed        Reason = iota
	Missing               // no token given
	Unknown               // a token that is neither the admin token nor a namespace's
	WrongNamespace        // another namespace's token
	NotAdmin              // a namespace token on an admin route
	Throttled             // too many failed attempts from this source (429)
	Foreign               // open mode: refused by the loopback browser guard (403)
)

// Verdict is the decision on one request.
type Verdict struct {
	Reason Reason
	// Message explains a Throttled or Foreign refusal to the caller.
	Message string
	// RetryAfter is set for Throttled.
	RetryAfter time.Duration
}

// OK says whether the call may go on.
func (v Verdict) OK() bool { return v.Reason == Allowed }

// RetryAfterSeconds is RetryAfter rounded up, for the Retry-After header.
func (v Verdict) RetryAfterSeconds() int {
	return max(1, int((v.RetryAfter+time.Second-1)/time.Second))
}

// Auth is the one authentication rule of chronoq's HTTP listeners.
type Auth struct {
	// AdminToken, when set, is required on admin routes and accepted as
	// every namespace's token.
	AdminToken string
	// RequireAuth demands a token on namespace routes even while no
	// namespace token exists (listeners beyond loopback).
	RequireAuth bool
	// HasTokens says whether any namespace token exists.
	HasTokens func() bool
	// TokenNamespace gives a namespace token's namespace.
	TokenNamespace func(tok string) (ns string, ok bool)
	// Failures, when set, brakes sources that keep failing.
	Failures *FailureLimiter
}

// IsAdminToken compares in constant time so a guess learns nothing from how
// long the comparison took.
func (a *Auth) IsAdminToken(tok string) bool {
	return a.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.AdminToken)) == 1
}

// Open reports whether a route of this need runs without credentials: the
// admin routes while no admin token is configured, the namespace routes
// while nothing is configured at all ("open while no token exists on
// loopback"; the server refuses to listen beyond loopback in that state).
func (a *Auth) Open(need Need) bool {
	if a.AdminToken != "" {
		return false
	}
	if need == NeedAdmin {
		return true
	}
	return !a.RequireAuth && (a.HasTokens == nil || !a.HasTokens())
}

// Decide decides whether r may call a route of the given need on namespace
// ns (ignored for NeedAdmin). tokens are the credentials the protocol found
// in the request, in its order of preference; empty ones are ignored.
//
// An open route answers only loopback callers that are not foreign web
// pages (see Guard). Otherwise a token must be the admin token or, for a
// namespace route, a token of ns. Every unknown token counts against the
// source; a source over the limit is refused before its token is looked at,
// so guessing gets no answer at all.
func (a *Auth) Decide(r *http.Request, need Need, ns string, tokens ...string) Verdict {
	if a.Open(need) {
		if msg := Guard(r); msg != "" {
			return Verdict{Reason: Foreign, Message: msg}
		}
		return Verdict{}
	}
	if a.Failures != nil {
		if wait, blocked := a.Failures.Blocked(r.RemoteAddr); blocked {
			return Verdict{Reason: Throttled, RetryAfter: wait,
				Message: "too many failed authentications from this address; retry later"}
		}
	}
	given := false
	for _, tok := range tokens {
		if tok == "" {
			continue
		}
		given = true
		if a.IsAdminToken(tok) {
			return Verdict{}
		}
	}
	if !given {
		return Verdict{Reason: Missing}
	}
	for _, tok := range tokens {
		if tok == "" || a.TokenNamespace == nil {
			continue
		}
		got, ok := a.TokenNamespace(tok)
		if !ok {
			continue
		}
		switch {
		case need == NeedAdmin:
			return Verdict{Reason: NotAdmin}
		case got != ns:
			return Verdict{Reason: WrongNamespace}
		default:
			return Verdict{}
		}
	}
	if a.Failures != nil {
		a.Failures.Fail(r.RemoteAddr)
	}
	return Verdict{Reason: Unknown}
}

// MinTokenLen is the shortest admin token the server accepts, and the
// shortest namespace token a client may choose: shorter ones are guessable
// despite the failure brake.
const MinTokenLen = 16

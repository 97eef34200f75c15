package httpkit

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Guard is the rule for requests that no credential protects (the open,
// loopback-only mode; see Auth.Open). A web page the user visits can send
// requests to 127.0.0.1, and can rebind a DNS name of its own to 127.0.0.1
// to read the answers; it cannot choose some headers. So an open route
// answers only when:
//
//   - the Host header names this machine: localhost, an address in
//     127.0.0.0/8, [::1], or the address the request arrived on, with any
//     port (a rebound DNS name fails here);
//   - an Origin header, when present, is the request's own origin, and a
//     Sec-Fetch-Site header, when present, is same-origin or none (another
//     site's page fails here);
//   - a request from a browser (Origin or Sec-Fetch-Site present) with a
//     body does not use a type a page may send without asking
//     (text/plain, application/x-www-form-urlencoded, multipart/form-data,
//     or none), so a blind cross-site POST cannot slip through.
//
// Command-line clients send neither Origin nor Sec-Fetch-Site, so
// `curl -d '{...}'` (application/x-www-form-urlencoded) keeps working.
// Guard answers "" when the request may go on, else the reason.
func Guard(r *http.Request) string {
	if !localHost(r) {
		return "Host " + quoteHeader(r.Host) + " is not this machine: without a token configured, only localhost, 127.0.0.0/8, [::1] " +
			"and the listener's own address are answered (protection against DNS rebinding); configure a token to serve other names"
	}
	origin := r.Header.Get("Origin")
	site := r.Header.Get("Sec-Fetch-Site")
	if origin != "" && !sameOrigin(r, origin) {
		return "cross-origin request from " + quoteHeader(origin) + " refused: without a token configured, web pages of other origins may not call this server"
	}
	if site != "" && site != "same-origin" && site != "none" {
		return "cross-site request (Sec-Fetch-Site: " + quoteHeader(site) + ") refused: without a token configured, web pages of other sites may not call this server"
	}
	if (origin != "" || site != "") && hasBody(r) {
		if mt := mediaType(r); simpleType(mt) {
			if mt == "" {
				mt = "none"
			}
			return "request body of type " + mt + " from a browser refused: without a token configured, browsers must send Content-Type: application/json"
		}
	}
	return ""
}

func quoteHeader(s string) string {
	const maxShown = 100
	if len(s) > maxShown {
		s = s[:maxShown] + "..."
	}
	return "\"" + strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f || c == '"' {
			return '?'
		}
		return c
	}, s) + "\""
}

func localHost(r *http.Request) bool {
	if r.Host == "" {
		return true // HTTP/1.0 without Host: no browser sends that
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return true // 127.0.0.0/8 and ::1
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Unmap() == ip {
			return true
		}
	}
	return false
}

func sameOrigin(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}

func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		// Browsers send what a page gives them; anything unparsable is
		// treated like the simple type its prefix names.
		mt = strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	}
	return mt
}

// simpleType reports the body types a page may send cross-origin without a
// CORS preflight: the Fetch standard's safelisted Content-Type values, and
// no Content-Type at all (a Blob body without a type).
func simpleType(mt string) bool {
	switch mt {
	case "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
		return true
	}
	return false
}

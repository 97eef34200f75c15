package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// Audit: every administrative change is logged once, after it was
// answered, as one structured line with audit=true: who (actor: "admin"
// for the admin token, "token:<first 12 hex of its SHA-256>" for a
// namespace token — the id the token table stores, never the secret —,
// "anonymous" in open mode), what (action, target, and for configuration
// changes the request body), the outcome (status, result) and when (the
// line's time). The secret of a token never appears: a token in a path
// (DELETE …/tokens/{token}) is logged as its hash prefix too.
//
// The changes: namespaces, tokens, queue configuration, pause/resume,
// purge, queue deletion, dead-letter purge, forced real-time disconnects,
// backups; the native API, lmstfy's /api and /token routes alike.

type auditRule struct {
	pattern string // http.ServeMux pattern
	action  string
	body    bool // log the request body (configuration, never secrets)
}

var mainAuditRules = []auditRule{
	{"PUT /v1/ns/{ns}/queues/{q}", "queue.configure", true},
	{"DELETE /v1/ns/{ns}/queues/{q}", "queue.delete", false},
	{"POST /v1/ns/{ns}/queues/{q}/pause", "queue.pause", false},
	{"POST /v1/ns/{ns}/queues/{q}/resume", "queue.resume", false},
	{"POST /v1/ns/{ns}/queues/{q}/purge", "queue.purge", false},
	{"DELETE /v1/ns/{ns}/queues/{q}/dead", "queue.purge_dead", false},
	{"DELETE /api/{ns}/{q}", "queue.purge", false}, // lmstfy destroy
	{"DELETE /api/{ns}/{q}/deadletter", "queue.purge_dead", false},
}

var adminAuditRules = []auditRule{
	{"POST /admin/namespaces", "namespace.create", true},
	{"PUT /admin/namespaces/{ns}", "namespace.configure", true},
	{"POST /admin/namespaces/{ns}/tokens", "token.create", false},
	{"DELETE /admin/namespaces/{ns}/tokens/{token}", "token.revoke", false},
	{"POST /token/{ns}", "token.create", false}, // lmstfy; its ?token= is the new secret
	{"DELETE /token/{ns}/{token}", "token.revoke", false},
	{"POST /admin/disconnect", "realtime.disconnect", true},
	{"POST /admin/backup", "backup", false},
	{"POST /cluster/members", "cluster.add_member", true},
	{"DELETE /cluster/members/{id}", "cluster.remove_member", false},
}

// dashboardAuditRules are the native API's queue changes as the dashboard
// reaches them: the same routes under /ui/api on the admin listener.
func dashboardAuditRules() []auditRule {
	var out []auditRule
	for _, r := range mainAuditRules {
		method, path, _ := strings.Cut(r.pattern, " ")
		if strings.HasPrefix(path, "/v1/") {
			out = append(out, auditRule{method + " /ui/api" + path, r.action, r.body})
		}
	}
	return out
}

// maxAuditBody bounds the request body copied into an audit line.
const maxAuditBody = 4 << 10

// audited puts next behind a mux that logs the requests matching rules.
// Almost no request matches one (puts, takes, acks), and matching those
// against the rules' wildcard patterns cost ServeMux ~0.6 µs and 15
// allocations each (BenchmarkAuditedPut): auditFilter sends them straight
// to next.
func (s *Server) audited(next http.Handler, rules []auditRule) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	for _, rule := range rules {
		mux.Handle(rule.pattern, s.auditOne(rule, next))
	}
	f := newAuditFilter(rules)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.cannotMatch(r) {
			next.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// auditFilter knows, without ServeMux, that a request matches no audit
// rule: no rule has its method, its number of path segments and its
// literal segments where the rule has them. Whatever it cannot rule out
// that way (a path ServeMux would clean or unescape, a pattern with a
// host) goes to the mux, which decides; the filter never matches.
type auditFilter []auditShape

type auditShape struct {
	method  string   // "" for any
	segs    []string // the pattern's path segments; "{…}" ones are wildcards
	subtree bool     // ends in "/" or "{x...}": more segments may follow
	slash   bool     // ends in "/{$}"
	any     bool     // a pattern the filter does not read (host): always ask the mux
}

func newAuditFilter(rules []auditRule) auditFilter {
	var f auditFilter
	for _, rule := range rules {
		method, path, ok := strings.Cut(rule.pattern, " ")
		if !ok {
			method, path = "", rule.pattern
		}
		sh := auditShape{method: method}
		if !strings.HasPrefix(path, "/") {
			sh.any = true
			f = append(f, sh)
			continue
		}
		segs := strings.Split(path[1:], "/")
		last := segs[len(segs)-1]
		switch {
		case last == "":
			sh.subtree, segs = true, segs[:len(segs)-1]
		case strings.HasSuffix(last, "...}"):
			sh.subtree, segs = true, segs[:len(segs)-1]
		case last == "{$}":
			sh.slash, segs[len(segs)-1] = true, ""
		}
		sh.segs = segs
		f = append(f, sh)
	}
	return f
}

func (f auditFilter) cannotMatch(r *http.Request) bool {
	path := r.URL.Path
	if r.URL.RawPath != "" || !strings.HasPrefix(path, "/") || strings.Contains(path, "//") || strings.Contains(path, "/.") {
		return false
	}
	for i := range f {
		if f[i].couldMatch(r.Method, path) {
			return false
		}
	}
	return true
}

func (sh *auditShape) couldMatch(method, path string) bool {
	if sh.method != "" && sh.method != method && headAsGet(method) != sh.method {
		return false
	}
	if sh.any {
		return true
	}
	n := 0
	for rest := path[1:]; ; n++ {
		seg, more, found := strings.Cut(rest, "/")
		if n < len(sh.segs) && seg != sh.segs[n] && !strings.HasPrefix(sh.segs[n], "{") {
			return false
		}
		if !found {
			break
		}
		rest = more
	}
	n++ // segments seen
	// A pattern ending in a slash also takes the path without it: ServeMux
	// redirects that to the path with the slash.
	switch {
	case sh.subtree:
		return n >= len(sh.segs)
	case sh.slash:
		return n == len(sh.segs) || n == len(sh.segs)-1
	}
	return n == len(sh.segs)
}

// headAsGet: a GET pattern serves HEAD too.
func headAsGet(method string) string {
	if method == http.MethodHead {
		return http.MethodGet
	}
	return ""
}

func (s *Server) auditOne(rule auditRule, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if rule.body && r.Body != nil {
			head, _ := io.ReadAll(io.LimitReader(r.Body, maxAuditBody))
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
			body = head
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		// read before next runs: the inner mux resets the path values
		attrs := []any{"audit", true, "actor", s.auditActor(r), "action", rule.action}
		if ns := r.PathValue("ns"); ns != "" {
			attrs = append(attrs, "namespace", ns)
		}
		if q := r.PathValue("q"); q != "" {
			attrs = append(attrs, "queue", q)
		}
		if tok := r.PathValue("token"); tok != "" {
			attrs = append(attrs, "token", tokenID(strings.TrimPrefix(tok, "sha256:"), strings.HasPrefix(tok, "sha256:")))
		}
		defer func() {
			if len(body) > 0 {
				attrs = append(attrs, "detail", string(bytes.TrimSpace(body)))
			}
			result := "ok"
			if rec.status >= 400 {
				result = "refused"
			}
			attrs = append(attrs, "status", rec.status, "result", result, "remote", r.RemoteAddr)
			s.audit().Info("admin change", attrs...)
		}()
		next.ServeHTTP(rec, r)
	})
}

// audit is the logger of audit lines (Config.AuditLogger, else Logger).
func (s *Server) audit() *slog.Logger {
	if s.cfg.AuditLogger != nil {
		return s.cfg.AuditLogger
	}
	return s.lg
}

// auditActor names who made the request without revealing a secret.
func (s *Server) auditActor(r *http.Request) string {
	var cands []string
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		cands = append(cands, strings.TrimSpace(tok))
	}
	if _, pw, ok := r.BasicAuth(); ok {
		cands = append(cands, pw)
	}
	if tok := r.Header.Get("X-Token"); tok != "" {
		cands = append(cands, tok)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") { // lmstfy's query token; on /token it is the new secret
		if tok := r.URL.Query().Get("token"); tok != "" {
			cands = append(cands, tok)
		}
	}
	for _, tok := range cands {
		if s.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) == 1 {
			return "admin"
		}
	}
	for _, tok := range cands {
		if _, t, ok := strings.Cut(tok, ":"); ok && strings.HasPrefix(r.URL.Path, "/api/") {
			tok = t // lmstfy's "pool:" prefix
		}
		if _, ok := s.b.TokenNamespace(tok); ok {
			return "token:" + tokenID(tok, false)
		}
	}
	if len(cands) > 0 {
		return "unknown:" + tokenID(cands[0], false)
	}
	return "anonymous"
}

// tokenID is the first 12 hex digits of a token's SHA-256 (what the token
// table keys on); hashed says tok is already that hex.
func tokenID(tok string, hashed bool) string {
	if !hashed {
		h := sha256.Sum256([]byte(tok))
		tok = hex.EncodeToString(h[:])
	}
	return tok[:min(12, len(tok))]
}

// statusRecorder keeps the status of the answer; Unwrap lets
// http.ResponseController reach the connection (the backup stream clears
// its write deadline through it).
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusRecorder) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

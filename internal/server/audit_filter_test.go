package server

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	httpapi "github.com/chronoq/chronoq/internal/api/http"
)

// The audit filter may let a request skip the audit mux only when no
// audit rule would match it: checked against ServeMux itself, for every
// route of the API with wildcards filled by values that collide with the
// rules' literal segments, under every method, with and without a
// trailing slash, and for paths ServeMux cleans or unescapes. And it
// must let the hot routes skip, or it buys nothing.
func TestAuditFilterNeverHidesARule(t *testing.T) {
	wild := regexp.MustCompile(`\{[^}]*\}`)
	var paths []string
	routes := httpapi.New(routesOnly{}, httpapi.Options{}).Routes()
	all := append(append(append([]auditRule{}, mainAuditRules...), adminAuditRules...), dashboardAuditRules()...)
	for _, r := range all {
		routes = append(routes, r.pattern)
	}
	// every kind of pattern ServeMux has, though no rule uses them yet
	shapes := []auditRule{
		{pattern: "GET /shape/{a}/get"}, {pattern: "/shape/any/{a}/x"}, {pattern: "POST /shape/exact/{$}"},
		{pattern: "DELETE /shape/sub/"}, {pattern: "PUT /shape/rest/{r...}"},
	}
	for _, r := range shapes {
		routes = append(routes, r.pattern)
	}
	routes = append(routes, "/api/ns/q", "/api/ns/q/deadletter", "/token/ns", "/ui/api/v1/ns/n/queues/q/pause",
		"/shape/any/a/x/y", "/shape/exact", "/shape/sub", "/shape/sub/a/b", "/shape/rest", "/shape/rest/a/b", "/shape/host")
	for _, pat := range routes {
		_, path, ok := strings.Cut(pat, " ")
		if !ok {
			path = pat
		}
		path = "/" + strings.TrimPrefix(strings.TrimPrefix(path, "chronoq"), "/")
		path = strings.TrimSuffix(path, "{$}")
		for _, v := range []string{"x", "pause", "dead", "deadletter", "tokens", "jobs", "namespaces"} {
			p := wild.ReplaceAllString(path, v)
			paths = append(paths, p, p+"/", strings.Replace(p, "/", "//", 2), p+"/./", strings.Replace(p, "a", "%61", 1))
		}
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}
	for name, rules := range map[string][]auditRule{
		"main":   mainAuditRules,
		"admin":  append(dashboardAuditRules(), adminAuditRules...),
		"shapes": shapes,
	} {
		f := newAuditFilter(rules)
		only := http.NewServeMux() // the rules alone: a match is an audited request
		for _, r := range rules {
			only.Handle(r.pattern, http.NotFoundHandler())
		}
		checked, skipped := 0, 0
		for _, p := range paths {
			for _, m := range methods {
				req := httptest.NewRequest(m, "http://chronoq"+p, nil)
				checked++
				if !f.cannotMatch(req) {
					continue
				}
				skipped++
				if _, pat := only.Handler(req); pat != "" {
					t.Errorf("%s: %s %s skips the audit mux but matches rule %q", name, m, p, pat)
				}
			}
		}
		if skipped == 0 || skipped == checked {
			t.Errorf("%s: %d of %d requests skip the audit mux: the filter is not discriminating", name, skipped, checked)
		}
	}
	host := newAuditFilter([]auditRule{{pattern: "chronoq/shape/host"}})
	if host.cannotMatch(httptest.NewRequest("GET", "http://elsewhere/v1/x", nil)) {
		t.Error("a rule with a host pattern was ruled out without the mux")
	}
	main := newAuditFilter(mainAuditRules)
	for _, hot := range []string{
		"POST /v1/ns/default/queues/q/jobs",
		"POST /v1/ns/default/take",
		"POST /v1/ns/default/queues/q/jobs/01J0000000000000000000000/ack",
		"GET /v1/ns/default/queues/q",
		"PUT /api/ns/q",
		"GET /api/ns/q",
	} {
		m, p, _ := strings.Cut(hot, " ")
		if !main.cannotMatch(httptest.NewRequest(m, "http://chronoq"+p, nil)) {
			t.Errorf("%s goes through the audit mux", hot)
		}
	}
}

// routesOnly is enough of a backend to list the API's routes.
type routesOnly struct{ httpapi.Backend }

func (routesOnly) TokenNamespace(string) (string, bool) { return "", false }
func (routesOnly) HasTokens() bool                      { return false }

// A put through the main listener's audit layer: with the filter, and
// through the audit mux as every request went before it.
func BenchmarkAuditedPut(b *testing.B) {
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	s := &Server{}
	mux := http.NewServeMux()
	mux.Handle("/", nop)
	for _, rule := range mainAuditRules {
		mux.Handle(rule.pattern, s.auditOne(rule, nop))
	}
	for name, h := range map[string]http.Handler{"filter": s.audited(nop, mainAuditRules), "mux": mux} {
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest("POST", "http://chronoq/v1/ns/default/queues/bench/jobs", nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}

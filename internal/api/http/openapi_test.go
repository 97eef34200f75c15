package httpapi

import (
	"bufio"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	openapiPath   = regexp.MustCompile(`^  (/\S*):\s*$`)
	openapiMethod = regexp.MustCompile(`^    (get|put|post|delete|patch|head|options|trace):\s*$`)
)

// openapiRoutes reads "METHOD /path" pairs from the paths section of an
// OpenAPI file by indentation alone: paths at two spaces, their operations
// at four. docs/openapi.yaml is written to keep to that layout.
func openapiRoutes(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var routes []string
	in, path := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line != "" && line[0] != ' ' && line[0] != '#' {
			in = line == "paths:"
			continue
		}
		if !in {
			continue
		}
		if m := openapiPath.FindStringSubmatch(line); m != nil {
			path = m[1]
		} else if m := openapiMethod.FindStringSubmatch(line); m != nil && path != "" {
			routes = append(routes, strings.ToUpper(m[1])+" "+path)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(routes)
	return routes
}

func TestOpenAPICoversRoutes(t *testing.T) {
	s := New(&fakeBackend{}, Options{Metrics: http.NotFoundHandler()})
	code := s.Routes()
	doc := openapiRoutes(t, "../../../docs/openapi.yaml")
	if len(doc) == 0 {
		t.Fatal("no routes found in docs/openapi.yaml")
	}
	for _, r := range code {
		if !slices.Contains(doc, r) {
			t.Errorf("route %q is registered but not in docs/openapi.yaml", r)
		}
	}
	// routes internal/server mounts on the admin listener itself
	served := []string{"POST /admin/backup"}
	for _, r := range doc {
		if servedByDashboard(r) {
			continue // internal/api/ui serves and tests these
		}
		if !slices.Contains(code, r) && !slices.Contains(served, r) {
			t.Errorf("docs/openapi.yaml documents %q, which is not registered", r)
		}
	}
}

func TestRoutesSortedAndUnique(t *testing.T) {
	rs := New(&fakeBackend{}, Options{}).Routes()
	if !slices.IsSorted(rs) || len(slices.Compact(slices.Clone(rs))) != len(rs) {
		t.Fatalf("routes not sorted or repeated: %v", rs)
	}
	if slices.Contains(rs, "GET /metrics") {
		t.Fatal("/metrics listed without a metrics handler")
	}
	if !slices.Contains(rs, "GET /healthz") || !slices.Contains(rs, "GET /readyz") {
		t.Fatalf("health routes missing: %v", rs)
	}
}

// servedByDashboard: routes of docs/openapi.yaml that the dashboard
// (internal/api/ui) serves on the admin listener, not this package.
func servedByDashboard(route string) bool {
	_, path, _ := strings.Cut(route, " ")
	return strings.HasPrefix(path, "/ui/") || path == "/admin/stats" || path == "/admin/stats/stream"
}

package e2e

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// rawCall sends one request to addr with the given headers (a "Host" pair
// sets the Host header) and answers the status and body.
func rawCall(t *testing.T, method, addr, path, body string, header ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNoTokenModeRefusesWebPages: a server without any token (the default,
// loopback-only) refuses what a web page could send — a blind cross-site
// text/plain POST, a DNS-rebound Host, a foreign Origin — on the native
// API, the lmstfy API and the admin listener, and still serves curl -d.
func TestNoTokenModeRefusesWebPages(t *testing.T) {
	srv := startServer(t, t.TempDir())
	h, a := srv.httpAddr, srv.adminAddr

	// curl -d '{...}' sends the form type and no Origin: served.
	if code, body := rawCall(t, "POST", h, "/v1/ns/default/queues/csrf/jobs", `{"payload":1}`,
		"Content-Type", "application/x-www-form-urlencoded"); code != 201 {
		t.Fatalf("curl-style put: %d %s", code, body)
	}
	cases := []struct {
		name, method, addr, path, body string
		header                         []string
	}{
		{"blind CSRF purge", "POST", h, "/v1/ns/default/queues/csrf/purge", `{}`,
			[]string{"Content-Type", "text/plain", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}},
		{"rebound Host on /v1", "GET", h, "/v1/ns/default/queues", ``, []string{"Host", "rebound.example:1234"}},
		{"rebound Host on lmstfy /api", "GET", h, "/api/default/csrf/peek", ``, []string{"Host", "rebound.example"}},
		{"cross-origin lmstfy publish", "PUT", h, "/api/default/csrf", `x`,
			[]string{"Content-Type", "text/plain", "Origin", "https://evil.example"}},
		{"rebound Host on lmstfy /token", "POST", a, "/token/default?description=x", ``, []string{"Host", "rebound.example"}},
		{"cross-origin admin", "POST", a, "/admin/namespaces", `{"name":"evil"}`,
			[]string{"Content-Type", "application/json", "Origin", "https://evil.example"}},
	}
	for _, c := range cases {
		code, body := rawCall(t, c.method, c.addr, c.path, c.body, c.header...)
		if code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", c.name, code, body)
		}
	}
	// Nothing was purged.
	if code, body := rawCall(t, "GET", h, "/v1/ns/default/queues/csrf", ``); code != 200 || !strings.Contains(body, `"ready":1`) {
		t.Fatalf("queue after the refused purge: %d %s", code, body)
	}
}

// TestShortAdminTokenRefused: an admin token shorter than 16 characters is
// refused at startup with a message naming the limit.
func TestShortAdminTokenRefused(t *testing.T) {
	if buildErr != "" {
		t.Fatalf("building the server failed:\n%s", buildErr)
	}
	// Bounded: a server that accepted the token would run until killed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "serve", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--admin", "", "--beanstalk", "", "--admin-token", "x")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "at least 16") {
		t.Fatalf("short admin token: err %v, output %s", err, out)
	}
}

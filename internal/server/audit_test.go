package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chronoq/chronoq/internal/server"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// auditLines returns the audit lines logged so far.
func auditLines(t *testing.T, buf *lockedBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if m["audit"] == true {
			out = append(out, m)
		}
	}
	return out
}

func call(t *testing.T, method, url, auth string, body string, hdr ...string) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAuditAdminChanges: each admin change is logged once with actor,
// action, target and result, and no secret ever reaches the log.
func TestAuditAdminChanges(t *testing.T) {
	const admin = "admin-token-for-the-audit-test-0123456789"
	var logBuf, auditBuf lockedBuffer
	cfg := testConfig(t)
	cfg.AdminToken = admin
	cfg.BeanstalkAddr = ""
	cfg.Logger = slog.New(slog.NewJSONHandler(&logBuf, nil))
	cfg.AuditLogger = slog.New(slog.NewJSONHandler(&auditBuf, nil))
	s := start(t, cfg)
	main, adm := "http://"+s.Addr(server.HTTP), "http://"+s.Addr(server.Admin)

	if c := call(t, "POST", adm+"/admin/namespaces", admin, `{"name":"shop"}`); c != 201 && c != 200 {
		t.Fatalf("create namespace: %d", c)
	}
	req, _ := http.NewRequest("POST", adm+"/admin/namespaces/shop/tokens", strings.NewReader(`{"description":"ci"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tokBody struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&tokBody)
	resp.Body.Close()
	nsTok := tokBody.Token
	if nsTok == "" {
		t.Fatal("no token created")
	}
	h := sha256.Sum256([]byte(nsTok))
	nsID := "token:" + hex.EncodeToString(h[:])[:12]

	steps := []struct {
		method, url, auth, body string
		hdr                     []string
		action, actor           string
		want                    int
	}{
		{"PUT", main + "/v1/ns/shop/queues/orders", nsTok, `{"default_tries":3}`, nil, "queue.configure", nsID, 0},
		{"POST", main + "/v1/ns/shop/queues/orders/pause", nsTok, "", nil, "queue.pause", nsID, 0},
		{"POST", main + "/v1/ns/shop/queues/orders/resume", admin, "", nil, "queue.resume", "admin", 0},
		{"POST", main + "/v1/ns/shop/queues/orders/purge", nsTok, "", nil, "queue.purge", nsID, 0},
		{"DELETE", main + "/v1/ns/shop/queues/orders/dead", nsTok, "", nil, "queue.purge_dead", nsID, 0},
		{"DELETE", main + "/v1/ns/shop/queues/orders", nsTok, "", nil, "queue.delete", nsID, 0},
		{"DELETE", main + "/api/shop/other", "", "", []string{"X-Token", nsTok}, "queue.purge", nsID, 0},
		{"PUT", adm + "/ui/api/v1/ns/shop/queues/viaui", admin, `{"default_tries":2}`, nil, "queue.configure", "admin", 0}, // from the dashboard
		{"PUT", adm + "/admin/namespaces/shop", admin, `{"auto_create_queues":true}`, nil, "namespace.configure", "admin", 0},
		{"POST", adm + "/admin/disconnect", admin, `{"user":"42"}`, nil, "realtime.disconnect", "admin", 0},
		{"POST", adm + "/token/shop?description=lm&token=lmstfy-secret-value-0123456789abcdef", admin, "", nil, "token.create", "admin", 0},
		{"PUT", main + "/v1/ns/shop/queues/x", "wrong-token-0123456789abcdef0123", `{}`, nil, "queue.configure", "unknown:", 401},
		{"POST", adm + "/admin/namespaces", nsTok, `{"name":"evil"}`, nil, "namespace.create", nsID, 403},
		{"DELETE", adm + "/admin/namespaces/shop/tokens/" + nsTok, admin, "", nil, "token.revoke", "admin", 0},
	}
	for i, st := range steps {
		before := len(auditLines(t, &auditBuf))
		code := call(t, st.method, st.url, st.auth, st.body, st.hdr...)
		if st.want != 0 && code != st.want {
			t.Fatalf("step %d %s: status %d, want %d", i, st.action, code, st.want)
		}
		if st.want == 0 && code >= 400 {
			t.Fatalf("step %d %s: status %d", i, st.action, code)
		}
		lines := auditLines(t, &auditBuf)
		if len(lines) != before+1 {
			t.Fatalf("step %d %s: %d audit lines, want exactly one", i, st.action, len(lines)-before)
		}
		l := lines[len(lines)-1]
		if l["action"] != st.action || !strings.HasPrefix(l["actor"].(string), st.actor) || int(l["status"].(float64)) != code {
			t.Fatalf("step %d: audit line %v, want action %s actor %s status %d", i, l, st.action, st.actor, code)
		}
		if (code >= 400) != (l["result"] == "refused") {
			t.Fatalf("step %d: result %v for status %d", i, l["result"], code)
		}
		if l["time"] == nil || l["namespace"] == nil && !strings.Contains(st.url, "/disconnect") && !strings.HasSuffix(st.url, "/admin/namespaces") {
			t.Fatalf("step %d: audit line without time or target: %v", i, l)
		}
	}
	last := auditLines(t, &auditBuf)
	if got := last[len(last)-1]["token"]; got != nsID[len("token:"):] {
		t.Fatalf("revoked token logged as %v, want its id %s", got, nsID[len("token:"):])
	}
	if d := last[11]["detail"]; d != `{"user":"42"}` {
		t.Fatalf("disconnect detail %v", d)
	}
	// reads are not changes
	before := len(last)
	call(t, "GET", adm+"/admin/namespaces", admin, "")
	call(t, "GET", main+"/v1/ns/default/queues/q", "", "")
	if n := len(auditLines(t, &auditBuf)); n != before {
		t.Fatalf("reads were audited: %d new lines", n-before)
	}
	all := logBuf.String() + auditBuf.String()
	for _, secret := range []string{admin, nsTok, "lmstfy-secret-value-0123456789abcdef", "wrong-token-0123456789abcdef0123"} {
		if strings.Contains(all, secret) {
			t.Fatalf("a secret reached the log: %s", secret)
		}
	}
}

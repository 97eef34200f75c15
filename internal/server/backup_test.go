package server_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/server"
)

// TestBackupRoute: POST /admin/backup needs the admin token and streams a
// backup that ReceiveBackup accepts.
func TestBackupRoute(t *testing.T) {
	const admin = "admin-token-for-the-backup-test-0123456789"
	cfg := testConfig(t)
	cfg.AdminToken = admin
	s := start(t, cfg)
	ctx := context.Background()
	for range 20 {
		if _, err := s.Broker().Put(ctx, "default", "q", engine.PutRequest{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	nsTok, err := s.Broker().CreateToken(ctx, "default", "t")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + s.Addr(server.Admin) + "/admin/backup"
	for tok, want := range map[string]int{"": 401, nsTok: 403, "not-a-token-0123456789abcdef012": 401} {
		if got := call(t, "POST", url, tok, ""); got != want {
			t.Errorf("backup with token %q: %d, want %d", tok, got, want)
		}
	}
	if got := call(t, "GET", url, admin, ""); got != 405 && got != 404 {
		t.Errorf("GET backup: %d", got)
	}
	req, _ := http.NewRequest("POST", url, nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" || resp.Header.Get("X-Chronoq-Backup-Jobs") != "20" {
		t.Fatalf("backup: %d %v", resp.StatusCode, resp.Header)
	}
	m, err := broker.ReceiveBackup(resp.Body, filepath.Join(t.TempDir(), "b"))
	if err != nil || m.Jobs != 20 {
		t.Fatalf("receive: %v %+v", err, m)
	}
}

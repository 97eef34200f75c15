//go:build unix

package server_test

import (
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/server/servertest"
)

// A soft open-file limit below what the connection caps allow is raised at
// start (the hard limit permitting) and the log says so: otherwise the
// 1001st connection fails with "too many open files" long before the cap.
func TestStartRaisesTheOpenFileLimitForTheConnectionCap(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Skip("no RLIMIT_NOFILE:", err)
	}
	const maxConns = 2000
	need := uint64(3*maxConns + 512) // three listeners at the cap, headroom
	if orig.Max < need {
		t.Skipf("hard open-file limit %d is below the %d this test raises to", orig.Max, need)
	}
	low := syscall.Rlimit{Cur: 1024, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip("cannot lower the open-file limit:", err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })

	var log syncBuf
	cfg := servertest.Config(t)
	cfg.MaxConnections = maxConns
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	servertest.Start(t, cfg, 5*time.Second)

	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != need || now.Max != orig.Max {
		t.Fatalf("open-file limit %d/%d after start, want %d/%d", now.Cur, now.Max, need, orig.Max)
	}
	if s := log.String(); !strings.Contains(s, "raised the open-file limit") || !strings.Contains(s, "from=1024 to=6512") {
		t.Fatalf("the log does not report the raise:\n%s", s)
	}
}

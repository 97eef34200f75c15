package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
)

// TestCLIBinary runs the built chronoq binary's client verbs against a real
// server and checks their output and exit codes. CHRONOQ_TEST_BIN names a
// prebuilt binary; otherwise this package is built. It is skipped when the
// binary does not build or does not dispatch the client verbs.
func TestCLIBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server")
	}
	bin := os.Getenv("CHRONOQ_TEST_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "chronoq")
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = "/usr/local/go/bin/go"
		}
		if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Skipf("chronoq does not build: %v\n%s", err, out)
		}
	}
	if out, err := exec.Command(bin, "stats", "--help").CombinedOutput(); err != nil {
		first, _, _ := strings.Cut(string(out), "\n")
		t.Skipf("the binary does not run the client verbs yet (%v): %s", err, first)
	}

	httpAddr, adminAddr := testbin.FreeAddr(t), testbin.FreeAddr(t)
	srv := exec.Command(bin, "serve", "--data", t.TempDir(), "--http", httpAddr, "--admin", adminAddr, "--beanstalk", "")
	var log testbin.Output
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = srv.Process.Kill()
			<-exited
			t.Error("server still running 10s after SIGTERM")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := http.Get("http://" + httpAddr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		select {
		case <-exited:
			t.Fatal("server exited before answering /healthz")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not healthy within 15s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// run executes one CLI command and returns stdout, stderr and the exit
	// code.
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "CHRONOQ_URL=http://"+httpAddr, "CHRONOQ_ADMIN_URL=http://"+adminAddr,
			"CHRONOQ_TOKEN=", "CHRONOQ_NS=")
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("chronoq %v: %v", args, err)
		}
		return out.String(), errb.String(), code
	}
	ok := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := run(stdin, args...)
		if code != 0 {
			t.Fatalf("chronoq %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}

	id := strings.TrimSpace(ok("", "put", "emails", `{"to":"a@b.c"}`, "--tag", "user_id=42"))
	if len(id) != 26 {
		t.Errorf("put printed %q, want a ULID", id)
	}
	binID := strings.TrimSpace(ok("hello", "put", "emails", "-"))

	out := ok("", "stats")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "QUEUE ") || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "emails active 2 0 0 0 0 0 ") {
		t.Errorf("stats:\n%s", out)
	}

	var taken struct {
		Jobs []struct{ ID, Receipt, Queue string }
	}
	if err := json.Unmarshal([]byte(ok("", "take", "emails", "--json")), &taken); err != nil || len(taken.Jobs) != 1 || taken.Jobs[0].ID != id {
		t.Fatalf("take --json: %v %+v", err, taken)
	}
	_, errOut, code := run("", "ack", "emails", id, "WRONG")
	if code != 1 || !strings.HasPrefix(errOut, "chronoq: conflict: ") {
		t.Errorf("ack with a wrong receipt: exit %d, stderr %q", code, errOut)
	}
	if out := ok("", "ack", "emails", id, taken.Jobs[0].Receipt); out != "deleted\n" {
		t.Errorf("ack: %q", out)
	}
	if _, errOut, code := run("", "peek", "emails", id); code != 1 || !strings.Contains(errOut, "job_not_found") {
		t.Errorf("peek of an acked job: exit %d, %q", code, errOut)
	}

	var listed struct {
		Jobs []struct {
			ID            string `json:"id"`
			PayloadBase64 string `json:"payload_base64"`
		}
	}
	if err := json.Unmarshal([]byte(ok("", "list", "emails", "--json")), &listed); err != nil ||
		len(listed.Jobs) != 1 || listed.Jobs[0].ID != binID || listed.Jobs[0].PayloadBase64 != "aGVsbG8=" {
		t.Errorf("list --json: %v %+v", err, listed)
	}
	if out := ok("", "cancel", "emails", "--state", "ready"); out != "deleted 1\n" {
		t.Errorf("cancel by state: %q", out)
	}

	ok("", "queue", "create", "reports", "--ttr", "1m", "--tries", "3")
	var q struct {
		Config struct {
			DefaultTTR   string `json:"default_ttr"`
			DefaultTries int    `json:"default_tries"`
		} `json:"config"`
		Paused bool `json:"paused"`
	}
	if err := json.Unmarshal([]byte(ok("", "queue", "pause", "reports", "--json")), &q); err != nil ||
		q.Config.DefaultTTR != "1m0s" || q.Config.DefaultTries != 3 || !q.Paused {
		t.Errorf("queue pause --json: %v %+v", err, q)
	}

	ok("", "ns", "create", "billing")
	if out := ok("", "ns", "list"); !strings.Contains(out, "billing") {
		t.Errorf("ns list:\n%s", out)
	}

	if _, errOut, code := run("", "peek", "emails"); code != 1 || !strings.Contains(errOut, "usage: chronoq peek") {
		t.Errorf("peek without an id: exit %d, %q", code, errOut)
	}
	if out, _, code := run("", "put", "--help"); code != 0 || !strings.Contains(out, "Example:") {
		t.Errorf("put --help: exit %d\n%s", code, out)
	}
}

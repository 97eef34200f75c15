package beanstalk_test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// `chronoq beanstalkd` as a drop-in for the beanstalkd binary: the real
// executable, started with beanstalkd's flags.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func chronoqBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binPath = os.Getenv("CHRONOQ_BIN"); binPath != "" {
			return // a binary built elsewhere
		}
		dir, err := os.MkdirTemp("", "chronoq-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "chronoq")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/chronoq/chronoq/cmd/chronoq").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("building chronoq: %v", buildErr)
	}
	out, _ := exec.Command(binPath, "beanstalkd", "-v").CombinedOutput()
	if strings.Contains(string(out), "unknown command") {
		t.Skip("the beanstalkd verb is not wired into cmd/chronoq/main.go yet")
	}
	return binPath
}

// dropin runs `chronoq beanstalkd args...` on a free port and answers the
// process, its address and how long it took to accept a connection.
func dropin(t *testing.T, env []string, args ...string) (*exec.Cmd, string, time.Duration) {
	t.Helper()
	bin := chronoqBinary(t)
	addr := net.JoinHostPort("127.0.0.1", freePort(t))
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, append([]string{"beanstalkd", "-l", "127.0.0.1", "-p", port}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return cmd, addr, time.Since(start)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("chronoq beanstalkd did not listen: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func stopped(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

func TestDropIn(t *testing.T) {
	t.Parallel()
	// Client libraries' test harnesses start beanstalkd and give it about
	// 100ms to listen. The best of two starts must make it (one may be
	// slowed by whatever else the machine runs).
	first, _, took1 := dropin(t, nil, "-b", t.TempDir())
	stopped(t, first)
	data := t.TempDir()
	cmd, addr, took := dropin(t, nil, "-b", data, "-z", "10")
	t.Logf("listening %v and %v after start", took1, took)
	if min(took, took1) > 100*time.Millisecond {
		t.Errorf("took %v to listen, want at most 100ms", min(took, took1))
	}
	s := &target{t: t, name: "chronoq beanstalkd", addr: addr, version: "1.13"}
	c := s.dial()
	id := c.put(5, 0, 60, "kept")
	if f := c.statsJob(id)["file"]; f == "0" {
		t.Errorf("stats-job file %q with -b, want the log segment's number", f)
	}
	c.send("put 0 0 1 11\r\n0123456789A\r\n")
	c.expect("JOB_TOO_BIG\r\n")
	cmd.Process.Signal(syscall.SIGUSR1)
	time.Sleep(100 * time.Millisecond)
	c.send("put 0 0 1 1\r\nx\r\n")
	c.expect("DRAINING\r\n")
	stopped(t, cmd)

	// -b keeps jobs across restarts.
	_, addr, _ = dropin(t, nil, "-b", data)
	s.addr = addr
	c = s.dial()
	c.send("peek " + itoa(id) + "\r\n")
	c.expect("FOUND " + itoa(id) + " 4\r\nkept\r\n")
}

// Without -b, data lives in a temporary directory removed at exit.
func TestDropInNoBinlog(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cmd, addr, _ := dropin(t, []string{"TMPDIR=" + tmp})
	s := &target{t: t, name: "chronoq beanstalkd", addr: addr, version: "1.13"}
	c := s.dial()
	id := c.put(0, 0, 1, "x")
	if f := c.statsJob(id)["file"]; f != "0" {
		t.Errorf("stats-job file %q without -b, want 0 (as beanstalkd)", f)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
		t.Errorf("want one temporary data directory, got %v", entries)
	}
	stopped(t, cmd)
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("temporary data left behind: %v", entries)
	}
}

func TestDropInFlags(t *testing.T) {
	t.Parallel()
	bin := chronoqBinary(t)
	out, err := exec.Command(bin, "beanstalkd", "-v").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "beanstalkd 1.13") {
		t.Errorf("-v: %q %v", out, err)
	}
	if out, err := exec.Command(bin, "beanstalkd", "-h").CombinedOutput(); err != nil || !strings.Contains(string(out), "-f MS") {
		t.Errorf("-h: %q %v", out, err)
	}
	for _, bad := range [][]string{{"-x"}, {"-p"}, {"-z", "0"}, {"-z", "-1"}, {"-z", "1x"}, {"junk"}} {
		err := exec.Command(bin, append([]string{"beanstalkd"}, bad...)...).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 {
			t.Errorf("%v: want exit status 5 (usage), got %v", bad, err)
		}
	}
}

// -I sets an idle timeout (none by default, as beanstalkd).
func TestDropInIdleTimeout(t *testing.T) {
	t.Parallel()
	_, addr, _ := dropin(t, nil, "-I", "1")
	s := &target{t: t, name: "chronoq beanstalkd", addr: addr, version: "1.13"}
	c := s.dial()
	c.send("list-tube-used\r\n")
	c.expect("USING default\r\n")
	c.closed()
	for _, bad := range []string{"-1", "x"} {
		err := exec.Command(chronoqBinary(t), "beanstalkd", "-I", bad).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 {
			t.Errorf("-I %s: want exit status 5 (usage), got %v", bad, err)
		}
	}
}

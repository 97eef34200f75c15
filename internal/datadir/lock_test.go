package datadir

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestLockExcludes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := os.ReadFile(filepath.Join(dir, LockFile))
	if strings.TrimSpace(string(pid)) != fmt.Sprint(os.Getpid()) {
		t.Fatalf("lock file holds %q", pid)
	}
	_, err = Lock(dir)
	want := fmt.Sprintf("data directory %s is in use by another chronoq process (pid %d)", dir, os.Getpid())
	if err == nil || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second Lock: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	release, err = Lock(dir)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	release()
}

// The lock holds against another process, which is the case it exists for.
func TestLockAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("DATADIR_LOCK_CHILD"); dir != "" {
		_, err := Lock(dir)
		if err == nil {
			os.Exit(3)
		}
		fmt.Print(err.Error())
		os.Exit(0)
	}
	dir := t.TempDir()
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "DATADIR_LOCK_CHILD="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v (%s)", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("in use by another chronoq process (pid %d)", os.Getpid())) {
		t.Fatalf("child said %q", out)
	}
}

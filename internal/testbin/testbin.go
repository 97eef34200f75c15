// Package testbin builds the chronoq binary for the tests that run the
// real server process (crash tests kill it, so it cannot be in-process).
package testbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ModuleRoot is the directory of the go.mod above the working directory
// (a test's package directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test directory")
		}
		dir = parent
	}
}

// Build compiles ./cmd/chronoq of the module into dir and answers the
// binary's path.
func Build(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go" // where the machine image has it
	}
	bin := filepath.Join(dir, "chronoq")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/chronoq")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -o %s ./cmd/chronoq (in %s): %v\n%s", bin, root, err, out)
	}
	return bin, nil
}

// FreeAddr is a loopback address with a port nothing listens on now and
// that no earlier call in this process handed out. A port the kernel
// chooses for ":0" comes from the ephemeral range, where it may be chosen
// again at once (a cluster test once got the same port for one node's HTTP
// listener and another node's peer listener) or taken by any outgoing
// connection before the server binds it; so ports are drawn at random
// below that range, checked by listening, and remembered.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// FreePort is FreeAddr's port, for callers without a testing.TB.
func FreePort() (int, error) {
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		if handed[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		handed[port] = true
		return port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

// Output collects a server's stdout and stderr for failure reports; safe
// for the process's writers and the test reading it at once.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

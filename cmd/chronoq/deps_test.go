package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/testbin"
)

// TestServerLinksNoBenchPeers: the peers' client libraries and the plotting
// library belong to cmd/chronoq-bench; the server binary must not link
// them (they once came in through `chronoq bench`).
func TestServerLinksNoBenchPeers(t *testing.T) {
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	cmd := exec.Command(goBin, "list", "-deps", "./cmd/chronoq")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/chronoq: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/nats-io/", "github.com/rabbitmq/", "github.com/redis/", "gonum.org/",
			"github.com/chronoq/chronoq/internal/bench/peers", "github.com/chronoq/chronoq/internal/bench/report"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("chronoq links %s", pkg)
			}
		}
	}
}

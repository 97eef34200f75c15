// Package ops checks the deployment files: the systemd unit and the
// documented configuration example.
package ops

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/testbin"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the unit (with
// ExecStart pointing at a binary that exists here) and checks the options
// the operator relies on.
func TestSystemdUnitVerifies(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(root(t), "deploy/systemd/chronoq.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nUser=chronoq\n", "\nLimitNOFILE=", "\nRestart=on-failure\n", "\nProtectSystem=strict\n",
		"\nNoNewPrivileges=yes\n", "\nExecReload=/bin/kill -HUP $MAINPID\n", "\nReadWritePaths=/var/lib/chronoq\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", strings.TrimSpace(want))
		}
	}
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CHRONOQ_REQUIRE_SYSTEMD") == "1" {
			t.Fatal("systemd-analyze not found and CHRONOQ_REQUIRE_SYSTEMD=1 (Debian package systemd)")
		}
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "chronoq.service")
	os.WriteFile(p, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/chronoq", self)), 0o644)
	out, err := exec.Command(tool, "verify", p).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestConfigExampleDocumentsEveryFlag: every flag of `chronoq serve`
// appears in deploy/chronoq.conf.example, and nothing else does.
func TestConfigExampleDocumentsEveryFlag(t *testing.T) {
	bin, err := testbin.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	help, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
		flags[m[1]] = true
	}
	delete(flags, "config")
	if len(flags) < 20 {
		t.Fatalf("found only %d flags in chronoq serve --help:\n%s", len(flags), help)
	}
	ex, err := os.ReadFile(filepath.Join(root(t), "deploy/chronoq.conf.example"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# ([a-z0-9-]+) =`).FindAllStringSubmatch(string(ex), -1) {
		documented[m[1]] = true
		if !flags[m[1]] {
			t.Errorf("the example documents %q, which chronoq serve does not have", m[1])
		}
	}
	for f := range flags {
		if !documented[f] {
			t.Errorf("flag --%s is not in deploy/chronoq.conf.example", f)
		}
	}
	// uncommented, the example is a valid config file
	var lines []string
	for _, l := range strings.Split(string(ex), "\n") {
		if m := regexp.MustCompile(`^# ([a-z0-9-]+ = .+)$`).FindStringSubmatch(l); m != nil && !strings.HasPrefix(m[1], "data ") {
			lines = append(lines, m[1])
		}
	}
	cfg := filepath.Join(t.TempDir(), "c.conf")
	os.WriteFile(cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	// the TLS files do not exist here: the error must come from there,
	// after every name and value of the file was accepted
	out, err := exec.Command(bin, "serve", "--config", cfg, "--data", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "server.pem") {
		t.Fatalf("serve with the example's values: %v\n%s", err, out)
	}
}

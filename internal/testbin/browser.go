package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Browser is what a headless-Chromium test needs: node, Chromium (Debian's
// package, or $CHRONOQ_CHROMIUM) and playwright-core, installed once in
// test/browser/node_modules (`npm ci` there; .ci/run does it).
type Browser struct {
	Root     string // the module root
	Node     string
	Chromium string
}

// FindBrowser locates node, Chromium and playwright-core. When one is
// missing it skips the test named what, or fails it under
// CHRONOQ_REQUIRE_BROWSER=1 (CI), so that CI can never pass by skipping.
func FindBrowser(t testing.TB, what string) Browser {
	t.Helper()
	required := os.Getenv("CHRONOQ_REQUIRE_BROWSER") == "1"
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if required {
			t.Fatalf("CHRONOQ_REQUIRE_BROWSER=1 but %s", msg)
		}
		t.Skipf("skipping the %s: %s (set CHRONOQ_REQUIRE_BROWSER=1 to make this a failure)", what, msg)
	}
	if testing.Short() && !required {
		t.Skipf("skipping the %s in -short mode", what)
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b := Browser{Root: root}
	if b.Node, err = exec.LookPath("node"); err != nil {
		missing("node is not installed (apt-get install nodejs)")
	}
	if c := os.Getenv("CHRONOQ_CHROMIUM"); c != "" {
		if b.Chromium, err = exec.LookPath(c); err != nil {
			missing("CHRONOQ_CHROMIUM=%s: %v", c, err)
		}
	} else {
		for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				b.Chromium = p
				break
			}
		}
		if b.Chromium == "" {
			missing("chromium is not installed (apt-get install chromium, or set CHRONOQ_CHROMIUM)")
		}
	}
	if _, err := os.Stat(filepath.Join(root, "test", "browser", "node_modules", "playwright-core", "package.json")); err != nil {
		missing("playwright-core is not installed (cd test/browser && npm ci)")
	}
	return b
}

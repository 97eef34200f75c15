package server

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

// One P would let every fdatasync stop the whole server (procs.go): the
// server raises it to two and says so, unless the operator set GOMAXPROCS.
func TestRaiseProcs(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	for _, tc := range []struct {
		name      string
		procs     int
		env       string
		want      int
		logsRaise bool
		warns     bool
	}{
		{"one P", 1, "", minProcs, true, false},
		{"enough", 3, "", 3, false, false},
		{"the operator's choice", 1, "1", 1, false, true},
		{"the operator's choice of more", 4, "4", 4, false, false},
	} {
		runtime.GOMAXPROCS(tc.procs)
		var buf bytes.Buffer
		raiseProcs(slog.New(slog.NewTextHandler(&buf, nil)), func(k string) string {
			if k == "GOMAXPROCS" {
				return tc.env
			}
			return ""
		})
		if got := runtime.GOMAXPROCS(0); got != tc.want {
			t.Errorf("%s: GOMAXPROCS %d, want %d", tc.name, got, tc.want)
		}
		if logged := strings.Contains(buf.String(), "raised GOMAXPROCS"); logged != tc.logsRaise {
			t.Errorf("%s: log %q, want a line about raising it: %v", tc.name, buf.String(), tc.logsRaise)
		}
		if warned := strings.Contains(buf.String(), "level=WARN"); warned != tc.warns {
			t.Errorf("%s: log %q, want a warning: %v", tc.name, buf.String(), tc.warns)
		}
	}
}

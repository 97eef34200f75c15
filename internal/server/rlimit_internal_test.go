package server

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// The limit is raised only as far as the hard limit; a hard limit below
// the need, or a failing set, is a warning and the server still starts.
func TestRaiseFileLimitCases(t *testing.T) {
	cases := []struct {
		name             string
		need, soft, hard uint64
		setErr           error
		wantSoft         uint64
		wantLog          []string
	}{
		{"already enough", 3512, 20000, 20000, nil, 20000, nil},
		{"raised to the need", 3512, 1024, 20000, nil, 3512, []string{"raised the open-file limit", "to=3512"}},
		{"capped by the hard limit", 30512, 1024, 4096, nil, 4096, []string{"to=4096", "WARN", "needed=30512"}},
		{"no cap: the hard limit", 0, 1024, 4096, nil, 4096, []string{"to=4096"}},
		{"set refused", 3512, 1024, 20000, errors.New("EPERM"), 1024, []string{"raising the open-file limit failed", "WARN", "limit=1024"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			soft := c.soft
			var buf bytes.Buffer
			raiseFileLimit(slog.New(slog.NewTextHandler(&buf, nil)), c.need, fileLimit{
				get: func() (uint64, uint64, error) { return soft, c.hard, nil },
				set: func(s, h uint64) error {
					if h != c.hard {
						t.Errorf("hard limit set to %d, want it kept at %d", h, c.hard)
					}
					if c.setErr != nil {
						return c.setErr
					}
					soft = s
					return nil
				},
			})
			if soft != c.wantSoft {
				t.Errorf("soft limit %d, want %d", soft, c.wantSoft)
			}
			for _, w := range c.wantLog {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, buf.String())
				}
			}
			if c.wantLog == nil && buf.Len() > 0 {
				t.Errorf("nothing to do, yet logged:\n%s", buf.String())
			}
		})
	}
}

func TestFilesNeeded(t *testing.T) {
	cfg := Default()
	if got := filesNeeded(cfg); got != 3*10000+fileHeadroom {
		t.Errorf("default config needs %d, want %d", got, 3*10000+fileHeadroom)
	}
	cfg.AdminAddr = ""
	if got := filesNeeded(cfg); got != 2*10000+fileHeadroom {
		t.Errorf("two listeners need %d, want %d", got, 2*10000+fileHeadroom)
	}
	cfg.MaxConnections = 0
	if got := filesNeeded(cfg); got != 0 {
		t.Errorf("no cap needs %d, want 0 (the hard limit)", got)
	}
}

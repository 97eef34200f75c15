package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/server"
)

// --far-horizon: below a second (bucket windows of a few hundred
// milliseconds) or negative is refused with the flag's value in the error,
// before anything is opened.
func TestFarHorizonBounds(t *testing.T) {
	for _, h := range []time.Duration{-time.Second, 500 * time.Millisecond} {
		cfg := testConfig(t)
		cfg.FarHorizon = h
		s, err := server.New(cfg)
		if err == nil {
			s.Shutdown(t.Context())
			t.Fatalf("far horizon %s accepted", h)
		}
		if !strings.Contains(err.Error(), "far horizon "+h.String()) {
			t.Fatalf("far horizon %s: %v", h, err)
		}
	}
}

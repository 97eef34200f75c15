package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFarJobsSurviveKill runs the real binary with a small far horizon
// (delayed jobs due more than 2 s ahead go to bucket files on disk) under
// puts, cancels and updates that move jobs across the horizon both ways,
// kills it with SIGKILL at random moments, and checks after every restart
// that every acknowledged job is there with its payload and activation
// time, that no acknowledged cancel is undone, and at the end that jobs
// which came back from buckets activate when due.
func TestFarJobsSurviveKill(t *testing.T) {
	t.Parallel()
	seed := crashSeed(t)
	t.Logf("seed %d (CHRONOQ_CRASH_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 77))
	dir := t.TempDir()
	args := []string{"--sync", "always", "--far-horizon", "2s"}
	const q = "far"

	type job struct {
		at      string // activate_at as the server answered it
		payload string
	}
	var (
		mu        sync.Mutex
		live      = map[string]job{}
		cancelled = map[string]bool{}
		next      int
	)
	verify := func(s *server, when string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for id, j := range live {
			st, m, raw := s.do("GET", jobp(q, id), nil)
			if st != 200 || jstr(m, "payload") != j.payload || jstr(m, "activate_at") != j.at {
				t.Fatalf("%s: job %s (due %s): status %d %s", when, id, j.at, st, trunc(raw))
			}
		}
		for id := range cancelled {
			if st, _, raw := s.do("GET", jobp(q, id), nil); st != 404 {
				t.Fatalf("%s: cancelled job %s is back: %d %s", when, id, st, trunc(raw))
			}
		}
	}
	delay := func(r *rand.Rand) string {
		if r.IntN(2) == 0 {
			return fmt.Sprintf("%dms", 3000+r.IntN(4000)) // far now, back in memory within the test
		}
		return fmt.Sprintf("%dm", 10+r.IntN(600))
	}
	// each worker changes only its own jobs, so answers to one job's
	// changes arrive in the order the server applied them
	load := func(s *server, stop <-chan struct{}, r *rand.Rand, w int) {
		prefix := fmt.Sprintf("w%d-", w)
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			var pick string
			for id := range live {
				if strings.HasPrefix(id, prefix) {
					pick = id
					break
				}
			}
			id := fmt.Sprintf("%sj%d", prefix, next)
			next++
			mu.Unlock()
			switch k := r.IntN(10); {
			case k < 6 || pick == "":
				payload := "payload " + id
				st, m, _ := s.do("POST", jobsp(q), map[string]any{"id": id, "payload": payload, "delay": delay(r)})
				if st == 201 {
					mu.Lock()
					live[id] = job{at: jstr(m, "activate_at"), payload: payload}
					mu.Unlock()
				}
			case k < 8:
				st, _, _ := s.do("DELETE", jobp(q, pick), nil)
				mu.Lock()
				if st == 204 {
					delete(live, pick)
					cancelled[pick] = true
				} else if st == 0 || st >= 500 {
					delete(live, pick) // unknown outcome: no longer checked
				}
				mu.Unlock()
			default:
				st, m, _ := s.do("PATCH", jobp(q, pick), map[string]any{"delay": delay(r)})
				mu.Lock()
				if st == 200 {
					j := live[pick]
					j.at = jstr(m, "activate_at")
					live[pick] = j
				} else if st == 0 || st >= 500 {
					delete(live, pick)
				}
				mu.Unlock()
			}
		}
	}
	for cycle := 0; cycle < 5; cycle++ {
		s := startServer(t, dir, args...)
		s.waitReady()
		verify(s, fmt.Sprintf("after restart %d", cycle))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			r := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
			go func() { defer wg.Done(); load(s.quiet(), stop, r, w) }()
		}
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		s.kill()
		close(stop)
		waitGroupTimeout(t, &wg, 30*time.Second)
	}
	s := startServer(t, dir, args...)
	s.waitReady()
	verify(s, "final restart")
	// the jobs due within seconds came back from their buckets: they
	// activate, with the payload they were put with
	mu.Lock()
	var latest time.Time
	short := map[string]job{}
	for id, j := range live {
		at, err := time.Parse(time.RFC3339Nano, j.at)
		if err != nil {
			t.Fatalf("activate_at %q: %v", j.at, err)
		}
		if time.Until(at) < time.Minute {
			short[id] = j
			latest = maxTime(latest, at)
		}
	}
	mu.Unlock()
	if len(short) == 0 {
		t.Fatal("no job due within seconds survived: the test checked nothing about activation")
	}
	time.Sleep(time.Until(latest) + 500*time.Millisecond)
	for id, j := range short {
		m, _ := s.expect(200, "GET", jobp(q, id), nil)
		if jstr(m, "state") != "ready" || jstr(m, "payload") != j.payload {
			t.Fatalf("job %s due %s: %v", id, j.at, m)
		}
	}
	t.Logf("%d jobs checked, %d activated after coming back from buckets, %d cancels held", len(live), len(short), len(cancelled))
	s.stop()
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

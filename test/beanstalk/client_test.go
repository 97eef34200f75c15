package beanstalk_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	bs "github.com/beanstalkd/go-beanstalk"
)

// Client-level tests: github.com/beanstalkd/go-beanstalk, unchanged,
// against both servers.

func dialClient(t *testing.T, s *target) *bs.Conn {
	t.Helper()
	c, err := bs.Dial("tcp", s.addr)
	if err != nil {
		t.Fatalf("%s: dial: %v", s.name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func must[T any](t *testing.T, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

func TestClientLifecycle(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := dialClient(t, s)
		tube := bs.NewTube(c, "work")
		ts := bs.NewTubeSet(c, "work")
		id := must[uint64](t, "put")(tube.Put([]byte("hello"), 10, 0, 5*time.Second))

		rid, body, err := ts.Reserve(time.Second)
		if err != nil || rid != id || string(body) != "hello" {
			t.Fatalf("%s: reserve: %d %q %v", s.name, rid, body, err)
		}
		st := must[map[string]string](t, "stats-job")(c.StatsJob(id))
		if st["state"] != "reserved" || st["tube"] != s.q("work") || st["pri"] != "10" || st["ttr"] != "5" {
			t.Errorf("%s: stats-job %v", s.name, st)
		}
		if err := c.Touch(id); err != nil {
			t.Errorf("%s: touch: %v", s.name, err)
		}
		if err := c.Release(id, 20, 0); err != nil {
			t.Fatalf("%s: release: %v", s.name, err)
		}
		rid, _, _ = ts.Reserve(time.Second)
		if err := c.Bury(rid, 30); err != nil {
			t.Fatalf("%s: bury: %v", s.name, err)
		}
		if pid, body, err := tube.PeekBuried(); err != nil || pid != id || string(body) != "hello" {
			t.Errorf("%s: peek-buried: %d %q %v", s.name, pid, body, err)
		}
		if n, err := tube.Kick(100); err != nil || n != 1 {
			t.Errorf("%s: kick: %d %v", s.name, n, err)
		}
		if pid, _, err := tube.PeekReady(); err != nil || pid != id {
			t.Errorf("%s: peek-ready: %d %v", s.name, pid, err)
		}
		if body, err := c.Peek(id); err != nil || string(body) != "hello" {
			t.Errorf("%s: peek: %q %v", s.name, body, err)
		}
		st = must[map[string]string](t, "stats-job")(c.StatsJob(id))
		if st["pri"] != "30" || st["reserves"] != "2" || st["releases"] != "1" || st["buries"] != "1" || st["kicks"] != "1" {
			t.Errorf("%s: counters %v", s.name, st)
		}
		if err := c.Delete(id); err != nil {
			t.Fatalf("%s: delete: %v", s.name, err)
		}
		if err := c.Delete(id); !errors.Is(err, bs.ErrNotFound) {
			t.Errorf("%s: second delete: %v", s.name, err)
		}
		if _, _, err := ts.Reserve(0); !errors.Is(err, bs.ErrTimeout) {
			t.Errorf("%s: empty reserve: %v", s.name, err)
		}
	})
}

func TestClientDelayedAndPause(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := dialClient(t, s)
		tube := bs.NewTube(c, "later")
		id := must[uint64](t, "put")(tube.Put([]byte("d"), 0, time.Hour, time.Minute))
		if pid, _, err := tube.PeekDelayed(); err != nil || pid != id {
			t.Errorf("%s: peek-delayed: %d %v", s.name, pid, err)
		}
		if err := c.KickJob(id); err != nil {
			t.Errorf("%s: kick-job: %v", s.name, err)
		}
		if err := tube.Pause(time.Hour); err != nil {
			t.Fatalf("%s: pause: %v", s.name, err)
		}
		st := must[map[string]string](t, "stats-tube")(tube.Stats())
		if st["pause"] != "3600" || st["current-jobs-ready"] != "1" || st["name"] != s.q("later") {
			t.Errorf("%s: stats-tube %v", s.name, st)
		}
		// A paused tube hands out nothing, but reserve-job still works.
		ts := bs.NewTubeSet(c, "later")
		if _, _, err := ts.Reserve(0); !errors.Is(err, bs.ErrTimeout) {
			t.Errorf("%s: reserve on a paused tube: %v", s.name, err)
		}
		if body, err := c.ReserveJob(id); err != nil || string(body) != "d" {
			t.Errorf("%s: reserve-job: %q %v", s.name, body, err)
		}
		tubes := must[[]string](t, "list-tubes")(c.ListTubes())
		if fmt.Sprint(tubes) != "[default later]" {
			t.Errorf("%s: list-tubes %v", s.name, tubes)
		}
		stats := must[map[string]string](t, "stats")(c.Stats())
		if stats["current-jobs-reserved"] != "1" || stats["cmd-pause-tube"] != "1" {
			t.Errorf("%s: stats %v", s.name, stats)
		}
	})
}

// Many producers and consumers: every job is delivered exactly once.
func TestClientConcurrent(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		const producers, consumers, perProducer = 4, 4, 50
		var wg sync.WaitGroup
		for p := 0; p < producers; p++ {
			c := dialClient(t, s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				tube := bs.NewTube(c, "many")
				for i := 0; i < perProducer; i++ {
					if _, err := tube.Put([]byte(fmt.Sprintf("%d-%d", p, i)), uint32(i%3), 0, 10*time.Second); err != nil {
						t.Errorf("put: %v", err)
						return
					}
				}
			}()
		}
		var mu sync.Mutex
		seen := map[string]int{}
		for k := 0; k < consumers; k++ {
			c := dialClient(t, s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ts := bs.NewTubeSet(c, "many")
				for {
					id, body, err := ts.Reserve(time.Second)
					if errors.Is(err, bs.ErrTimeout) {
						return
					}
					if err != nil {
						t.Errorf("reserve: %v", err)
						return
					}
					mu.Lock()
					seen[string(body)]++
					mu.Unlock()
					if err := c.Delete(id); err != nil {
						t.Errorf("delete %d: %v", id, err)
					}
				}
			}()
		}
		wg.Wait()
		if len(seen) != producers*perProducer {
			t.Errorf("%s: %d distinct jobs delivered, want %d", s.name, len(seen), producers*perProducer)
		}
		for b, n := range seen {
			if n != 1 {
				t.Errorf("%s: job %s delivered %d times", s.name, b, n)
			}
		}
	})
}

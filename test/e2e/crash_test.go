package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The product's core promise (docs/architecture.md, "The loop"): with sync always, a put
// answered 201/200 survives a crash, and a job whose ack was answered 200
// never comes back. Requests in flight when the process dies have an
// unknown outcome: they are counted, never asserted on, until a restart
// shows what happened to them — from then on that outcome must hold too.

const (
	crashQueue     = "crash"
	crashProducers = 8
	crashConsumers = 4
)

const (
	phaseRun   = 0 // every failure is a violation
	phaseDrain = 1 // shutting down: refused requests and 503s are expected
	phaseStop  = 2 // workers finish their current request and return
)

type crashStats struct {
	putOK, putUnknown, ackOK, ackUnknown, ackRejected, takes int
}

type crashState struct {
	mu         sync.Mutex
	payload    map[string]string // every job id ever sent → its payload text
	putOK      map[string]bool   // put answered 201/200 (or seen after a restart)
	putUnknown map[string]bool   // put sent, no answer
	putLost    map[string]bool   // unknown put found absent after a restart: must never appear
	acked      map[string]bool   // ack answered 200 (or unknown ack found applied): must be gone
	ackUnknown map[string]bool   // ack sent, no answer
	cyclePut   []string          // puts answered during the current cycle
	cycleAcked []string          // acks answered during the current cycle
	next       [crashProducers]int
	violations []string
	stats      crashStats
}

func newCrashState() *crashState {
	return &crashState{
		payload: map[string]string{}, putOK: map[string]bool{}, putUnknown: map[string]bool{},
		putLost: map[string]bool{}, acked: map[string]bool{}, ackUnknown: map[string]bool{},
	}
}

func (cs *crashState) violate(format string, args ...any) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.violations = append(cs.violations, fmt.Sprintf(format, args...))
}

// report moves the violations collected by the load goroutines to t.
func (cs *crashState) report(t *testing.T) {
	t.Helper()
	cs.mu.Lock()
	v := cs.violations
	cs.violations = nil
	cs.mu.Unlock()
	for i, m := range v {
		if i == 30 {
			t.Errorf("... and %d more violations", len(v)-30)
			break
		}
		t.Error(m)
	}
}

// load runs producers and consumers against s until phase reaches
// phaseStop; the returned WaitGroup is done when all of them returned.
func (cs *crashState) load(s *server, cycle int, phase *atomic.Int32, rng *rand.Rand) *sync.WaitGroup {
	client := newClient(10 * time.Second)
	var wg sync.WaitGroup
	pads := make([]int, crashProducers)
	for i := range pads {
		pads[i] = rng.IntN(200)
	}
	for p := 0; p < crashProducers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			pad := strings.Repeat(string(rune('a'+p)), pads[p])
			for phase.Load() < phaseStop {
				cs.mu.Lock()
				n := cs.next[p]
				cs.next[p]++
				id := fmt.Sprintf("p%d-%d", p, n)
				pl := fmt.Sprintf(`{"p":%d,"n":%d,"c":%d,"pad":"%s","f":1.50}`, p, n, cycle, pad[:n%(len(pad)+1)])
				cs.payload[id] = pl
				cs.mu.Unlock()
				st, raw, err := s.try(client, s.httpAddr, "POST", jobsp(crashQueue), `{"id":"`+id+`","payload":`+pl+`}`)
				cs.mu.Lock()
				if err == nil && (st == 201 || st == 200) {
					cs.putOK[id] = true
					cs.cyclePut = append(cs.cyclePut, id)
					cs.stats.putOK++
				} else {
					cs.putUnknown[id] = true
					cs.stats.putUnknown++
				}
				cs.mu.Unlock()
				if err != nil {
					if phase.Load() == phaseRun {
						cs.violate("put %s failed while the server should be up: %v", id, err)
					}
					return
				}
				if st != 201 && st != 200 && phase.Load() == phaseRun {
					cs.violate("put %s answered %d: %s", id, st, trunc(raw))
					return
				}
			}
		}(p)
	}
	for c := 0; c < crashConsumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for phase.Load() < phaseStop {
				st, raw, err := s.try(client, s.httpAddr, "POST", qp(crashQueue)+"/take", `{"max":10,"wait":"200ms","ttr":"5s"}`)
				if err != nil {
					if phase.Load() == phaseRun {
						cs.violate("take failed while the server should be up: %v", err)
					}
					return
				}
				if st != 200 {
					if phase.Load() == phaseRun {
						cs.violate("take answered %d: %s", st, trunc(raw))
					}
					return
				}
				var a struct {
					Jobs []struct {
						ID      string          `json:"id"`
						Receipt string          `json:"receipt"`
						Payload json.RawMessage `json:"payload"`
					} `json:"jobs"`
				}
				if err := json.Unmarshal(raw, &a); err != nil {
					cs.violate("take answer not JSON: %v: %s", err, trunc(raw))
					return
				}
				cs.mu.Lock()
				cs.stats.takes++
				for _, j := range a.Jobs {
					want, known := cs.payload[j.ID]
					switch {
					case !known:
						cs.violations = append(cs.violations, fmt.Sprintf("take handed out job %s that was never put", j.ID))
					case cs.acked[j.ID]:
						cs.violations = append(cs.violations, fmt.Sprintf("take handed out job %s whose ack was answered 200", j.ID))
					case cs.putLost[j.ID]:
						cs.violations = append(cs.violations, fmt.Sprintf("take handed out job %s that a restart had shown lost", j.ID))
					case string(j.Payload) != want:
						cs.violations = append(cs.violations, fmt.Sprintf("job %s payload %s, put %s", j.ID, j.Payload, want))
					}
				}
				cs.mu.Unlock()
				var awg sync.WaitGroup
				for _, j := range a.Jobs {
					awg.Add(1)
					go func() {
						defer awg.Done()
						st, raw, err := s.try(client, s.httpAddr, "POST", jobActp(crashQueue, j.ID, "ack"), `{"receipt":"`+j.Receipt+`"}`)
						cs.mu.Lock()
						defer cs.mu.Unlock()
						switch {
						case err != nil:
							cs.ackUnknown[j.ID] = true
							cs.stats.ackUnknown++
							if phase.Load() == phaseRun {
								cs.violations = append(cs.violations, fmt.Sprintf("ack %s failed while the server should be up: %v", j.ID, err))
							}
						case st == 200:
							cs.acked[j.ID] = true
							delete(cs.ackUnknown, j.ID)
							cs.cycleAcked = append(cs.cycleAcked, j.ID)
							cs.stats.ackOK++
						case st == 409:
							cs.stats.ackRejected++ // reservation expired: the job stays
						default:
							if phase.Load() == phaseRun {
								cs.violations = append(cs.violations, fmt.Sprintf("ack %s answered %d: %s", j.ID, st, trunc(raw)))
							}
							cs.ackUnknown[j.ID] = true
							cs.stats.ackUnknown++
						}
					}()
				}
				awg.Wait()
			}
		}()
	}
	go func() {
		wg.Wait()
		client.CloseIdleConnections()
	}()
	return &wg
}

// verify checks the invariants on a freshly restarted server and settles
// the outcome of requests that were in flight at the crash.
func (cs *crashState) verify(t *testing.T, s *server, cycle int) (present int) {
	t.Helper()
	client := newClient(30 * time.Second)
	defer client.CloseIdleConnections()

	// Every job of the queue, with its payload text.
	have := map[string]string{}
	cursor := ""
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatalf("cycle %d: listing never ends", cycle)
		}
		path := jobsp(crashQueue) + "?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		st, raw, err := s.try(client, s.httpAddr, "GET", path, nil)
		if err != nil || st != 200 {
			if st == 404 && cycle == 0 {
				break // the queue does not exist yet
			}
			t.Fatalf("cycle %d: list: %d %v %s", cycle, st, err, trunc(raw))
		}
		var a struct {
			Jobs []struct {
				ID      string          `json:"id"`
				Payload json.RawMessage `json:"payload"`
			} `json:"jobs"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("cycle %d: list answer: %v", cycle, err)
		}
		for _, j := range a.Jobs {
			if _, dup := have[j.ID]; dup {
				t.Errorf("cycle %d: job %s listed twice", cycle, j.ID)
			}
			have[j.ID] = string(j.Payload)
		}
		if a.NextCursor == nil {
			break
		}
		cursor = *a.NextCursor
	}

	cs.mu.Lock()
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for id, pl := range have {
		want, known := cs.payload[id]
		switch {
		case !known:
			bad("job %s exists but was never put", id)
		case cs.acked[id]:
			bad("job %s exists after restart although its ack was answered 200", id)
		case cs.putLost[id]:
			bad("job %s came back after a restart had shown it lost", id)
		case pl != want:
			bad("job %s payload after restart %s, put %s", id, pl, want)
		}
	}
	for id := range cs.putOK {
		if cs.acked[id] {
			continue
		}
		_, exists := have[id]
		if cs.ackUnknown[id] {
			if exists {
				delete(cs.ackUnknown, id) // the ack did not happen
			} else {
				delete(cs.ackUnknown, id) // the ack happened
				cs.acked[id] = true
			}
			continue
		}
		if !exists {
			bad("job %s: put answered 201/200, never acked, missing after restart", id)
		}
	}
	for id := range cs.putUnknown {
		_, exists := have[id]
		switch {
		case exists:
			cs.putOK[id] = true // seen after recovery: durable from now on
		case cs.acked[id]:
		case cs.ackUnknown[id]:
			delete(cs.ackUnknown, id)
			cs.acked[id] = true
		default:
			cs.putLost[id] = true
		}
		delete(cs.putUnknown, id)
	}
	for id := range cs.ackUnknown { // acks of jobs whose put is in putOK were settled above
		if _, exists := have[id]; !exists {
			cs.acked[id] = true
		}
		delete(cs.ackUnknown, id)
	}
	// Peek the jobs of this cycle one by one as well.
	var mustExist, mustBeGone []string
	for _, id := range cs.cyclePut {
		if _, ok := have[id]; ok && !cs.acked[id] {
			mustExist = append(mustExist, id)
		}
	}
	mustBeGone = append(mustBeGone, cs.cycleAcked...)
	cs.cyclePut, cs.cycleAcked = nil, nil
	payloads := map[string]string{}
	for _, id := range mustExist {
		payloads[id] = cs.payload[id]
	}
	cs.mu.Unlock()

	type check struct {
		id   string
		gone bool
	}
	work := make(chan check)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				st, raw, err := s.try(client, s.httpAddr, "GET", jobp(crashQueue, c.id), nil)
				var msg string
				switch {
				case err != nil:
					msg = fmt.Sprintf("peek %s: %v", c.id, err)
				case c.gone && st != 404:
					msg = fmt.Sprintf("peek %s: %d, want 404 (its ack was answered 200)", c.id, st)
				case c.gone && !strings.Contains(string(raw), "job_not_found"):
					msg = fmt.Sprintf("peek %s: 404 without job_not_found: %s", c.id, trunc(raw))
				case !c.gone && st != 200:
					msg = fmt.Sprintf("peek %s: %d, want 200 (put answered, never acked)", c.id, st)
				case !c.gone:
					var j struct {
						Payload json.RawMessage `json:"payload"`
					}
					json.Unmarshal(raw, &j)
					if string(j.Payload) != payloads[c.id] {
						msg = fmt.Sprintf("peek %s: payload %s, put %s", c.id, j.Payload, payloads[c.id])
					}
				}
				if msg != "" {
					mu.Lock()
					errs = append(errs, msg)
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range mustExist {
		work <- check{id, false}
	}
	for _, id := range mustBeGone {
		work <- check{id, true}
	}
	close(work)
	wg.Wait()
	sort.Strings(errs)
	for i, e := range errs {
		if i == 30 {
			t.Errorf("cycle %d: ... and %d more", cycle, len(errs)-30)
			break
		}
		t.Errorf("cycle %d: %s", cycle, e)
	}
	return len(have)
}

func crashSeed(t *testing.T) uint64 {
	if v := os.Getenv("CHRONOQ_CRASH_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHRONOQ_CRASH_SEED=%q: %v", v, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// TestCrashUnderLoad SIGKILLs the server (sync always) at a random moment
// under load, restarts it on the same data directory and checks that every
// acknowledged put survived and no acknowledged ack came back; 20 cycles on
// one data directory (CHRONOQ_CRASH_CYCLES=N for more;
// CHRONOQ_CRASH_SEGMENT=BYTES for a log segment size other than the
// default, e.g. 1048576 so that kills also hit segment rolls and the
// background preparation of zero-filled segments).
func TestCrashUnderLoad(t *testing.T) {
	t.Parallel()
	cycles := 20
	budget := 75 * time.Second
	if v := os.Getenv("CHRONOQ_CRASH_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHRONOQ_CRASH_CYCLES=%q", v)
		}
		cycles, budget = n, 0
	}
	args := []string{"--sync", "always"}
	if v := os.Getenv("CHRONOQ_CRASH_SEGMENT"); v != "" {
		// small segments: kills land in rolls and in segment preparation
		args = append(args, "--segment-size", v)
	}
	seed := crashSeed(t)
	t.Logf("seed %d (CHRONOQ_CRASH_SEED to repeat the kill times)", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dir := t.TempDir()
	cs := newCrashState()
	start := time.Now()
	for cycle := 0; cycle < cycles; cycle++ {
		if budget > 0 && time.Since(start) > budget {
			t.Logf("stopping after %d cycles: time budget %v used", cycle, budget)
			break
		}
		t0 := time.Now()
		s := startServer(t, dir, args...)
		s.waitReady()
		up := time.Since(t0)
		present := cs.verify(t, s, cycle)
		cs.report(t)
		if t.Failed() {
			return
		}
		var phase atomic.Int32
		loadFor := time.Duration(300+rng.IntN(1201)) * time.Millisecond
		wg := cs.load(s, cycle, &phase, rng)
		time.Sleep(loadFor)
		phase.Store(phaseStop)
		s.kill()
		waitGroupTimeout(t, wg, 30*time.Second)
		cs.mu.Lock()
		st := cs.stats
		cs.stats = crashStats{}
		cs.mu.Unlock()
		t.Logf("cycle %d: restart+ready %v, %d jobs present after restart; load %v: puts ok %d unknown %d, takes %d, acks ok %d unknown %d rejected %d",
			cycle, up.Round(time.Millisecond), present, loadFor, st.putOK, st.putUnknown, st.takes, st.ackOK, st.ackUnknown, st.ackRejected)
		cs.report(t)
		if t.Failed() {
			return
		}
	}
	s := startServer(t, dir, args...)
	s.waitReady()
	present := cs.verify(t, s, cycles)
	cs.report(t)
	cs.mu.Lock()
	t.Logf("final: %d jobs present, %d puts acknowledged in total, %d acks acknowledged, %d lost unknown puts; %v",
		present, len(cs.putOK), len(cs.acked), len(cs.putLost), time.Since(start).Round(time.Millisecond))
	cs.mu.Unlock()
	s.stop()
}

// TestGracefulUnderLoad sends SIGTERM while producers and consumers are
// busy: the server must exit 0 within 10 s, and after a restart the same
// invariants hold as after a crash.
func TestGracefulUnderLoad(t *testing.T) {
	t.Parallel()
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dir := t.TempDir()
	cs := newCrashState()
	for cycle := 0; cycle < 2; cycle++ {
		s := startServer(t, dir, "--sync", "always")
		s.waitReady()
		cs.verify(t, s, cycle)
		cs.report(t)
		var phase atomic.Int32
		wg := cs.load(s, cycle, &phase, rng)
		time.Sleep(time.Duration(500+rng.IntN(500)) * time.Millisecond)
		phase.Store(phaseDrain)
		type exit struct {
			code   int
			killed bool
		}
		done := make(chan exit, 1)
		go func() {
			code, killed := s.terminate(10 * time.Second)
			done <- exit{code, killed}
		}()
		time.Sleep(200 * time.Millisecond) // keep the load on while it shuts down
		phase.Store(phaseStop)
		e := <-done
		if e.killed {
			t.Errorf("cycle %d: server did not exit within 10s of SIGTERM under load", cycle)
		} else if e.code != 0 {
			t.Errorf("cycle %d: exit code %d after SIGTERM under load, want 0", cycle, e.code)
		}
		waitGroupTimeout(t, wg, 30*time.Second)
		cs.mu.Lock()
		st := cs.stats
		cs.stats = crashStats{}
		cs.mu.Unlock()
		t.Logf("cycle %d: puts ok %d unknown %d, acks ok %d unknown %d", cycle, st.putOK, st.putUnknown, st.ackOK, st.ackUnknown)
		cs.report(t)
	}
	s := startServer(t, dir, "--sync", "always")
	s.waitReady()
	cs.verify(t, s, 2)
	cs.report(t)
	s.stop()
}

func waitGroupTimeout(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("load goroutines did not stop within %v", d)
	}
}

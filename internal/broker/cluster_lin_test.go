package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
)

// The queue model the linearizability check holds chronoq to: one queue,
// jobs of equal priority and no delay, so a take reserves the oldest ready
// job; an ack removes a reserved job. An operation whose outcome is unknown
// (the answer was lost in a failover) may or may not have happened.

type qState struct {
	ready    []string
	reserved []string // sorted
}

func (s qState) key() string {
	return strings.Join(s.ready, ",") + "|" + strings.Join(s.reserved, ",")
}

type linInput struct {
	op string // put, take, ack
	id string // put, ack
}

type linOutput struct {
	unknown bool
	ok      bool   // put, ack: applied; take: got a job
	id      string // take: the job
}

func qStep(st any, in any, out any) []any {
	s, i, o := st.(qState), in.(linInput), out.(linOutput)
	done := func(n qState) []any {
		if o.unknown {
			return []any{s, n}
		}
		return []any{n}
	}
	switch i.op {
	case "put":
		n := qState{ready: append(slices.Clone(s.ready), i.id), reserved: s.reserved}
		if !o.unknown && !o.ok {
			return []any{s}
		}
		return done(n)
	case "take":
		if o.unknown {
			if len(s.ready) == 0 {
				return []any{s}
			}
			return []any{s, reserve(s)}
		}
		if !o.ok {
			if len(s.ready) == 0 {
				return []any{s}
			}
			return nil
		}
		if len(s.ready) == 0 || s.ready[0] != o.id {
			return nil
		}
		return []any{reserve(s)}
	case "ack":
		idx := slices.Index(s.reserved, i.id)
		if !o.unknown && !o.ok {
			if idx >= 0 {
				return nil
			}
			return []any{s}
		}
		if idx < 0 {
			if o.unknown {
				return []any{s}
			}
			return nil
		}
		n := qState{ready: s.ready, reserved: slices.Delete(slices.Clone(s.reserved), idx, idx+1)}
		return done(n)
	}
	return nil
}

func reserve(s qState) qState {
	r := append(slices.Clone(s.reserved), s.ready[0])
	slices.Sort(r)
	return qState{ready: slices.Clone(s.ready[1:]), reserved: r}
}

var queueModel = (&porcupine.NondeterministicModel{
	Init:  func() []any { return []any{qState{}} },
	Step:  qStep,
	Equal: func(a, b any) bool { return a.(qState).key() == b.(qState).key() },
	DescribeOperation: func(in, out any) string {
		return fmt.Sprintf("%s(%s) -> %+v", in.(linInput).op, in.(linInput).id, out)
	},
}).ToModel()

// The model refuses what a queue must never do.
func TestQueueModelRefusesViolations(t *testing.T) {
	op := func(c int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Call: call, Return: ret, Input: in, Output: out}
	}
	ok := []porcupine.Operation{
		op(0, 0, 1, linInput{"put", "a"}, linOutput{ok: true}),
		op(0, 2, 3, linInput{"put", "b"}, linOutput{ok: true}),
		op(1, 4, 5, linInput{"take", ""}, linOutput{ok: true, id: "a"}),
		op(1, 6, 7, linInput{"ack", "a"}, linOutput{ok: true}),
	}
	if !porcupine.CheckOperations(queueModel, ok) {
		t.Fatal("a correct history was refused")
	}
	for name, h := range map[string][]porcupine.Operation{
		"out of order":     {ok[0], ok[1], op(1, 4, 5, linInput{"take", ""}, linOutput{ok: true, id: "b"})},
		"taken twice":      {ok[0], ok[2], op(2, 8, 9, linInput{"take", ""}, linOutput{ok: true, id: "a"})},
		"stale empty take": {ok[0], op(1, 4, 5, linInput{"take", ""}, linOutput{})},
		"acked job back":   {ok[0], ok[2], ok[3], op(1, 8, 9, linInput{"take", ""}, linOutput{ok: true, id: "a"})},
	} {
		if porcupine.CheckOperations(queueModel, h) {
			t.Errorf("%s: a violating history passed", name)
		}
	}
}

// TestClusterLinearizable records concurrent put/take/ack histories against
// three in-process members while members are stopped and restarted and cut
// off (CHRONOQ_LIN_FAULTS times, default 6), and checks them against the
// queue model with porcupine.
func TestClusterLinearizable(t *testing.T) {
	dir := t.TempDir()
	net := &memNet{members: map[uint64]*Broker{}, down: map[uint64]bool{}}
	for id := uint64(1); id <= 3; id++ {
		net.open(t, dir, id)
	}
	defer func() {
		// Close outside the lock: a closing member's loop may be sending.
		net.mu.Lock()
		var bs []*Broker
		for _, b := range net.members {
			bs = append(bs, b)
		}
		net.mu.Unlock()
		for _, b := range bs {
			b.Close()
		}
	}()
	net.leader(t, 0)
	begin := time.Now()
	stamp := func() int64 { return int64(time.Since(begin)) }
	var (
		mu       sync.Mutex
		history  []porcupine.Operation
		held     []engine.Job
		seq      atomic.Int64
		definite atomic.Int64
		unknown  atomic.Int64
	)
	member := func(r *rand.Rand) *Broker {
		net.mu.Lock()
		defer net.mu.Unlock()
		return net.members[uint64(r.IntN(3)+1)]
	}
	const never = int64(1) << 62
	record := func(c int, call int64, in linInput, out linOutput, err error) {
		ret := stamp()
		switch code := engine.CodeOf(err); {
		case err == nil:
			definite.Add(1)
		case code == cluster.CodeNotLeader || code == CodeNoQuorum || err == errClosed ||
			code == engine.CodeUnavailable && strings.Contains(err.Error(), "catching up"):
			return // refused before it ran
		case code == engine.CodeJobNotFound && in.op == "ack":
			out.ok = false
		default:
			out.unknown, ret = true, never
			unknown.Add(1)
		}
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ttr := time.Hour
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				time.Sleep(time.Duration(5+r.IntN(10)) * time.Millisecond)
				b := member(r)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				call := stamp()
				switch k := r.IntN(10); {
				case k < 4:
					id := fmt.Sprintf("j%d", seq.Add(1))
					_, err := b.Put(ctx, "default", "q", engine.PutRequest{ID: id, Payload: []byte(id)})
					record(c, call, linInput{"put", id}, linOutput{ok: err == nil}, err)
				case k < 7:
					jobs, err := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 1, TTR: &ttr}, 0)
					out := linOutput{}
					if err == nil && len(jobs) == 1 {
						out.ok, out.id = true, jobs[0].ID
						mu.Lock()
						held = append(held, jobs[0])
						mu.Unlock()
					}
					record(c, call, linInput{"take", ""}, out, err)
				default:
					mu.Lock()
					if len(held) == 0 {
						mu.Unlock()
						cancel()
						continue
					}
					j := held[0]
					held = held[1:]
					mu.Unlock()
					_, err := b.Ack(ctx, "default", "q", j.ID, engine.AckRequest{Receipt: j.Receipt})
					record(c, call, linInput{"ack", j.ID}, linOutput{ok: err == nil}, err)
				}
				cancel()
			}
		}(c)
	}
	// Faults: stop and restart a member, or cut one off, a few times.
	r := rand.New(rand.NewPCG(99, 1))
	faults := 6
	if n, err := strconv.Atoi(os.Getenv("CHRONOQ_LIN_FAULTS")); err == nil && n > 0 {
		faults = n
	}
	for i := 0; i < faults; i++ {
		time.Sleep(400 * time.Millisecond)
		id := uint64(r.IntN(3) + 1)
		if i%2 == 0 {
			net.mu.Lock()
			b := net.members[id]
			net.down[id] = true
			net.mu.Unlock()
			b.Close()
			time.Sleep(150 * time.Millisecond)
			net.open(t, dir, id)
		} else {
			net.mu.Lock()
			net.down[id] = true
			net.mu.Unlock()
			time.Sleep(400 * time.Millisecond)
			net.mu.Lock()
			net.down[id] = false
			net.mu.Unlock()
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if definite.Load() < 50 {
		t.Fatalf("only %d operations completed: the check would test nothing", definite.Load())
	}
	t.Logf("%d operations recorded, %d definite, %d unknown, in %s", len(history), definite.Load(), unknown.Load(), time.Since(begin).Round(time.Millisecond))
	checkBegan := time.Now()
	res, info := porcupine.CheckOperationsVerbose(queueModel, history, 60*time.Second)
	t.Logf("check took %s", time.Since(checkBegan).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
		t.Logf("%d operations (%d with a definite answer) linearizable", len(history), definite.Load())
	case porcupine.Illegal:
		_ = info
		t.Fatalf("history of %d operations is not linearizable", len(history))
	default:
		t.Logf("linearizability check timed out on %d operations (inconclusive)", len(history))
	}
}

package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

// The reference model: plain maps and sorts, every state derived from
// scratch at each look, deliberately naive so it is obviously right.
type mjob struct {
	id, queue, key    string
	prio              uint32
	at, expire, until int64
	seq               uint64
	phase             phase
	attempt, tries    uint32
	ttr               int64
	receipt           string
}

type model struct {
	jobs map[string]*mjob // by queue/id
	now  int64
	seq  uint64
	far  *fakeFar // jobs the engine handed out (far.go); nil: horizon off
}

func mk(q, id string) string { return q + "/" + id }

// advance processes reservation ends and TTL deadlines in time order.
func (m *model) advance(now int64) {
	for {
		var next *mjob
		var when int64
		isTTL := false
		for _, j := range m.sorted() {
			if j.phase == phaseReserved && j.until <= now && (next == nil || j.until < when) {
				next, when, isTTL = j, j.until, false
			}
		}
		for _, j := range m.sorted() {
			if j.phase == phasePending && j.expire != 0 && j.expire <= now && (next == nil || j.expire < when) {
				next, when, isTTL = j, j.expire, true
			}
		}
		if next == nil {
			break
		}
		switch {
		case isTTL:
			delete(m.jobs, mk(next.queue, next.id))
		case next.expire != 0 && next.expire <= next.until:
			delete(m.jobs, mk(next.queue, next.id))
		case next.tries > 0 && next.attempt >= next.tries:
			next.phase = phaseDead
		default:
			next.phase = phasePending
		}
	}
	m.now = now
}

func (m *model) sorted() []*mjob {
	out := make([]*mjob, 0, len(m.jobs))
	for _, j := range m.jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].seq < out[b].seq })
	return out
}

// state derives a job's fine state (strict key mode).
func (m *model) state(j *mjob) State {
	switch j.phase {
	case phaseReserved:
		return StateReserved
	case phaseDead:
		return StateDead
	}
	if j.at > m.now {
		return StateDelayed
	}
	if j.key == "" {
		return StateReady
	}
	// strict: only the oldest pending/reserved job of the key, and only
	// while nothing of the key is reserved
	var head *mjob
	for _, o := range m.sorted() {
		if o.queue == j.queue && o.key == j.key && (o.phase == phasePending || o.phase == phaseReserved) {
			if head == nil {
				head = o
			}
			if o.phase == phaseReserved {
				return StateBlocked
			}
		}
	}
	if head == j {
		return StateReady
	}
	return StateBlocked
}

func (m *model) ready(q string) []*mjob {
	var out []*mjob
	for _, j := range m.sorted() {
		if j.queue == q && j.phase == phasePending && m.state(j) == StateReady {
			out = append(out, j)
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.prio != y.prio {
			return x.prio < y.prio
		}
		if x.at != y.at {
			return x.at < y.at
		}
		return x.seq < y.seq
	})
	return out
}

func TestModelRandomized(t *testing.T) {
	seeds := 300
	steps := 120
	if testing.Short() {
		seeds = 50
	}
	fmt.Sscan(getenv("CHRONOQ_MODEL_SEEDS"), &seeds)
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, uint64(seed), steps) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	f := newFixture(t)
	m := &model{jobs: map[string]*mjob{}, now: ms(f.now)}
	if seed%2 == 1 {
		// a horizon small enough that puts, updates and time passing move
		// jobs across it both ways
		m.far = &fakeFar{items: map[string][]byte{}, at: map[string]int64{}}
		f.e.SetFarHorizon(farTestHorizon)
	}
	queues := []string{"a", "b"}
	keys := []string{"", "", "k1", "k2"}
	pick := func() *mjob {
		all := m.sorted()
		if len(all) == 0 {
			return nil
		}
		return all[rng.IntN(len(all))]
	}
	var log []string
	shrinks := 0
	// A fuzzy snapshot is taken a few records at a time while the run goes
	// on; snapshot + replay from where it began must equal the live state.
	var snap *SnapshotIter
	var snapEntries [][]byte
	var chunks *SnapshotIter
	var chunkItems [][]byte
	snapFrom := -1
	defer func() {
		if t.Failed() {
			t.Logf("seed %d steps:\n%v", seed, log)
		}
	}()
	for step := 0; step < steps; step++ {
		op := rng.IntN(10)
		switch op {
		case 0, 1, 2: // put
			q := queues[rng.IntN(2)]
			req := PutRequest{Payload: []byte("p"), Priority: u32(uint32(rng.IntN(3))), Key: keys[rng.IntN(len(keys))],
				Tries: u32(uint32(rng.IntN(3))), TTR: dur(time.Duration(1+rng.IntN(3)) * time.Second)}
			delay := time.Duration(rng.IntN(3)) * 500 * time.Millisecond
			if rng.IntN(4) == 0 {
				delay = farTestHorizon + time.Duration(rng.IntN(4))*500*time.Millisecond
			}
			req.Delay = &delay
			if rng.IntN(4) == 0 {
				req.TTL = dur(delay + time.Duration(1+rng.IntN(4))*time.Second)
			}
			if rng.IntN(3) == 0 {
				req.ID = fmt.Sprintf("c%d", rng.IntN(8))
				m.far.bring(t, f, mk(q, req.ID))
			}
			r, err := f.e.Put(f.now, "default", q, req)
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			log = append(log, fmt.Sprintf("put %s %s dup=%v", q, r.ID, r.Duplicate))
			if _, exists := m.jobs[mk(q, req.ID)]; req.ID != "" && exists {
				if !r.Duplicate {
					t.Fatalf("step %d: model says duplicate of %s", step, req.ID)
				}
				continue
			}
			if r.Duplicate {
				t.Fatalf("step %d: unexpected duplicate %s", step, r.ID)
			}
			m.seq++
			j := &mjob{id: r.ID, queue: q, key: req.Key, prio: *req.Priority, at: m.now + delay.Milliseconds(),
				seq: m.seq, phase: phasePending, tries: *req.Tries, ttr: req.TTR.Milliseconds()}
			if req.TTL != nil {
				j.expire = m.now + req.TTL.Milliseconds()
			}
			m.jobs[mk(q, r.ID)] = j
		case 3, 4: // take
			order := slices.Clone(queues)
			if rng.IntN(2) == 0 {
				order[0], order[1] = order[1], order[0]
			}
			max := 1 + rng.IntN(3)
			got, err := f.e.Take(f.now, "default", TakeRequest{Queues: order, Max: max})
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			var want []*mjob
			for _, q := range order {
				r := m.ready(q)
				want = append(want, r[:min(len(r), max-len(want))]...)
			}
			if len(got) != len(want) {
				t.Fatalf("step %d: take got %d jobs, model %d", step, len(got), len(want))
			}
			for i := range got {
				if got[i].ID != want[i].id {
					t.Fatalf("step %d: take[%d] = %s, model %s", step, i, got[i].ID, want[i].id)
				}
				w := want[i]
				w.phase, w.attempt, w.until, w.receipt = phaseReserved, w.attempt+1, m.now+w.ttr, got[i].Receipt
			}
			log = append(log, fmt.Sprintf("take %v → %d", order, len(got)))
		case 5: // ack / nack / bury / touch a reserved job, sometimes with a wrong receipt
			j := pick()
			if j == nil || j.phase != phaseReserved {
				continue
			}
			receipt := j.receipt
			wrong := rng.IntN(6) == 0
			if wrong {
				receipt = "nope"
			}
			var err error
			switch rng.IntN(4) {
			case 0:
				_, err = f.e.Ack(f.now, "default", j.queue, j.id, AckRequest{Receipt: receipt})
				if err == nil {
					delete(m.jobs, mk(j.queue, j.id))
				}
			case 1:
				var st State
				st, err = f.e.Nack(f.now, "default", j.queue, j.id, NackRequest{Receipt: receipt, Delay: dur(time.Duration(rng.IntN(2)) * time.Second)})
				if err == nil {
					m.nack(j, st)
					if _, alive := m.jobs[mk(j.queue, j.id)]; alive && j.phase == phasePending {
						j.at = ms(f.peek(j.queue, j.id).ActivateAt)
					}
				}
			case 2:
				err = f.e.Bury(f.now, "default", j.queue, j.id, BuryRequest{Receipt: receipt})
				if err == nil {
					j.phase = phaseDead
				}
			case 3:
				var until time.Time
				until, err = f.e.Touch(f.now, "default", j.queue, j.id, TouchRequest{Receipt: receipt})
				if err == nil {
					j.until = ms(until)
				}
			}
			if wrong && err == nil || !wrong && err != nil {
				t.Fatalf("step %d: receipt wrong=%v, err=%v", step, wrong, err)
			}
			log = append(log, fmt.Sprintf("settle %s wrong=%v", j.id, wrong))
		case 6: // respawn or cancel
			j := pick()
			if j == nil {
				continue
			}
			if j.phase == phaseDead && rng.IntN(2) == 0 {
				n, _ := f.e.Respawn(f.now, "default", j.queue, RespawnRequest{IDs: []string{j.id}})
				if n != 1 {
					t.Fatalf("respawn %s: %d", j.id, n)
				}
				j.phase, j.attempt, j.expire, j.at = phasePending, 0, 0, max(j.at, m.now)
			} else {
				m.far.bring(t, f, mk(j.queue, j.id))
				err := f.e.Cancel(f.now, "default", j.queue, j.id, "")
				if (err == nil) == (j.phase == phaseReserved) {
					t.Fatalf("step %d: cancel %s in phase %d: %v", step, j.id, j.phase, err)
				}
				if err == nil {
					delete(m.jobs, mk(j.queue, j.id))
				}
			}
			log = append(log, fmt.Sprintf("respawn/cancel %s", j.id))
		case 7: // update the activation time of a pending job, across the horizon either way
			j := pick()
			if j == nil || j.phase != phasePending {
				continue
			}
			m.far.bring(t, f, mk(j.queue, j.id))
			d := []time.Duration{0, 500 * time.Millisecond, farTestHorizon + time.Second, farTestHorizon + 2*time.Second}[rng.IntN(4)]
			if _, err := f.e.Update(f.now, "default", j.queue, j.id, UpdateRequest{Delay: &d}); err != nil {
				t.Fatalf("step %d: update %s: %v", step, j.id, err)
			}
			j.at = m.now + d.Milliseconds()
			log = append(log, fmt.Sprintf("update %s delay=%s", j.id, d))
		default: // time passes
			d := time.Duration(rng.IntN(1500)) * time.Millisecond
			f.tick(d)
			// buckets come back ahead of their window
			m.far.load(t, f)
			log = append(log, fmt.Sprintf("tick %s", d))
		}
		if step == steps/3 {
			snap, snapFrom = f.e.Snapshot(), len(f.sink.bodies)
			chunks = f.e.Snapshot()
		}
		if snap != nil {
			if ent := snap.Next(3); ent != nil {
				snapEntries = append(snapEntries, ent.Encode(nil))
			} else {
				snap = nil
			}
		}
		// the same fuzzy walk as job chunks (snapchunk.go)
		if chunks != nil {
			if item, ok := chunks.NextItem(nil, 3); ok {
				chunkItems = append(chunkItems, item)
			} else {
				chunks = nil
			}
		}
		if snap == nil && chunks == nil {
			m.far.out(f) // never during a snapshot walk (internal/broker/far.go)
		}
		// the job table shrinks a few moves at a time between commands, to
		// a random top: below the jobs' count it runs out of room and stops
		if !f.e.Shrinking() && f.e.walks == 0 && rng.IntN(6) == 0 {
			f.e.beginShrink(uint32(1 + rng.IntN(int(f.e.jobs.next)+1)))
		}
		if f.e.Shrinking() {
			f.e.Shrink(1 + rng.IntN(3))
			shrinks++
		}
		m.advance(ms(f.now))
		if err := f.e.checkInvariants(); err != nil {
			t.Fatalf("step %d (%s): %v", step, log[len(log)-1], err)
		}
		m.check(t, f, step)
	}
	if shrinks == 0 {
		t.Logf("seed %d: the job table never shrank", seed)
	}
	if m.far != nil {
		if len(m.far.seen) == 0 {
			t.Logf("seed %d: no job went far", seed)
		}
		// everything back in memory, so the live engine compares with the
		// replays below (which never hand out)
		for key := range m.far.items {
			m.far.bring(t, f, key)
		}
	}
	for snap != nil {
		if ent := snap.Next(3); ent != nil {
			snapEntries = append(snapEntries, ent.Encode(nil))
		} else {
			snap = nil
		}
	}
	for chunks != nil {
		if item, ok := chunks.NextItem(nil, 3); ok {
			chunkItems = append(chunkItems, item)
		} else {
			chunks = nil
		}
	}
	if snapFrom >= 0 {
		r := New(Options{Seed: 7})
		for _, b := range snapEntries {
			ent, err := DecodeEntry(b, 0, 0)
			if err != nil {
				t.Fatalf("decode snapshot entry: %v", err)
			}
			r.Apply(ent)
		}
		for _, b := range f.sink.bodies[snapFrom:] {
			ent, err := DecodeEntry(f.sink.seg[b[0]:b[1]], 1, uint32(b[0]))
			if err != nil {
				t.Fatal(err)
			}
			r.Apply(ent)
		}
		r.Advance(f.now)
		if err := r.checkInvariants(); err != nil {
			t.Fatalf("after snapshot+replay: %v", err)
		}
		compareEngines(t, f.e, r, f.now)

		c := New(Options{Seed: 7})
		// half the seeds load as recovery does, in one bulk load
		// (internal/broker/recovery.go)
		bulk := seed%4 < 2
		if bulk {
			c.StartBulkLoad()
		}
		for i, b := range chunkItems {
			if err := c.LoadItem(b); err != nil {
				t.Fatalf("load snapshot item %d: %v", i, err)
			}
		}
		if bulk {
			c.FinishBulkLoad()
		}
		if err := c.checkInvariants(); err != nil {
			t.Fatalf("after loading job chunks: %v", err)
		}
		for _, b := range f.sink.bodies[snapFrom:] {
			ent, err := DecodeEntry(f.sink.seg[b[0]:b[1]], 1, uint32(b[0]))
			if err != nil {
				t.Fatal(err)
			}
			c.Apply(ent)
		}
		c.Advance(f.now)
		if err := c.checkInvariants(); err != nil {
			t.Fatalf("after job chunks+replay: %v", err)
		}
		compareEngines(t, f.e, c, f.now)
	}
	// the log replays to the same state, also when every entry is applied twice
	for _, twice := range []bool{false, true} {
		r := f.sink.replay(t, twice)
		r.Advance(f.now)
		compareEngines(t, f.e, r, f.now)
	}
}

func (m *model) nack(j *mjob, st State) {
	if j.expire != 0 && j.expire <= m.now {
		delete(m.jobs, mk(j.queue, j.id))
		return
	}
	if j.tries > 0 && j.attempt >= j.tries {
		j.phase = phaseDead
	} else {
		j.phase = phasePending
	}
	_ = st
}

func (m *model) check(t *testing.T, f *fixture, step int) {
	t.Helper()
	var total uint64
	for _, q := range []string{"a", "b"} {
		if info, err := f.e.Queue(f.now, "default", q); err == nil {
			total += info.Counts.Total()
			var c Counts
			for _, j := range m.jobs {
				if j.queue == q {
					*(&queue{counts: c}).countOf(m.state(j))++
				}
			}
		}
	}
	if total != uint64(len(m.jobs)) {
		t.Fatalf("step %d: engine holds %d jobs, model %d", step, total, len(m.jobs))
	}
	perState := map[string]map[State]uint64{}
	for _, j := range m.sorted() {
		var got State
		if _, far := m.far.has(mk(j.queue, j.id)); far {
			got = StateDelayed
		} else {
			got = f.state(j.queue, j.id)
		}
		want := m.state(j)
		if got != want {
			for _, o := range m.sorted() {
				if o.queue == j.queue && o.key == j.key {
					t.Logf("key %q: %s seq=%d phase=%d at=%d model=%s engine=%s", o.key, o.id, o.seq, o.phase, o.at-ms(t0), m.state(o), f.state(o.queue, o.id))
				}
			}
			t.Fatalf("step %d: job %s/%s is %s, model says %s", step, j.queue, j.id, got, want)
		}
		if perState[j.queue] == nil {
			perState[j.queue] = map[State]uint64{}
		}
		perState[j.queue][want]++
	}
	for q, ps := range perState {
		c := f.counts(q)
		for s, n := range ps {
			if *(&queue{counts: c}).countOf(s) != n {
				t.Fatalf("step %d: queue %s count of %s is %d, model %d", step, q, s, *(&queue{counts: c}).countOf(s), n)
			}
		}
	}
}

// compareEngines checks that two engines hold the same jobs in the same
// states with the same fields.
func compareEngines(t *testing.T, a, b *Engine, now time.Time) {
	t.Helper()
	dump := func(e *Engine) map[string]string {
		out := map[string]string{}
		for _, q := range e.AllQueues(now) {
			res, err := e.List(now, q.Namespace, q.Name, ListRequest{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			out["queue "+q.Name] = fmt.Sprintf("%+v paused=%v", q.Counts, q.Paused)
			for _, j := range res.Jobs {
				j.Data = nil
				out[q.Name+"/"+j.ID] = fmt.Sprintf("%+v", j)
			}
		}
		return out
	}
	da, db := dump(a), dump(b)
	for k, v := range da {
		if db[k] != v {
			t.Fatalf("replayed state differs at %s:\nlive:   %s\nreplay: %s", k, v, db[k])
		}
	}
	for k := range db {
		if _, ok := da[k]; !ok {
			t.Fatalf("replay has extra %s", k)
		}
	}
}

const farTestHorizon = 2 * time.Second

// fakeFar is the far store in memory, doing what internal/broker/far.go
// does with bucket files: it takes what FarOut hands out, brings a job back
// before a command names it, and brings jobs back a lead time before they
// are due.
type fakeFar struct {
	items map[string][]byte // queue/id → bucket item
	at    map[string]int64
	seen  map[string]bool // every job that went out once
}

func (ff *fakeFar) has(key string) ([]byte, bool) {
	if ff == nil {
		return nil, false
	}
	b, ok := ff.items[key]
	return b, ok
}

func (ff *fakeFar) out(f *fixture) {
	if ff == nil {
		return
	}
	f.e.FarOut(f.now, 1000, func(fj *FarJob) bool {
		var data []byte
		if fj.Payload.Len > 0 {
			data = slices.Clone(f.sink.blob(fj.Payload))
		}
		key := mk(fj.Queue, fj.ID)
		ff.items[key] = fj.Encode(nil, data)
		ff.at[key] = fj.At
		if ff.seen == nil {
			ff.seen = map[string]bool{}
		}
		ff.seen[key] = true
		return true
	})
}

func (ff *fakeFar) bring(t *testing.T, f *fixture, key string) {
	t.Helper()
	item, ok := ff.has(key)
	if !ok {
		return
	}
	ent, err := DecodeEntry(item, 0, 0)
	if err != nil {
		t.Fatalf("far item of %s: %v", key, err)
	}
	n, err := f.e.FarIn(f.now, 0, ent.Records)
	if err != nil || n != 1 {
		t.Fatalf("far in %s: %d %v", key, n, err)
	}
	f.e.AddFar("default", ent.Records[0].Job.Queue, -1)
	delete(ff.items, key)
	delete(ff.at, key)
}

// load brings back the jobs due within a lead time.
func (ff *fakeFar) load(t *testing.T, f *fixture) {
	if ff == nil {
		return
	}
	keys := make([]string, 0, len(ff.at))
	for key, at := range ff.at {
		if at-ms(f.now) <= farTestHorizon.Milliseconds()/4 {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		ff.bring(t, f, key)
	}
}

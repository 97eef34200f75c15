package engine

import (
	"errors"
	"os"
	"testing"
	"time"
)

// memSink is a log in memory: it keeps every entry's bytes so tests can read
// payloads back and replay the whole history into a fresh engine.
type memSink struct {
	seg    []byte
	bodies [][3]int // start, end of each entry in seg, and its segment number
	fail   error
	// num is the segment number entries are located in (0: 1), so a test
	// can tell blobs written before and after a point apart by segment
	num uint32
}

func (s *memSink) Append(ent *Entry) error {
	if s.fail != nil {
		return s.fail
	}
	start := len(s.seg)
	s.seg = ent.Encode(s.seg)
	num := max(s.num, 1)
	ent.Locate(num, uint32(start))
	s.bodies = append(s.bodies, [3]int{start, len(s.seg), int(num)})
	return nil
}

func (s *memSink) blob(r BlobRef) []byte { return s.seg[r.Offset : r.Offset+r.Len] }

// replay applies every logged entry to a new engine.
func (s *memSink) replay(t *testing.T, twice bool) *Engine {
	t.Helper()
	e := New(Options{Seed: 7})
	for _, b := range s.bodies {
		ent, err := DecodeEntry(s.seg[b[0]:b[1]], uint32(b[2]), uint32(b[0]))
		if err != nil {
			t.Fatalf("decode entry at %d: %v", b[0], err)
		}
		e.Apply(ent)
		if twice {
			e.Apply(ent)
		}
	}
	return e
}

type fixture struct {
	t    *testing.T
	e    *Engine
	sink *memSink
	now  time.Time
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newFixture(t *testing.T) *fixture {
	s := &memSink{}
	return &fixture{t: t, e: New(Options{Sink: s, Seed: 42}), sink: s, now: t0}
}

func (f *fixture) tick(d time.Duration) { f.now = f.now.Add(d) }

func dur(d time.Duration) *time.Duration { return &d }
func u32(v uint32) *uint32               { return &v }
func at(t time.Time) *time.Time          { return &t }

func (f *fixture) put(q string, req PutRequest) PutResult {
	f.t.Helper()
	if req.Payload == nil {
		req.Payload, req.PayloadJSON = []byte(`{"n":1}`), true
	}
	r, err := f.e.Put(f.now, "default", q, req)
	if err != nil {
		f.t.Fatalf("put: %v", err)
	}
	return r
}

func (f *fixture) take(max int, queues ...string) []Job {
	f.t.Helper()
	jobs, err := f.e.Take(f.now, "default", TakeRequest{Queues: queues, Max: max})
	if err != nil {
		f.t.Fatalf("take: %v", err)
	}
	return jobs
}

func (f *fixture) take1(q string) Job {
	f.t.Helper()
	jobs := f.take(1, q)
	if len(jobs) != 1 {
		f.t.Fatalf("take %s: got %d jobs, want 1", q, len(jobs))
	}
	return jobs[0]
}

func (f *fixture) takeNone(q string) {
	f.t.Helper()
	if jobs := f.take(1, q); len(jobs) != 0 {
		f.t.Fatalf("take %s: got job %s (%s), want none", q, jobs[0].ID, jobs[0].State)
	}
}

func (f *fixture) ack(j Job, req AckRequest) AckResult {
	f.t.Helper()
	req.Receipt = j.Receipt
	r, err := f.e.Ack(f.now, "default", j.Queue, j.ID, req)
	if err != nil {
		f.t.Fatalf("ack %s: %v", j.ID, err)
	}
	return r
}

func (f *fixture) peek(q, id string) Job {
	f.t.Helper()
	j, err := f.e.Peek(f.now, "default", q, id)
	if err != nil {
		f.t.Fatalf("peek %s: %v", id, err)
	}
	return j
}

func (f *fixture) state(q, id string) State {
	f.t.Helper()
	j, err := f.e.Peek(f.now, "default", q, id)
	if CodeOf(err) == CodeJobNotFound {
		return StateNone
	}
	if err != nil {
		f.t.Fatalf("peek %s: %v", id, err)
	}
	return j.State
}

func (f *fixture) counts(q string) Counts {
	f.t.Helper()
	info, err := f.e.Queue(f.now, "default", q)
	if err != nil {
		f.t.Fatalf("queue %s: %v", q, err)
	}
	return info.Counts
}

func wantCode(t *testing.T, err error, code Code, field string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want %s error (field %q), got %v", code, field, err)
	}
	if e.Code != code || (field != "" && e.Field != field) {
		t.Fatalf("want %s on field %q, got %s on field %q: %v", code, field, e.Code, e.Field, e)
	}
}

func getenv(k string) string { return os.Getenv(k) }

// listIDs pages through a queue's listing, limit jobs a page, and returns
// the ids in the order listed.
func listIDs(t *testing.T, e *Engine, now time.Time, queue string, filter Filter, limit int) []string {
	t.Helper()
	var ids []string
	req := ListRequest{Filter: filter, Limit: limit}
	for {
		res, err := e.List(now, "default", queue, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
		if req.Cursor = res.NextCursor; req.Cursor == "" {
			return ids
		}
	}
}

package stats

import (
	"net"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func TestRatesAndCommitLatency(t *testing.T) {
	h := New(10)
	if _, ok := h.Record(t0, engine.Stats{Put: 100}); ok {
		t.Fatal("the first record only sets the starting point")
	}
	h.Commit(3, 300, 2*time.Millisecond)
	h.Commit(1, 100, 4*time.Millisecond)
	s, ok := h.Record(t0.Add(2*time.Second), engine.Stats{Put: 120, Taken: 10, Acked: 8, Nacked: 2})
	if !ok {
		t.Fatal("second record: no sample")
	}
	if s.Put != 10 || s.Take != 5 || s.Ack != 4 || s.Nack != 1 {
		t.Fatalf("rates over 2 s: %+v", s)
	}
	if s.Commits != 2 || s.CommitMeanMs != 3 || s.CommitMaxMs != 4 || s.WALBytesPerS != 200 {
		t.Fatalf("commits: %+v", s)
	}
	// the next interval starts empty
	s, _ = h.Record(t0.Add(3*time.Second), engine.Stats{Put: 120, Taken: 10, Acked: 8, Nacked: 2})
	if s.Put != 0 || s.Commits != 0 || s.CommitMaxMs != 0 {
		t.Fatalf("quiet interval: %+v", s)
	}
	if h.WALBytes() != 400 {
		t.Fatalf("wal bytes %d, want 400", h.WALBytes())
	}
}

func TestRingKeepsTheNewest(t *testing.T) {
	h := New(3)
	h.Record(t0, engine.Stats{})
	for i := 1; i <= 5; i++ {
		h.Record(t0.Add(time.Duration(i)*time.Second), engine.Stats{Put: uint64(i * i)})
	}
	got := h.Samples(time.Time{})
	if len(got) != 3 {
		t.Fatalf("%d samples, want 3", len(got))
	}
	for i, want := range []float64{3*3 - 2*2, 4*4 - 3*3, 5*5 - 4*4} {
		if got[i].Put != want || !got[i].Time.Equal(t0.Add(time.Duration(i+3)*time.Second)) {
			t.Fatalf("sample %d: %+v, want put %v", i, got[i], want)
		}
	}
	if got := h.Samples(t0.Add(4 * time.Second)); len(got) != 1 || got[0].Put != 9 {
		t.Fatalf("since 4 s: %+v", got)
	}
}

func TestResetCountersAndClockStepBack(t *testing.T) {
	h := New(5)
	h.Record(t0, engine.Stats{Put: 50})
	if _, ok := h.Record(t0, engine.Stats{Put: 60}); ok {
		t.Fatal("a record at the same instant must not make a sample (division by zero)")
	}
	if _, ok := h.Record(t0.Add(-time.Second), engine.Stats{Put: 60}); ok {
		t.Fatal("a record before the previous one must not make a sample")
	}
	s, ok := h.Record(t0.Add(time.Second), engine.Stats{Put: 7})
	if !ok || s.Put != 7 {
		t.Fatalf("counters reset to 7: %+v, want put 7 (never negative)", s)
	}
}

func TestCountingListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := Count(ln)
	defer cl.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := cl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	a, b := <-accepted, <-accepted
	if cl.Open() != 2 {
		t.Fatalf("open %d, want 2", cl.Open())
	}
	a.Close()
	a.Close() // a second close counts once
	if cl.Open() != 1 {
		t.Fatalf("open %d after one close, want 1", cl.Open())
	}
	b.Close()
	for _, c := range clients {
		c.Close()
	}
	if cl.Open() != 0 {
		t.Fatalf("open %d, want 0", cl.Open())
	}
}

package beanstalk

import (
	"testing"
	"time"
)

// A reservation's TTR, as the client counts it, runs from when its answer
// left the write buffer, not from when it was put there: a goroutine
// descheduled in between must not shorten it. An earlier engine deadline
// never pulls it back.
func TestSettleCountsFromTheWrite(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &conn{resv: map[uint64]*reservation{}}
	r := &reservation{ttr: 2 * time.Second}
	r.extend(t0.Add(2*time.Second), t0)
	c.resv[1], c.unsent = r, append(c.unsent, r)

	c.settle(t0.Add(5 * time.Millisecond))
	if want := t0.Add(2*time.Second + 5*time.Millisecond); !r.end.Equal(want) {
		t.Fatalf("end %v, want %v (TTR from the write)", r.end, want)
	}
	if len(c.unsent) != 0 {
		t.Fatalf("%d reservations still unsent after settle", len(c.unsent))
	}
	c.unsent = append(c.unsent, r)
	c.settle(t0) // a clock that went back: the deadline never moves earlier
	if want := t0.Add(2*time.Second + 5*time.Millisecond); !r.end.Equal(want) {
		t.Fatalf("end moved back to %v", r.end)
	}
}

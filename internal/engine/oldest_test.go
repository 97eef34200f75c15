package engine

import (
	"testing"
	"time"
)

// oldest_ready_age: from the heap's root while every ready job has one
// priority, by the walk once priorities differ, and right again after
// they are one priority again.
func TestOldestReadyAgeAcrossPriorities(t *testing.T) {
	f := newFixture(t)
	age := func(want time.Duration) {
		t.Helper()
		qi, err := f.e.Queue(f.now, "default", "q")
		if err != nil {
			t.Fatal(err)
		}
		if qi.OldestReadyAge != want {
			t.Fatalf("oldest_ready_age %s, want %s", qi.OldestReadyAge, want)
		}
		if err := f.e.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	a := f.put("q", PutRequest{})
	f.tick(5 * time.Second)
	b := f.put("q", PutRequest{})
	f.tick(time.Second)
	age(6 * time.Second)
	// b now goes first, but a is still the oldest
	urgent := uint32(1)
	if _, err := f.e.Update(f.now, "default", "q", b.ID, UpdateRequest{Priority: &urgent}); err != nil {
		t.Fatal(err)
	}
	age(6 * time.Second)
	// b taken: a alone, one priority again
	if j := f.take1("q"); j.ID != b.ID {
		t.Fatalf("took %s, want %s", j.ID, b.ID)
	}
	age(6 * time.Second)
	f.tick(2 * time.Second)
	age(8 * time.Second)
	if j := f.take1("q"); j.ID != a.ID {
		t.Fatalf("took %s, want %s", j.ID, a.ID)
	}
	age(0)
}

// oldest_ready_age reads one job per priority, however many ready jobs
// there are: a dashboard asks for it every second on every queue.
func TestOldestReadyAgeReadsOnePerPriority(t *testing.T) {
	f := newFixture(t)
	const n = 3000
	for i := range n {
		f.put("q", PutRequest{Priority: u32(uint32(i % 3))})
		f.tick(time.Millisecond)
	}
	f.tick(time.Second)
	before := f.e.visited
	qi, err := f.e.Queue(f.now, "default", "q")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Second + n*time.Millisecond; qi.OldestReadyAge != want {
		t.Fatalf("oldest_ready_age %s, want %s", qi.OldestReadyAge, want)
	}
	if got := f.e.visited - before; got > 3 {
		t.Fatalf("queue stats read %d jobs for 3 priorities among %d ready jobs", got, n)
	}
	// the oldest job leaves: the next oldest of its priority takes over
	if j := f.take1("q"); j.Priority != 0 {
		t.Fatalf("took priority %d first", j.Priority)
	}
	qi, _ = f.e.Queue(f.now, "default", "q")
	if want := time.Second + (n-1)*time.Millisecond; qi.OldestReadyAge != want {
		t.Fatalf("after take: oldest_ready_age %s, want %s", qi.OldestReadyAge, want)
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

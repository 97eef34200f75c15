package engine

import (
	"testing"
	"time"
)

// Reservation deadlines are kept in milliseconds; a command's time with a
// fraction of a millisecond must round them up, so a reservation never
// ends (nor reports an end) before its TTR has passed since the reserve.
func TestReservationDeadlinesRoundUp(t *testing.T) {
	f := newFixture(t)
	f.tick(999_800 * time.Microsecond) // t0 + 999.8 ms
	ttr := 2 * time.Second
	a := f.put("q", PutRequest{TTR: dur(ttr)})
	b := f.put("q", PutRequest{TTR: dur(ttr)})
	c := f.put("q", PutRequest{TTR: dur(ttr)})

	check := func(what string, start, until time.Time, d time.Duration) {
		t.Helper()
		if until.Before(start.Add(d)) {
			t.Fatalf("%s: deadline %v is before %v + %v", what, until.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano), d)
		}
		if until.After(start.Add(d + time.Millisecond)) {
			t.Fatalf("%s: deadline %v is more than 1 ms past %v + %v", what, until.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano), d)
		}
	}

	taken := f.take(1, "q")
	if len(taken) != 1 || taken[0].ID != a.ID {
		t.Fatalf("take: %+v", taken)
	}
	check("take", f.now, taken[0].ReservedUntil, ttr)
	if got := f.peek("q", a.ID).ReservedUntil; !got.Equal(taken[0].ReservedUntil) {
		t.Fatalf("peek reports deadline %v, take reported %v", got, taken[0].ReservedUntil)
	}

	best, err := f.e.TakeBest(f.now, "default", []string{"q"})
	if err != nil || len(best) != 1 || best[0].ID != b.ID {
		t.Fatalf("take-best: %+v %v", best, err)
	}
	check("take-best", f.now, best[0].ReservedUntil, ttr)

	byID, err := f.e.ReserveJob(f.now, "default", "q", c.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("reserve-job", f.now, byID.ReservedUntil, ttr)

	f.tick(300 * time.Microsecond) // a fraction again: t0 + 1000.1 ms
	until, err := f.e.Touch(f.now, "default", "q", a.ID, TouchRequest{Receipt: taken[0].Receipt})
	if err != nil {
		t.Fatal(err)
	}
	check("touch", f.now, until, ttr)
	touchedAt := f.now

	// Replay reaches the same deadlines.
	r := f.sink.replay(t, false)
	for _, id := range []string{b.ID, c.ID} {
		want := f.peek("q", id).ReservedUntil
		got, err := r.Peek(f.now, "default", "q", id)
		if err != nil || !got.ReservedUntil.Equal(want) {
			t.Fatalf("replayed %s: deadline %v (%v), want %v", id, got.ReservedUntil, err, want)
		}
	}

	// Just before TTR has passed since the touch the job is still held;
	// at it, it is back.
	f.now = touchedAt.Add(ttr - 100*time.Microsecond)
	if s := f.state("q", a.ID); s != StateReserved {
		t.Fatalf("job %s before its TTR passed: %s", a.ID, s)
	}
	f.now = until
	if s := f.state("q", a.ID); s != StateReady {
		t.Fatalf("job %s at its deadline: %s", a.ID, s)
	}

}

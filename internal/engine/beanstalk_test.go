package engine

import (
	"testing"
	"time"
)

func TestBeanstalkOps(t *testing.T) {
	f := newFixture(t)
	a := f.put("tube", PutRequest{Tries: u32(0)})
	b := f.put("tube", PutRequest{Delay: dur(time.Hour)})
	c := f.put("tube", PutRequest{Delay: dur(2 * time.Hour)})
	ja, err := f.e.JobBySeq(f.now, "default", a.Seq)
	if err != nil || ja.ID != a.ID {
		t.Fatalf("by seq: %+v %v", ja, err)
	}
	if _, err := f.e.JobBySeq(f.now, "other", a.Seq); CodeOf(err) != CodeNamespaceNotFound && CodeOf(err) != CodeJobNotFound {
		t.Fatalf("seq in another namespace: %v", err)
	}
	j := f.take1("tube")
	f.e.Bury(f.now, "default", "tube", a.ID, BuryRequest{Receipt: j.Receipt})
	// kick: buried first
	if n, _ := f.e.Kick(f.now, "default", "tube", 10); n != 1 {
		t.Fatalf("kick buried: %d", n)
	}
	p := f.peek("tube", a.ID)
	if p.State != StateReady || p.Kicks != 1 || p.Buries != 1 || p.Attempt != 1 {
		t.Fatalf("kicked %+v", p)
	}
	// then delayed, soonest first
	if n, _ := f.e.Kick(f.now, "default", "tube", 1); n != 1 || f.state("tube", b.ID) != StateReady || f.state("tube", c.ID) != StateDelayed {
		t.Fatal("kick delayed: soonest first")
	}
	if err := f.e.KickJob(f.now, "default", "tube", c.ID); err != nil || f.state("tube", c.ID) != StateReady {
		t.Fatalf("kick-job: %v", err)
	}
	r, err := f.e.ReserveJob(f.now, "default", "tube", c.ID, nil)
	if err != nil || r.State != StateReserved || r.Receipt == "" {
		t.Fatalf("reserve-job %+v %v", r, err)
	}
	_, err = f.e.ReserveJob(f.now, "default", "tube", c.ID, nil)
	wantCode(t, err, CodeConflict, "")
	f.tick(30 * time.Second)
	if p := f.peek("tube", c.ID); p.Timeouts != 1 || p.State != StateReady {
		t.Fatalf("timeout counter %+v", p)
	}
	// timed pause ends by itself
	f.e.PauseFor(f.now, "default", "tube", time.Second)
	f.takeNone("tube")
	if d, ok := f.e.NextDeadline(); !ok || d.After(f.now.Add(time.Second)) {
		t.Fatalf("pause end not scheduled: %v", d)
	}
	f.tick(time.Second)
	if len(f.take(1, "tube")) != 1 {
		t.Fatal("pause did not end")
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	compareEngines(t, f.e, f.sink.replay(t, true), f.now)
}

// Limits come from the network: a huge one must cost what the heap holds,
// not what the client asked for.
func TestHugeLimitsAreBoundedByWhatExists(t *testing.T) {
	f := newFixture(t)
	f.put("q", PutRequest{})
	j := f.take1("q")
	f.e.Bury(f.now, "default", "q", j.ID, BuryRequest{Receipt: j.Receipt})
	if n, err := f.e.Respawn(f.now, "default", "q", RespawnRequest{Limit: 1 << 31}); err != nil || n != 1 {
		t.Fatalf("respawn %d %v", n, err)
	}
	if n, err := f.e.Kick(f.now, "default", "q", 1<<31); err != nil || n != 0 {
		t.Fatalf("kick %d %v", n, err)
	}
}

package engine

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"
)

// farOut hands out every candidate, keeping the bucket items by id.
func farOut(f *fixture) map[string][]byte {
	out := map[string][]byte{}
	f.e.FarOut(f.now, 100, func(fj *FarJob) bool {
		var data []byte
		if fj.Payload.Len > 0 {
			data = slices.Clone(f.sink.blob(fj.Payload))
		}
		out[fj.ID] = fj.Encode(nil, data)
		return true
	})
	return out
}

func TestFarOutHandsOutOnlyPlainJobsBeyondTheHorizon(t *testing.T) {
	f := newFixture(t)
	f.e.SetFarHorizon(time.Hour)
	f.put("q", PutRequest{ID: "far", Delay: dur(2 * time.Hour), Tags: map[string]string{"t": "1"}, Payload: []byte("far payload")})
	f.put("q", PutRequest{ID: "near", Delay: dur(30 * time.Minute)})
	f.put("q", PutRequest{ID: "keyed", Delay: dur(2 * time.Hour), Key: "k"})
	f.put("q", PutRequest{ID: "ttl", Delay: dur(2 * time.Hour), TTL: dur(3 * time.Hour)})
	items := farOut(f)
	if len(items) != 1 || items["far"] == nil {
		t.Fatalf("handed out %v, want only the plain far job", items)
	}
	if f.e.Jobs() != 3 {
		t.Fatalf("%d jobs in memory, want 3", f.e.Jobs())
	}
	if _, err := f.e.Peek(f.now, "default", "q", "far"); CodeOf(err) != CodeJobNotFound {
		t.Fatalf("peek of a handed-out job: %v", err)
	}
	if c := f.counts("q"); c.Delayed != 4 || f.e.FarCount("default", "q") != 1 {
		t.Fatalf("counts %+v, far %d: the far job must still count as delayed", c, f.e.FarCount("default", "q"))
	}
	// nothing is handed out twice, and a refusal keeps the job
	if n := f.e.FarOut(f.now, 100, func(*FarJob) bool { t.Fatal("offered again"); return true }); n != 0 {
		t.Fatal(n)
	}
	f.put("q", PutRequest{ID: "refused", Delay: dur(5 * time.Hour)})
	if n := f.e.FarOut(f.now, 100, func(*FarJob) bool { return false }); n != 0 || !f.e.HasJob("default", "q", "refused") {
		t.Fatalf("a refused job left memory (%d)", n)
	}
}

func TestFarInBringsTheJobBackLoggedAndReplayable(t *testing.T) {
	f := newFixture(t)
	f.e.SetFarHorizon(time.Hour)
	put := f.put("q", PutRequest{ID: "far", Delay: dur(2 * time.Hour), Tags: map[string]string{"t": "1"}, Payload: []byte("far payload")})
	items := farOut(f)
	f.tick(90 * time.Minute) // the bucket's window is near
	ent, err := DecodeEntry(items["far"], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.e.FarIn(f.now, 12345, ent.Records)
	if err != nil || n != 1 {
		t.Fatalf("far in: %d %v", n, err)
	}
	f.e.AddFar("default", "q", -1)
	j := f.peek("q", "far")
	if j.Seq != put.Seq || !j.ActivateAt.Equal(put.ActivateAt) || j.State != StateDelayed || j.Tags["t"] != "1" {
		t.Fatalf("job back: %+v", j)
	}
	if got := string(f.sink.blob(j.Payload)); got != "far payload" {
		t.Fatalf("payload back: %q (the far-in record carries it inline)", got)
	}
	if c := f.counts("q"); c.Delayed != 1 || f.e.FarCount("default", "q") != 0 {
		t.Fatalf("counts %+v after far in", c)
	}
	// the last logged entry is the far-in record naming its bucket
	last := f.sink.bodies[len(f.sink.bodies)-1]
	le, err := DecodeEntry(f.sink.seg[last[0]:last[1]], 1, uint32(last[0]))
	if err != nil || len(le.Records) != 1 || le.Records[0].Kind != KindFarIn || le.Records[0].FarBucket != 12345 {
		t.Fatalf("logged %+v %v", le, err)
	}
	// taking back a job that is in memory, or of a deleted queue, does nothing
	if n, err := f.e.FarIn(f.now, 12345, ent.Records); err != nil || n != 0 {
		t.Fatalf("second far in: %d %v", n, err)
	}
	r := f.sink.replay(t, true)
	r.Advance(f.now)
	compareEngines(t, f.e, r, f.now)
	f.tick(time.Hour)
	if jobs := f.take(10, "q"); len(jobs) != 1 || jobs[0].ID != "far" {
		t.Fatalf("take when due: %+v", jobs)
	}
}

func TestSetFarHorizonNotesJobsAlreadyDelayed(t *testing.T) {
	f := newFixture(t)
	f.put("q", PutRequest{ID: "a", Delay: dur(3 * time.Hour)})
	f.put("q", PutRequest{ID: "b", Delay: dur(10 * time.Minute)})
	if f.e.FarPending() {
		t.Fatal("candidates without a horizon")
	}
	f.e.SetFarHorizon(time.Hour)
	if items := farOut(f); len(items) != 1 || items["a"] == nil {
		t.Fatalf("handed out %v, want a", items)
	}
}

// TestSetFarHorizonNotesInPutOrder: jobs already delayed are offered in
// the order they were put (about their payloads' log order), not in the
// delayed heap's order.
func TestSetFarHorizonNotesInPutOrder(t *testing.T) {
	f := newFixture(t)
	for i := range 50 {
		f.put("q", PutRequest{ID: fmt.Sprintf("j%02d", i), Delay: dur(time.Duration(100-i) * time.Hour)})
	}
	f.e.SetFarHorizon(time.Hour)
	var got []string
	f.e.FarOut(f.now, 100, func(fj *FarJob) bool { got = append(got, fj.ID); return true })
	if len(got) != 50 || !slices.IsSorted(got) {
		t.Fatalf("offered %v, want j00..j49 in put order", got)
	}
}

// TestFarJobsCountTowardMaxJobs: the node's job budget (SetMaxJobs) counts
// the jobs handed out to the far store, and what AddFar adds or takes.
func TestFarJobsCountTowardMaxJobs(t *testing.T) {
	f := newFixture(t)
	f.e.SetFarHorizon(time.Hour)
	f.e.SetMaxJobs(3)
	for _, id := range []string{"a", "b", "c"} {
		f.put("q", PutRequest{ID: id, Delay: dur(2 * time.Hour)})
	}
	farOut(f)
	if f.e.Jobs() != 0 || f.e.FarTotal() != 3 {
		t.Fatalf("%d in memory, %d far", f.e.Jobs(), f.e.FarTotal())
	}
	if _, err := f.e.Put(f.now, "default", "q", PutRequest{ID: "d", Payload: []byte("x")}); CodeOf(err) != CodeQueueFull {
		t.Fatalf("put beyond the budget with every job far: %v", err)
	}
	f.e.AddFar("default", "q", -1) // one left its bucket
	if f.e.FarTotal() != 2 {
		t.Fatalf("far total %d after AddFar(-1)", f.e.FarTotal())
	}
	f.put("q", PutRequest{ID: "d"})
	f.e.AddFar("default", "q", -5) // never below zero
	if f.e.FarTotal() != 0 || f.e.FarCount("default", "q") != 0 {
		t.Fatalf("far total %d, count %d", f.e.FarTotal(), f.e.FarCount("default", "q"))
	}
}

// TestFarOfferDrainsABacklogInOrderWithoutCopyingIt: a backlog offered a
// few at a time, with new candidates arriving between offers, comes out in
// put order, each job once; the offered prefix is dropped once it is the
// larger half, so the candidate list stays at most twice what is pending.
func TestFarOfferDrainsABacklogInOrderWithoutCopyingIt(t *testing.T) {
	f := newFixture(t)
	f.e.SetFarHorizon(time.Hour)
	next, seen := 0, 0
	put := func(n int) {
		for range n {
			f.put("q", PutRequest{ID: "j" + strconv.Itoa(next), Delay: dur(2 * time.Hour)})
			next++
		}
	}
	put(1000)
	for round := 0; f.e.FarPending(); round++ {
		if round > 10000 {
			t.Fatal("the backlog never drains")
		}
		n := f.e.FarOut(f.now, 7, func(fj *FarJob) bool {
			if want := "j" + strconv.Itoa(seen); fj.ID != want {
				t.Fatalf("offered %s, want %s (put order, once each)", fj.ID, want)
			}
			seen++
			return true
		})
		if n == 0 {
			t.Fatal("an offer of a pending backlog handed out nothing")
		}
		if pending := len(f.e.far.cand) - f.e.far.head; len(f.e.far.cand) > 2*pending+1 {
			t.Fatalf("candidate list of %d holds %d pending: the offered prefix is kept", len(f.e.far.cand), pending)
		}
		if round%10 == 0 && next < 1500 {
			put(5)
		}
	}
	if seen != next {
		t.Fatalf("%d of %d jobs handed out", seen, next)
	}
}

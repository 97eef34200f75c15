package engine

import (
	"testing"
	"time"
)

// TestAckAndTake: the ack answers the worker's next reservation; a bad
// take changes nothing, a failed ack takes nothing, an empty queue answers
// no job, and both survive a replay.
func TestAckAndTake(t *testing.T) {
	f := newFixture(t)
	a := f.put("work", PutRequest{})
	b := f.put("work", PutRequest{Priority: u32(2000)})
	ja := f.take1("work")
	if ja.ID != a.ID {
		t.Fatalf("took %s, want %s", ja.ID, a.ID)
	}
	take := TakeRequest{Queues: []string{"work"}, Max: 1, TTR: dur(10 * time.Second)}

	// a bad take fails before the ack: the job stays reserved
	_, _, err := f.e.AckAndTake(f.now, "default", "work", ja.ID, AckRequest{Receipt: ja.Receipt},
		TakeRequest{Queues: []string{"work"}, Max: MaxTake + 1})
	wantCode(t, err, CodeBadRequest, "take.max")
	if f.state("work", ja.ID) != StateReserved || f.counts("work").Ready != 1 {
		t.Fatal("a rejected take changed something")
	}
	// a bad receipt fails the ack and takes nothing
	_, _, err = f.e.AckAndTake(f.now, "default", "work", ja.ID, AckRequest{Receipt: "nope"}, take)
	wantCode(t, err, CodeConflict, "")
	if f.state("work", ja.ID) != StateReserved || f.counts("work").Ready != 1 {
		t.Fatal("a failed ack took or changed something")
	}

	f.tick(time.Second)
	res, jobs, err := f.e.AckAndTake(f.now, "default", "work", ja.ID, AckRequest{Receipt: ja.Receipt}, take)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != a.ID || res.State != "deleted" || res.NextID != "" {
		t.Fatalf("ack %+v", res)
	}
	if len(jobs) != 1 || jobs[0].ID != b.ID || jobs[0].State != StateReserved || jobs[0].Receipt == "" ||
		!jobs[0].ReservedUntil.Equal(f.now.Add(10*time.Second)) || jobs[0].Attempt != 1 {
		t.Fatalf("next %+v", jobs)
	}
	if f.state("work", a.ID) != StateNone {
		t.Fatal("acked job still there")
	}
	// nothing left: the ack still happens, the take answers no job
	res, jobs, err = f.e.AckAndTake(f.now, "default", "work", b.ID, AckRequest{Receipt: jobs[0].Receipt}, take)
	if err != nil || res.State != "deleted" || len(jobs) != 0 {
		t.Fatalf("last: %+v %v %v", res, jobs, err)
	}
	// the put-on-ack `next` and the take compose: the next put is taken
	c := f.put("work", PutRequest{})
	jc := f.take1("work")
	res, jobs, err = f.e.AckAndTake(f.now, "default", "work", jc.ID,
		AckRequest{Receipt: jc.Receipt, Next: &NextPut{Queue: "work", Put: PutRequest{Payload: []byte("n")}}}, take)
	if err != nil || res.ID != c.ID || len(jobs) != 1 || jobs[0].ID != res.NextID {
		t.Fatalf("next+take: %+v %+v %v", res, jobs, err)
	}
	r := f.sink.replay(t, false)
	if _, err := r.Peek(f.now, "default", "work", c.ID); CodeOf(err) != CodeJobNotFound {
		t.Fatalf("replayed acked job: %v", err)
	}
	if j, err := r.Peek(f.now, "default", "work", jobs[0].ID); err != nil || j.State != StateReserved {
		t.Fatalf("replayed next job %+v %v", j, err)
	}
}

// TestAckBatch: all or none, in one log entry.
func TestAckBatch(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := 0; i < 4; i++ {
		ids = append(ids, f.put("work", PutRequest{}).ID)
	}
	f.put("other", PutRequest{})
	jobs := f.take(4, "work")
	other := f.take1("other")
	items := make([]AckItem, len(jobs))
	for i, j := range jobs {
		items[i] = AckItem{ID: j.ID, Receipt: j.Receipt}
	}
	entries := len(f.sink.bodies)
	unchanged := func() {
		t.Helper()
		if len(f.sink.bodies) != entries || f.counts("work").Reserved != 4 {
			t.Fatalf("a failed batch changed something: %d entries (had %d), %+v", len(f.sink.bodies), entries, f.counts("work"))
		}
	}

	bad := append([]AckItem(nil), items...)
	bad[2].Receipt = "stale"
	_, err := f.e.AckBatch(f.now, "default", "work", bad)
	wantCode(t, err, CodeConflict, "acks[2]")
	unchanged()

	dup := append(append([]AckItem(nil), items...), items[1])
	_, err = f.e.AckBatch(f.now, "default", "work", dup)
	wantCode(t, err, CodeBadRequest, "acks[4].id")
	unchanged()

	// a job of another queue is not this queue's
	_, err = f.e.AckBatch(f.now, "default", "work", append(append([]AckItem(nil), items[:1]...), AckItem{ID: other.ID, Receipt: other.Receipt}))
	wantCode(t, err, CodeJobNotFound, "acks[1]")
	unchanged()

	_, err = f.e.AckBatch(f.now, "default", "work", nil)
	wantCode(t, err, CodeBadRequest, "acks")
	_, err = f.e.AckBatch(f.now, "default", "work", make([]AckItem, MaxAckBatch+1))
	wantCode(t, err, CodeBadRequest, "acks")
	unchanged()

	res, err := f.e.AckBatch(f.now, "default", "work", items)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.sink.bodies) != entries+1 {
		t.Fatalf("%d log entries for one batch", len(f.sink.bodies)-entries)
	}
	for i, r := range res {
		if r.ID != items[i].ID || r.State != "deleted" {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	for _, id := range ids {
		if f.state("work", id) != StateNone {
			t.Fatalf("job %s not acked", id)
		}
	}
	if st := f.e.Stats(); st.Acked != 4 {
		t.Fatalf("stats %+v", st)
	}
	r := f.sink.replay(t, true)
	for _, id := range ids {
		if _, err := r.Peek(f.now, "default", "work", id); CodeOf(err) != CodeJobNotFound {
			t.Fatalf("replayed: job %s: %v", id, err)
		}
	}
	if j, err := r.Peek(f.now, "default", "other", other.ID); err != nil || j.State != StateReserved {
		t.Fatalf("replayed other job %+v %v", j, err)
	}
}

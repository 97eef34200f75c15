package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDelayedJobInvisibleUntilItsTime(t *testing.T) {
	f := newFixture(t)
	r := f.put("q", PutRequest{Delay: dur(50 * time.Millisecond)})
	if r.State != StateDelayed || !r.ActivateAt.Equal(t0.Add(50*time.Millisecond)) {
		t.Fatalf("put answered %+v", r)
	}
	f.tick(49 * time.Millisecond)
	f.takeNone("q")
	if d, ok := f.e.NextDeadline(); !ok || !d.Equal(t0.Add(50*time.Millisecond)) {
		t.Fatalf("next deadline %v %v", d, ok)
	}
	f.tick(time.Millisecond)
	if j := f.take1("q"); j.ID != r.ID || j.Attempt != 1 || j.State != StateReserved {
		t.Fatalf("took %+v", j)
	}
	// absolute at in the past is ready at once
	r2 := f.put("q", PutRequest{At: at(t0.Add(-time.Hour))})
	if r2.State != StateReady {
		t.Fatalf("past at: state %s", r2.State)
	}
}

func TestServingOrderPriorityActivationSeq(t *testing.T) {
	f := newFixture(t)
	a := f.put("q", PutRequest{Priority: u32(5)})
	b := f.put("q", PutRequest{Priority: u32(1), Delay: dur(10 * time.Millisecond)})
	c := f.put("q", PutRequest{Priority: u32(5)})
	d := f.put("q", PutRequest{Priority: u32(1)})
	f.tick(20 * time.Millisecond)
	// priority 1 first: d activated at t0, b at t0+10ms; then a, c by seq
	got := f.take(10, "q")
	var ids []string
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	want := []string{d.ID, b.ID, a.ID, c.ID}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("order %v, want %v", ids, want)
	}
}

func TestMultiQueueTakeListedOrder(t *testing.T) {
	f := newFixture(t)
	low := f.put("low", PutRequest{Priority: u32(0)})
	high := f.put("high", PutRequest{Priority: u32(9)})
	got := f.take(2, "high", "missing", "low")
	if len(got) != 2 || got[0].ID != high.ID || got[1].ID != low.ID {
		t.Fatalf("got %v", got)
	}
	if jobs := f.take(1, "nope"); len(jobs) != 0 {
		t.Fatal("missing queue should give nothing")
	}
	_, err := f.e.Take(f.now, "default", TakeRequest{Queues: []string{"q"}, Max: 1001})
	wantCode(t, err, CodeBadRequest, "max")
}

func TestTTRExpiryAndTriesToDead(t *testing.T) {
	f := newFixture(t)
	r := f.put("q", PutRequest{TTR: dur(time.Second), Tries: u32(2)})
	j1 := f.take1("q")
	f.tick(999 * time.Millisecond)
	f.takeNone("q")
	f.tick(time.Millisecond) // reservation over: attempt 1 used, back to ready
	if s := f.state("q", r.ID); s != StateReady {
		t.Fatalf("after expiry: %s", s)
	}
	// the old receipt is dead
	_, err := f.e.Ack(f.now, "default", "q", r.ID, AckRequest{Receipt: j1.Receipt})
	wantCode(t, err, CodeConflict, "")
	j2 := f.take1("q")
	if j2.Attempt != 2 || j2.Receipt == j1.Receipt {
		t.Fatalf("second take %+v", j2)
	}
	_, err = f.e.Ack(f.now, "default", "q", r.ID, AckRequest{Receipt: j1.Receipt})
	wantCode(t, err, CodeConflict, "")
	f.tick(time.Second) // last try expires → dead
	j := f.peek("q", r.ID)
	if j.State != StateDead || j.LastError == "" {
		t.Fatalf("after last try: %+v", j)
	}
	if c := f.counts("q"); c.Dead != 1 || c.Total() != 1 {
		t.Fatalf("counts %+v", c)
	}
	n, err := f.e.Respawn(f.now, "default", "q", RespawnRequest{Limit: 10})
	if err != nil || n != 1 {
		t.Fatalf("respawn %d %v", n, err)
	}
	if j := f.peek("q", r.ID); j.State != StateReady || j.Attempt != 0 {
		t.Fatalf("respawned %+v", j)
	}
}

func TestNackDelayBackoffAndDead(t *testing.T) {
	f := newFixture(t)
	r := f.put("q", PutRequest{Tries: u32(3)})
	j := f.take1("q")
	st, err := f.e.Nack(f.now, "default", "q", r.ID, NackRequest{Receipt: j.Receipt, Delay: dur(5 * time.Second), Error: "smtp timeout"})
	if err != nil || st != StateDelayed {
		t.Fatalf("nack %s %v", st, err)
	}
	p := f.peek("q", r.ID)
	if !p.ActivateAt.Equal(f.now.Add(5*time.Second)) || p.LastError != "smtp timeout" {
		t.Fatalf("after nack %+v", p)
	}
	f.tick(5 * time.Second)
	j = f.take1("q") // attempt 2
	st, _ = f.e.Nack(f.now, "default", "q", r.ID, NackRequest{Receipt: j.Receipt, Delay: dur(0)})
	if st != StateReady {
		t.Fatalf("nack 0s: %s", st)
	}
	j = f.take1("q") // attempt 3 = last
	// without delay on attempt 3 the backoff would be 1s×2² ± 10%; but tries are used up
	st, _ = f.e.Nack(f.now, "default", "q", r.ID, NackRequest{Receipt: j.Receipt})
	if st != StateDead {
		t.Fatalf("last nack: %s", st)
	}
}

func TestNackBackoffWithinJitter(t *testing.T) {
	f := newFixture(t)
	for attempt := 1; attempt <= 12; attempt++ {
		r := f.put("q", PutRequest{Tries: u32(0)})
		var j Job
		for i := 0; i < attempt; i++ {
			j = f.take1("q")
			if i < attempt-1 {
				f.e.Nack(f.now, "default", "q", r.ID, NackRequest{Receipt: j.Receipt, Delay: dur(0)})
			}
		}
		f.e.Nack(f.now, "default", "q", r.ID, NackRequest{Receipt: j.Receipt})
		p := f.peek("q", r.ID)
		base := float64(time.Second) * float64(int(1)<<(attempt-1))
		if base > float64(10*time.Minute) {
			base = float64(10 * time.Minute)
		}
		got := float64(p.ActivateAt.Sub(f.now))
		if got < base*0.9-float64(time.Millisecond) || got > base*1.1+float64(time.Millisecond) {
			t.Fatalf("attempt %d: backoff %v, want %v ±10%%", attempt, time.Duration(got), time.Duration(base))
		}
		f.e.Cancel(f.now, "default", "q", r.ID, "")
	}
}

func TestTouchAndBury(t *testing.T) {
	f := newFixture(t)
	r := f.put("q", PutRequest{TTR: dur(10 * time.Second)})
	j := f.take1("q")
	f.tick(8 * time.Second)
	until, err := f.e.Touch(f.now, "default", "q", r.ID, TouchRequest{Receipt: j.Receipt})
	if err != nil || !until.Equal(f.now.Add(10*time.Second)) {
		t.Fatalf("touch %v %v", until, err)
	}
	f.tick(9 * time.Second)
	if s := f.state("q", r.ID); s != StateReserved {
		t.Fatalf("touched job: %s", s)
	}
	_, err = f.e.Touch(f.now, "default", "q", r.ID, TouchRequest{Receipt: "bogus"})
	wantCode(t, err, CodeConflict, "")
	if err := f.e.Bury(f.now, "default", "q", r.ID, BuryRequest{Receipt: j.Receipt, Reason: "bad data"}); err != nil {
		t.Fatal(err)
	}
	p := f.peek("q", r.ID)
	if p.State != StateDead || p.LastError != "bad data" || !p.Buried {
		t.Fatalf("buried %+v", p)
	}
	if n, _ := f.e.PurgeDead(f.now, "default", "q"); n != 1 {
		t.Fatalf("purge dead %d", n)
	}
	if f.state("q", r.ID) != StateNone {
		t.Fatal("purged job still there")
	}
}

func TestTTL(t *testing.T) {
	f := newFixture(t)
	a := f.put("q", PutRequest{TTL: dur(time.Minute)})
	b := f.put("q", PutRequest{TTL: dur(time.Minute), TTR: dur(2 * time.Minute)})
	jb := f.take(2, "q")
	if len(jb) != 2 {
		t.Fatal("want both")
	}
	f.e.Nack(f.now, "default", "q", a.ID, NackRequest{Receipt: jb[0].Receipt, Delay: dur(0)})
	f.tick(time.Minute)
	if f.state("q", a.ID) != StateNone {
		t.Fatal("ready job outlived its TTL")
	}
	// reserved job is not removed mid-reservation...
	if f.state("q", b.ID) != StateReserved {
		t.Fatal("reserved job removed by TTL")
	}
	// ...but when the reservation ends without ack, it goes
	f.tick(time.Minute)
	if f.state("q", b.ID) != StateNone {
		t.Fatal("expired reservation of a TTL-passed job should remove it")
	}
	_, err := f.e.Put(f.now, "default", "q", PutRequest{Payload: []byte("x"), TTL: dur(time.Second), Delay: dur(2 * time.Second)})
	wantCode(t, err, CodeBadRequest, "ttl")
}

func TestStrictKeyFIFO(t *testing.T) {
	f := newFixture(t)
	a := f.put("q", PutRequest{Key: "user:42", Priority: u32(9)})
	b := f.put("q", PutRequest{Key: "user:42", Priority: u32(0)})
	c := f.put("q", PutRequest{Key: "user:7"})
	if b.State != StateBlocked {
		t.Fatalf("second of key: %s", b.State)
	}
	got := f.take(10, "q") // b (priority 0) is blocked behind a: priority never reorders a key
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != c.ID {
		t.Fatalf("took %v", got)
	}
	// a nacked head with a delay holds the key
	f.e.Nack(f.now, "default", "q", a.ID, NackRequest{Receipt: got[0].Receipt, Delay: dur(time.Second)})
	if s := f.state("q", b.ID); s != StateBlocked {
		t.Fatalf("b while head delayed: %s", s)
	}
	f.takeNone("q")
	f.tick(time.Second)
	j := f.take1("q")
	if j.ID != a.ID {
		t.Fatalf("took %s, want head %s", j.ID, a.ID)
	}
	f.ack(j, AckRequest{})
	if s := f.state("q", b.ID); s != StateReady {
		t.Fatalf("b after head acked: %s", s)
	}
	// a dead head releases the key
	d := f.put("q", PutRequest{Key: "k2", Tries: u32(1)})
	e2 := f.put("q", PutRequest{Key: "k2"})
	f.take1("q") // b
	jd := f.take1("q")
	if jd.ID != d.ID {
		t.Fatalf("want d, got %s", jd.ID)
	}
	f.e.Nack(f.now, "default", "q", d.ID, NackRequest{Receipt: jd.Receipt})
	if f.state("q", d.ID) != StateDead || f.state("q", e2.ID) != StateReady {
		t.Fatal("dead head should release the next job of the key")
	}
}

func TestStrictKeyDelayedHeadHoldsRipeLaterJob(t *testing.T) {
	f := newFixture(t)
	a := f.put("q", PutRequest{Key: "k", Delay: dur(time.Minute)})
	b := f.put("q", PutRequest{Key: "k"})
	if a.State != StateDelayed || b.State != StateBlocked {
		t.Fatalf("a %s b %s", a.State, b.State)
	}
	f.takeNone("q")
	f.tick(time.Minute)
	if j := f.take1("q"); j.ID != a.ID {
		t.Fatalf("got %s", j.ID)
	}
}

func TestExclusiveKeyMode(t *testing.T) {
	f := newFixture(t)
	mode := KeyExclusive
	if _, _, err := f.e.PutQueue(f.now, "default", "q", QueuePatch{KeyMode: &mode}); err != nil {
		t.Fatal(err)
	}
	a := f.put("q", PutRequest{Key: "k", Delay: dur(time.Minute)})
	b := f.put("q", PutRequest{Key: "k", Priority: u32(5)})
	c := f.put("q", PutRequest{Key: "k", Priority: u32(1)})
	_ = a
	// a delayed head does not hold back ripe later jobs; best one goes first
	got := f.take(10, "q")
	if len(got) != 1 || got[0].ID != c.ID {
		t.Fatalf("took %v", got)
	}
	if s := f.state("q", b.ID); s != StateBlocked {
		t.Fatalf("b while c in flight: %s", s)
	}
	f.ack(got[0], AckRequest{})
	if j := f.take1("q"); j.ID != b.ID {
		t.Fatalf("got %s want b", j.ID)
	}
}

func TestDedupClientIDAndIdempotencyWindow(t *testing.T) {
	f := newFixture(t)
	a := f.put("q", PutRequest{ID: "order-42"})
	d := f.put("q", PutRequest{ID: "order-42", Delay: dur(time.Hour)})
	if !d.Duplicate || d.ID != "order-42" || d.State != a.State {
		t.Fatalf("dup %+v", d)
	}
	if c := f.counts("q"); c.Total() != 1 {
		t.Fatalf("counts %+v", c)
	}
	i1 := f.put("q", PutRequest{IdempotencyKey: "req-1"})
	i2 := f.put("q", PutRequest{IdempotencyKey: "req-1"})
	if !i2.Duplicate || i2.ID != i1.ID {
		t.Fatalf("idem dup %+v", i2)
	}
	// the key outlives the job within the window
	f.e.Cancel(f.now, "default", "q", i1.ID, "")
	i3 := f.put("q", PutRequest{IdempotencyKey: "req-1"})
	if !i3.Duplicate || i3.ID != i1.ID || i3.State != StateGone {
		t.Fatalf("idem after delete %+v", i3)
	}
	f.tick(15 * time.Minute)
	i4 := f.put("q", PutRequest{IdempotencyKey: "req-1"})
	if i4.Duplicate {
		t.Fatal("idempotency key outlived its window")
	}
	// a client id is free again once its job is gone
	if err := f.e.Cancel(f.now, "default", "q", "order-42", ""); err != nil {
		t.Fatal(err)
	}
	if r := f.put("q", PutRequest{ID: "order-42"}); r.Duplicate {
		t.Fatal("client id should be reusable after delete")
	}
}

func TestBatchAtomicAndInBatchDuplicates(t *testing.T) {
	f := newFixture(t)
	reqs := []PutRequest{{Payload: []byte("1")}, {Payload: []byte("2"), Delay: dur(88000 * time.Hour)}}
	_, err := f.e.PutBatch(f.now, "default", "q", reqs)
	wantCode(t, err, CodeBadRequest, "jobs[1].delay")
	if _, err := f.e.Queue(f.now, "default", "q"); CodeOf(err) != CodeQueueNotFound {
		t.Fatalf("failed batch must change nothing (not even create the queue): %v", err)
	}
	res, err := f.e.PutBatch(f.now, "default", "q", []PutRequest{
		{Payload: []byte("a"), ID: "x"}, {Payload: []byte("b"), ID: "x"}, {Payload: []byte("c")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || !res[1].Duplicate || res[1].ID != "x" || res[2].Duplicate {
		t.Fatalf("batch results %+v", res)
	}
	big := make([]PutRequest, 1001)
	_, err = f.e.PutBatch(f.now, "default", "q", big)
	wantCode(t, err, CodeBadRequest, "jobs")
}

func TestAckNextAtomicRescheduleCronResultReplyTo(t *testing.T) {
	f := newFixture(t)
	r := f.put("stage1", PutRequest{ReplyTo: "replies"})
	j := f.take1("stage1")
	// invalid next → the ack fails and nothing changes
	_, err := f.e.Ack(f.now, "default", "stage1", r.ID, AckRequest{Receipt: j.Receipt,
		Next: &NextPut{Queue: "stage2", Put: PutRequest{Payload: []byte("x"), Delay: dur(-time.Second)}}})
	wantCode(t, err, CodeBadRequest, "next.delay")
	if f.state("stage1", r.ID) != StateReserved {
		t.Fatal("failed ack changed the job")
	}
	res := f.ack(j, AckRequest{HasResult: true, Result: []byte(`{"ok":true}`), ResultJSON: true,
		Next: &NextPut{Queue: "stage2", Put: PutRequest{Payload: []byte("n")}}})
	if res.State != "deleted" || res.NextID == "" {
		t.Fatalf("ack %+v", res)
	}
	if f.state("stage2", res.NextID) != StateReady {
		t.Fatal("next job missing")
	}
	reply := f.take1("replies")
	if string(f.sink.blob(reply.Payload)) != `{"ok":true}` || reply.Tags["reply_for"] != r.ID {
		t.Fatalf("reply %+v", reply)
	}

	// reschedule keeps the id and resets attempt
	p := f.put("periodic", PutRequest{})
	jp := f.take1("periodic")
	res = f.ack(jp, AckRequest{Reschedule: &Reschedule{Delay: dur(time.Hour)}})
	pj := f.peek("periodic", p.ID)
	if res.State != "delayed" || pj.State != StateDelayed || pj.Attempt != 0 || !pj.ActivateAt.Equal(f.now.Add(time.Hour)) {
		t.Fatalf("reschedule %+v %+v", res, pj)
	}

	// cron: first activation at the next cron time, re-armed on ack
	c := f.put("cron", PutRequest{Cron: "*/5 * * * *"})
	if !c.ActivateAt.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("cron first activation %v", c.ActivateAt)
	}
	f.tick(5 * time.Minute)
	jc := f.take1("cron")
	f.ack(jc, AckRequest{})
	if pc := f.peek("cron", c.ID); !pc.ActivateAt.Equal(t0.Add(10*time.Minute)) || pc.State != StateDelayed {
		t.Fatalf("cron re-arm %+v", pc)
	}
	_, err = f.e.Put(f.now, "default", "cron", PutRequest{Cron: "nonsense"})
	wantCode(t, err, CodeBadRequest, "cron")

	// results retained
	ret := time.Hour
	f.e.PutQueue(f.now, "default", "rq", QueuePatch{RetainResults: &ret})
	rr := f.put("rq", PutRequest{})
	jr := f.take1("rq")
	if res := f.ack(jr, AckRequest{HasResult: true, Result: []byte(`42`), ResultJSON: true}); res.State != "completed" {
		t.Fatalf("retained ack %+v", res)
	}
	info, err := f.e.Result(f.now, "default", "rq", rr.ID)
	if err != nil || info.State != StateCompleted || string(f.sink.blob(info.Result)) != "42" {
		t.Fatalf("result %+v %v", info, err)
	}
	_, err = f.e.Update(f.now, "default", "rq", rr.ID, UpdateRequest{Priority: u32(1)})
	wantCode(t, err, CodeConflict, "")
	f.tick(time.Hour)
	if _, err := f.e.Result(f.now, "default", "rq", rr.ID); CodeOf(err) != CodeJobNotFound {
		t.Fatalf("retention over: %v", err)
	}
}

func TestPauseCancelFilters(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 6; i++ {
		f.put("q", PutRequest{Tags: map[string]string{"user_id": fmt.Sprint(i % 2)}, Key: fmt.Sprintf("k%d", i%3)})
	}
	f.e.SetPaused(f.now, "default", "q", true)
	f.takeNone("q")
	f.put("q", PutRequest{}) // paused queue accepts puts
	f.e.SetPaused(f.now, "default", "q", false)
	j := f.take1("q")
	_ = j
	_, err := f.e.CancelByFilter(f.now, "default", "q", Filter{})
	wantCode(t, err, CodeBadRequest, "filter")
	n, err := f.e.CancelByFilter(f.now, "default", "q", Filter{Tags: map[string]string{"user_id": "0"}})
	// 3 jobs have user_id=0, one of them (the first, k0) is reserved and spared
	if err != nil || n != 2 {
		t.Fatalf("cancel by tag %d %v", n, err)
	}
	n, _ = f.e.CancelByFilter(f.now, "default", "", Filter{HasKey: true, Key: "k1"})
	if n != 1 { // k1 jobs: #1 and #4, and #4 (user_id=0) is already gone
		t.Fatalf("cancel by key across ns: %d", n)
	}
	n, _ = f.e.CancelByFilter(f.now, "default", "q", Filter{States: []State{StateReserved}})
	if n != 1 {
		t.Fatalf("cancel reserved explicitly: %d", n)
	}
}

func TestListPaginationComplete(t *testing.T) {
	f := newFixture(t)
	want := map[string]bool{}
	for i := 0; i < 250; i++ {
		r := f.put("q", PutRequest{Priority: u32(uint32(i % 7)), Delay: dur(time.Duration(i%3) * time.Second)})
		want[r.ID] = true
	}
	for _, states := range [][]State{nil, {StateReady}, {StateDelayed}} {
		seen := map[string]bool{}
		cursor := ""
		pages := 0
		var prev *Job
		for {
			res, err := f.e.List(f.now, "default", "q", ListRequest{Filter: Filter{States: states}, Limit: 40, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for i := range res.Jobs {
				j := res.Jobs[i]
				if seen[j.ID] {
					t.Fatalf("%v: %s listed twice", states, j.ID)
				}
				seen[j.ID] = true
				if prev != nil && len(states) == 1 && states[0] == StateReady && prev.Priority > j.Priority {
					t.Fatalf("ready listing not in serving order")
				}
				if prev != nil && len(states) == 0 && prev.Seq > j.Seq {
					t.Fatalf("mixed listing not in enqueue order")
				}
				prev = &res.Jobs[i]
			}
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
		c := f.counts("q")
		total := map[string]uint64{"": c.Total(), "ready": c.Ready, "delayed": c.Delayed}
		key := ""
		if len(states) == 1 {
			key = states[0].String()
		}
		if uint64(len(seen)) != total[key] {
			t.Fatalf("%v: listed %d of %d", states, len(seen), total[key])
		}
	}
	_, err := f.e.List(f.now, "default", "q", ListRequest{Limit: 1001})
	wantCode(t, err, CodeBadRequest, "limit")
	_, err = f.e.List(f.now, "default", "q", ListRequest{Cursor: "garbage!"})
	wantCode(t, err, CodeBadRequest, "cursor")
}

func TestUpdateRules(t *testing.T) {
	f := newFixture(t)
	r := f.put("q", PutRequest{Tags: map[string]string{"a": "1"}})
	j, err := f.e.Update(f.now, "default", "q", r.ID, UpdateRequest{Delay: dur(time.Minute), Priority: u32(3), Tags: map[string]string{"b": "2"}, HasTags: true})
	if err != nil || j.State != StateDelayed || j.Priority != 3 || j.Tags["b"] != "2" || j.Tags["a"] != "" {
		t.Fatalf("update %+v %v", j, err)
	}
	f.tick(time.Minute)
	tj := f.take1("q")
	_, err = f.e.Update(f.now, "default", "q", r.ID, UpdateRequest{Priority: u32(1)})
	wantCode(t, err, CodeConflict, "")
	if _, err := f.e.Update(f.now, "default", "q", r.ID, UpdateRequest{Receipt: tj.Receipt, Priority: u32(1)}); err != nil {
		t.Fatal(err)
	}
	err = f.e.Cancel(f.now, "default", "q", r.ID, "")
	wantCode(t, err, CodeConflict, "")
	if err := f.e.Cancel(f.now, "default", "q", r.ID, tj.Receipt); err != nil {
		t.Fatal(err)
	}
}

func TestQueueConfigMergeMaxJobsPayload(t *testing.T) {
	f := newFixture(t)
	mj := uint64(2)
	info, created, err := f.e.PutQueue(f.now, "default", "q", QueuePatch{MaxJobs: &mj})
	if err != nil || !created || info.Config.DefaultTTR != 30*time.Second || info.Config.DefaultTries != 25 {
		t.Fatalf("create %+v %v %v", info, created, err)
	}
	ttr := time.Minute
	info, created, _ = f.e.PutQueue(f.now, "default", "q", QueuePatch{DefaultTTR: &ttr})
	if created || info.Config.MaxJobs != 2 || info.Config.DefaultTTR != time.Minute {
		t.Fatalf("merge %+v", info)
	}
	f.put("q", PutRequest{})
	f.put("q", PutRequest{})
	_, err = f.e.Put(f.now, "default", "q", PutRequest{Payload: []byte("x")})
	wantCode(t, err, CodeQueueFull, "")
	_, err = f.e.Put(f.now, "default", "big", PutRequest{Payload: make([]byte, 1<<20+1)})
	wantCode(t, err, CodePayloadTooLarge, "payload")
	bad := 2.0
	_, _, err = f.e.PutQueue(f.now, "default", "q", QueuePatch{BackoffJitter: &bad})
	wantCode(t, err, CodeBadRequest, "backoff.jitter")
	if n, _ := f.e.PurgeQueue(f.now, "default", "q"); n != 2 {
		t.Fatalf("purge %d", n)
	}
	f.e.CreateNamespace(f.now, "strict", NamespaceConfig{AutoCreateQueues: false})
	_, err = f.e.Put(f.now, "strict", "q", PutRequest{Payload: []byte("x")})
	wantCode(t, err, CodeQueueNotFound, "")
	_, err = f.e.Put(f.now, "nons", "q", PutRequest{Payload: []byte("x")})
	wantCode(t, err, CodeNamespaceNotFound, "")
}

func TestSinkFailureChangesNothing(t *testing.T) {
	f := newFixture(t)
	r := f.put("q", PutRequest{})
	f.sink.fail = fmt.Errorf("disk on fire")
	if _, err := f.e.Put(f.now, "default", "q", PutRequest{Payload: []byte("x")}); err == nil {
		t.Fatal("want error")
	}
	if jobs, err := f.e.Take(f.now, "default", TakeRequest{Queues: []string{"q"}}); err == nil || len(jobs) != 0 {
		t.Fatal("take must fail when the log does")
	}
	f.sink.fail = nil
	if c := f.counts("q"); c.Ready != 1 || c.Total() != 1 {
		t.Fatalf("counts %+v", c)
	}
	if j := f.take1("q"); j.ID != r.ID || j.Attempt != 1 {
		t.Fatalf("%+v", j)
	}
}

package engine

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestNamesRefuseDots: "." and ".." pass the charset but no HTTP path can
// address them, so the one name rule refuses them for every protocol.
func TestNamesRefuseDots(t *testing.T) {
	for _, s := range []string{".", ".."} {
		if ValidQueueName(s) || ValidNamespaceName(s) || ValidJobID(s) {
			t.Errorf("%q accepted as a name", s)
		}
	}
	for _, s := range []string{"...", ".a", "a..b", "x.y"} {
		if !ValidQueueName(s) {
			t.Errorf("%q refused", s)
		}
	}
	f := newFixture(t)
	_, err := f.e.Put(f.now, "default", "..", PutRequest{Payload: []byte("1")})
	wantCode(t, err, CodeBadRequest, "queue")
	_, err = f.e.Put(f.now, "default", "q", PutRequest{Payload: []byte("1"), ID: "."})
	wantCode(t, err, CodeBadRequest, "id")
}

// TestTakeQueueCap: the queues of one take are capped, and a name listed
// many times is drawn from once.
func TestTakeQueueCap(t *testing.T) {
	f := newFixture(t)
	names := make([]string, MaxTakeQueues+1)
	for i := range names {
		names[i] = fmt.Sprintf("q%d", i)
	}
	_, err := f.e.Take(f.now, "default", TakeRequest{Queues: names, Max: 1})
	wantCode(t, err, CodeBadRequest, "queues")
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(MaxTakeQueues)) {
		t.Fatalf("error %v does not name the limit", err)
	}

	f.put("a", PutRequest{})
	f.put("b", PutRequest{})
	dup := make([]string, MaxTakeQueues)
	for i := range dup {
		dup[i] = "a"
	}
	dup[len(dup)-1] = "b"
	jobs, err := f.e.Take(f.now, "default", TakeRequest{Queues: dup, Max: 10})
	if err != nil || len(jobs) != 2 || jobs[0].Queue != "a" || jobs[1].Queue != "b" {
		t.Fatalf("take over repeated names: %v %+v", err, jobs)
	}
}

// TestFilterStatesCap: a filter longer than the number of states only
// repeats them; it is refused rather than walked.
func TestFilterStatesCap(t *testing.T) {
	f := newFixture(t)
	f.put("q", PutRequest{})
	states := make([]State, MaxFilterStates+1)
	for i := range states {
		states[i] = StateReady
	}
	_, err := f.e.List(f.now, "default", "q", ListRequest{Filter: Filter{States: states}})
	wantCode(t, err, CodeBadRequest, "state")
	_, err = f.e.CancelByFilter(f.now, "default", "q", Filter{States: states})
	wantCode(t, err, CodeBadRequest, "state")
	_, err = f.e.CancelByFilter(f.now, "default", "q", Filter{HasKey: true, Key: strings.Repeat("k", MaxKeyLen+1)})
	wantCode(t, err, CodeBadRequest, "key")
}

// TestReceiptsUnpredictable: a worker that holds one receipt must not be
// able to derive the receipt of the job taken next (they used to be
// base36(seq)-base36(counter)). Receipts survive replay, and a stale or
// derived receipt is a conflict.
func TestReceiptsUnpredictable(t *testing.T) {
	f := newFixture(t)
	f.put("q", PutRequest{})
	f.put("q", PutRequest{})
	a := f.take1("q")
	b := f.take1("q")
	_, nonceA, ok := strings.Cut(a.Receipt, "-")
	if !ok {
		t.Fatalf("receipt %q", a.Receipt)
	}
	na, err := strconv.ParseUint(nonceA, 36, 64)
	if err != nil {
		t.Fatalf("receipt %q: %v", a.Receipt, err)
	}
	for d := uint64(1); d <= 3; d++ {
		guess := strconv.FormatUint(b.Seq, 36) + "-" + strconv.FormatUint(na+d, 36)
		if guess == b.Receipt {
			t.Fatalf("receipt %q derived from %q", b.Receipt, a.Receipt)
		}
		_, err := f.e.Ack(f.now, "default", "q", b.ID, AckRequest{Receipt: guess})
		wantCode(t, err, CodeConflict, "")
	}
	if len(b.Receipt) > 27 {
		t.Fatalf("receipt %q is longer than 27 bytes", b.Receipt)
	}
	// The receipt is in the record: a replayed engine accepts it.
	r := f.sink.replay(t, false)
	if _, err := r.Ack(f.now, "default", "q", b.ID, AckRequest{Receipt: b.Receipt}); err != nil {
		t.Fatalf("ack after replay: %v", err)
	}
	// Taken again after expiry, the job gets a new receipt; the old one is stale.
	f.tick(2 * MaxTTR)
	c := f.take1("q")
	if c.ID != a.ID || c.Receipt == a.Receipt {
		t.Fatalf("retake %+v", c)
	}
	_, err = f.e.Ack(f.now, "default", "q", a.ID, AckRequest{Receipt: a.Receipt})
	wantCode(t, err, CodeConflict, "")
}

// TestQueuePage pages through queues by name with a cursor.
func TestQueuePage(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{"d", "b", "a", "c", "e"} {
		f.put(q, PutRequest{})
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		p, err := f.e.QueuePage(f.now, "default", QueueListRequest{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range p.Queues {
			got = append(got, q.Name)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if strings.Join(got, ",") != "a,b,c,d,e" {
		t.Fatalf("pages gave %v", got)
	}
	all, err := f.e.QueuePage(f.now, "default", QueueListRequest{})
	if err != nil || len(all.Queues) != 5 || all.NextCursor != "" {
		t.Fatalf("default page: %v %+v", err, all)
	}
	_, err = f.e.QueuePage(f.now, "default", QueueListRequest{Limit: MaxListLimit + 1})
	wantCode(t, err, CodeBadRequest, "limit")
	_, err = f.e.QueuePage(f.now, "default", QueueListRequest{Cursor: "no spaces"})
	wantCode(t, err, CodeBadRequest, "cursor")
}

package lmstfy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRoutesUnknown: lmstfy's router answers an unknown path and a known
// path with the wrong method alike: 404 {"error":"api not found"}.
func TestRoutesUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/"},
		{"GET", "/api/ns"},
		{"POST", "/api/ns/q"},
		{"PATCH", "/api/ns/q"},
		{"HEAD", "/api/ns/q/size"},
		{"GET", "/api/ns/q/bulk"},
		{"DELETE", "/api/ns/q/peek"},
		{"PUT", "/api/ns/q/size"},
		{"POST", "/api/ns/q/deadletter"},
		{"GET", "/api/ns/q/job"},
		{"GET", "/api/ns/q/nope"},
		{"GET", "/api/ns/q/job/x/y"},
		{"GET", "/api/ns/q/deadletter/nope"},
		{"GET", "/api/ns/q/a/b/c"},
	} {
		r := e.api(c.method, c.path, nil, nil)
		want := errBody("api not found")
		if c.method == "HEAD" {
			want = "" // no body on HEAD
		}
		expect(t, c.method+" "+c.path, r, 404, want)
	}
	// A trailing slash is redirected to the route without it, as gin does:
	// 301 for GET, 307 for the rest, the query kept.
	r := e.api("GET", "/api/ns/q/size/?x=1", nil, nil)
	if r.status != 301 || r.header.Get("Location") != "/api/ns/q/size?x=1" {
		t.Errorf("GET with a trailing slash: %d Location %q", r.status, r.header.Get("Location"))
	}
	r = e.api("PUT", "/api/ns/q/", nil, []byte("x"))
	if r.status != 307 || r.header.Get("Location") != "/api/ns/q" {
		t.Errorf("PUT with a trailing slash: %d Location %q", r.status, r.header.Get("Location"))
	}
}

// TestNames: lmstfy's name rules and messages, on every kind of route, and
// before the token check.
func TestNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.newToken("ns", "", nil) // tokens now required: names are still checked first
	long65, long201 := strings.Repeat("n", 65), strings.Repeat("q", 201)
	cases := []struct{ method, path, msg string }{
		{"PUT", "/api/ns/_q", "queue name contains forbidden characters"},
		{"PUT", "/api/ns/q.x", "queue name contains forbidden characters"},
		{"PUT", "/api/n.s/q", "namespace name contains forbidden characters"},
		{"PUT", "/api/ns/q,r", "queue name contains forbidden characters"},
		{"PUT", "/api/" + long65 + "/q", "namespace or queue name too long"},
		{"PUT", "/api/ns/" + long201, "namespace or queue name too long"},
		{"GET", "/api/ns/_q/size", "queue name contains forbidden characters"},
		{"GET", "/api/n%20s/q/deadletter/size", "namespace name contains forbidden characters"},
		{"DELETE", "/api/ns/q%21/job/x", "queue name contains forbidden characters"},
		{"GET", "/api/ns/q.x,r", "queue name contains forbidden characters"},
		{"GET", "/api/n.s/q", "namespace name contains forbidden characters"},
		{"GET", "/api/ns/q," + long201, "namespace or queue name too long"},
	}
	for _, c := range cases {
		expect(t, c.method+" "+c.path, e.api(c.method, c.path, nil, []byte("x")), 400, errBody(c.msg))
	}
	// 64 and 200 bytes are fine; an empty entry of a consume list is dropped,
	// and a list of nothing is refused.
	tok := tokenHdr(e.newToken(strings.Repeat("n", 64), "", nil))
	e.publish(strings.Repeat("n", 64), long201[:200], "", tok, "x")
	if j := e.consume(strings.Repeat("n", 64), ","+long201[:200]+",", "", tok); j == nil || string(j.Data) != "x" {
		t.Errorf("consume of a 200-byte queue name: %+v", j)
	}
	expect(t, "consume of \",\"", e.api("GET", "/api/"+strings.Repeat("n", 64)+"/,,", tok, nil), 400, errBody("invalid queue name(s)"))
	// A consume may name a queue starting with "_" (lmstfy's multi-queue rule
	// allows it); nothing can be published there.
	if j := e.consume(strings.Repeat("n", 64), "_x", "", tok); j != nil {
		t.Errorf("consume of _x: %+v", j)
	}
}

// TestPublishDefaults: delay 0, ttl 86400, tries 1; the exact answer.
func TestPublishDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fake: true})
	r := e.api("PUT", "/api/ns/q", nil, []byte("hello"))
	var pub struct {
		JobID string `json:"job_id"`
	}
	if r.status != 201 || json.Unmarshal(r.raw, &pub) != nil || !ulidRe.MatchString(pub.JobID) ||
		string(r.raw) != `{"job_id":"`+pub.JobID+`","msg":"published"}` {
		t.Fatalf("publish: %d %s", r.status, r.raw)
	}
	// Ready at once (delay 0), one try, 86400 s to live.
	r = e.api("GET", "/api/ns/q/job/"+pub.JobID, nil, nil)
	want := `{"attributes":null,"data":"aGVsbG8=","elapsed_ms":0,"job_id":"` + pub.JobID +
		`","namespace":"ns","queue":"q","remain_tries":1,"ttl":86400}`
	expect(t, "peek job", r, 200, want)
	if n := e.size("ns", "q", "/size"); n != 1 {
		t.Errorf("size %d, want 1", n)
	}
	e.clock.advance(1500 * time.Millisecond)
	r = e.api("GET", "/api/ns/q", nil, nil)
	want = `{"attributes":null,"data":"aGVsbG8=","elapsed_ms":1500,"job_id":"` + pub.JobID +
		`","msg":"new job","namespace":"ns","queue":"q","remain_tries":0,"ttl":86399}`
	expect(t, "consume", r, 200, want)
	// ttl rounds to the nearest second like Redis: 86398.5 s left → 86399.
	if got := e.api("GET", "/api/ns/q/job/"+pub.JobID, nil, nil).json(t)["ttl"]; got != 86399.0 {
		t.Errorf("peek of the reserved job: ttl %v, want 86399", got)
	}
	// The TTL ends the job exactly at 86400 s.
	e.clock.advance(86400*time.Second - 1500*time.Millisecond - time.Millisecond)
	expect(t, "peek just before the TTL", e.api("GET", "/api/ns/q/job/"+pub.JobID, nil, nil), 200, "")
	e.ack("ns", "q", pub.JobID, nil)
	expect(t, "peek after ack", e.api("GET", "/api/ns/q/job/"+pub.JobID, nil, nil), 404, errBody("job not found"))
}

// TestPublishParams: every parameter error, in lmstfy's order, and the
// values that work.
func TestPublishParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fake: true})
	for _, c := range []struct{ query, msg string }{
		{"?delay=-1", "invalid delay"},
		{"?delay=abc", "invalid delay"},
		{"?delay=", "invalid delay"},
		{"?delay", "invalid delay"},
		{"?delay=+1", "invalid delay"},
		{"?delay=4294967296", "invalid delay"},
		{"?delay=315360001&ttl=0", "invalid delay"}, // beyond chronoq's ten years
		{"?ttl=-5", "invalid ttl"},
		{"?ttl=1.5", "invalid ttl"},
		{"?ttl=315360001", "invalid ttl"},
		{"?delay=10&ttl=9", "ttl is shorter than delay"},
		{"?delay=x&ttl=y&tries=0", "invalid delay"},
		{"?ttl=y&tries=0", "invalid ttl"},
		{"?tries=65536", "invalid tries"},
		{"?tries=-1", "invalid tries"},
		{"?tries=0", "tries shouldn't be zero"},
		{"?delay=1&delay=x", ""}, // the first value counts
	} {
		r := e.api("PUT", "/api/ns/q"+c.query, nil, []byte("x"))
		if c.msg == "" {
			expect(t, "publish"+c.query, r, 201, "")
			continue
		}
		expect(t, "publish"+c.query, r, 400, errBody(c.msg))
	}

	// ttl 0: never expires, shown as 0.
	id := e.publish("ns", "forever", "?ttl=0&tries=65535", nil, "x")
	j := e.api("GET", "/api/ns/forever/job/"+id, nil, nil).json(t)
	if j["ttl"] != 0.0 || j["remain_tries"] != 65535.0 {
		t.Errorf("ttl=0 tries=65535: %v", j)
	}
	// A delayed job is not ready before its delay, and is at it.
	id = e.publish("ns", "later", "?delay=30&ttl=40&tries=3", nil, "x")
	if e.size("ns", "later", "/size") != 0 || e.consume("ns", "later", "", nil) != nil {
		t.Errorf("delayed job ready at once")
	}
	expect(t, "peek of a queue with only a delayed job", e.api("GET", "/api/ns/later/peek", nil, nil), 404, errBody("the queue is empty"))
	e.clock.advance(30*time.Second - time.Millisecond)
	if e.consume("ns", "later", "", nil) != nil {
		t.Errorf("delayed job ready 1 ms early")
	}
	e.clock.advance(time.Millisecond)
	got := e.consume("ns", "later", "", nil)
	if got == nil || got.ID != id || got.RemainTries != 2 || got.TTL != 10 || got.ElapsedMS != 30000 {
		t.Errorf("delayed job at its delay: %+v", got)
	}
	// ttl == delay is accepted (lmstfy takes it too); the job expires as it
	// becomes ready.
	id = e.publish("ns", "doomed", "?delay=5&ttl=5", nil, "x")
	e.clock.advance(5 * time.Second)
	expect(t, "peek of a job whose ttl equals its delay, at the delay", e.api("GET", "/api/ns/doomed/job/"+id, nil, nil), 200, "")
	e.clock.advance(time.Millisecond)
	expect(t, "... 1 ms later", e.api("GET", "/api/ns/doomed/job/"+id, nil, nil), 404, errBody("job not found"))
}

// TestPublishBody: the body is the job's bytes, up to 1 MiB.
func TestPublishBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	bin := []byte{0, 1, 2, 0xff, '"', '\n'}
	e.publish("ns", "q", "", nil, string(bin))
	e.publish("ns", "q", "", nil, "")
	if j := e.consume("ns", "q", "", nil); j == nil || !bytes.Equal(j.Data, bin) {
		t.Errorf("binary body: %+v", j)
	}
	r := e.api("GET", "/api/ns/q", nil, nil)
	if !bytes.Contains(r.raw, []byte(`"data":""`)) {
		t.Errorf("empty body: %s", r.raw)
	}
	big := bytes.Repeat([]byte("a"), 1<<20)
	e.publish("ns", "big", "", nil, string(big))
	expect(t, "publish of 1 MiB + 1", e.api("PUT", "/api/ns/big", nil, append(big, 'a')), 413, errBody("body too large"))
	if j := e.consume("ns", "big", "", nil); j == nil || !bytes.Equal(j.Data, big) {
		t.Errorf("1 MiB body did not come back whole")
	}
}

// TestAttributes: Job-Attr-* headers with Enable-Job-Version: YES.
func TestAttributes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	long := strings.Repeat("v", 300)
	hdr := map[string]string{
		"Enable-Job-Version":                   "yes",
		"Job-Attr-flag":                        "on",
		"job-attr-my-key":                      "x y",
		"Job-Attr-Long":                        long,
		"Job-Attr-Empty":                       "",
		"Job-Attr-" + strings.Repeat("k", 300): "kk",
	}
	e.publish("ns", "q", "", hdr, "a")
	j := e.consume("ns", "q", "", nil)
	want := map[string]string{"Flag": "on", "My-Key": "x y", "Long": long[:256], "K" + strings.Repeat("k", 255): "kk"}
	if j == nil || fmt.Sprint(j.Attributes) != fmt.Sprint(want) {
		t.Errorf("attributes %v, want %v", j, want)
	}
	// Without Enable-Job-Version the headers are ignored: attributes null.
	e.publish("ns", "q", "", map[string]string{"Job-Attr-Flag": "on"}, "b")
	r := e.api("GET", "/api/ns/q", nil, nil)
	if !bytes.HasPrefix(r.raw, []byte(`{"attributes":null,`)) {
		t.Errorf("attributes without Enable-Job-Version: %s", r.raw)
	}
	// 16 attributes are fine, 17 are not.
	hdr = map[string]string{"Enable-Job-Version": "YES"}
	for i := range 16 {
		hdr[fmt.Sprintf("Job-Attr-A%d", i)] = "v"
	}
	id := e.publish("ns", "q", "", hdr, "c")
	if got := e.api("GET", "/api/ns/q/job/"+id, nil, nil).json(t)["attributes"].(map[string]any); len(got) != 16 {
		t.Errorf("16 attributes: got %d", len(got))
	}
	hdr["Job-Attr-A16"] = "v"
	expect(t, "17 attributes", e.api("PUT", "/api/ns/q", hdr, []byte("d")), 400, errBody("too many attributes, cannot exceed 16"))
	expect(t, "17 attributes in bulk", e.api("PUT", "/api/ns/q/bulk", hdr, []byte(`[1]`)), 400, errBody("too many attributes, cannot exceed 16"))
	// Bulk: every job gets the attributes.
	e.api("DELETE", "/api/ns/q", nil, nil)
	r = e.api("PUT", "/api/ns/q/bulk", map[string]string{"Enable-Job-Version": "YES", "Job-Attr-Batch": "7"}, []byte(`[1,2]`))
	expect(t, "bulk with attributes", r, 201, "")
	for range 2 {
		if j := e.consume("ns", "q", "", nil); j == nil || j.Attributes["Batch"] != "7" {
			t.Errorf("bulk job attributes: %+v", j)
		}
	}
}

// TestBulk: a JSON array's elements become the jobs' bodies, ≤ 64 of them.
func TestBulk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fake: true})
	r := e.api("PUT", "/api/ns/q/bulk?delay=0&ttl=100&tries=2", nil, []byte(` [ {"a": 1} , "x", 3, null ] `))
	var res struct {
		JobIDs []string `json:"job_ids"`
		Msg    string   `json:"msg"`
	}
	if r.status != 201 || json.Unmarshal(r.raw, &res) != nil || len(res.JobIDs) != 4 || res.Msg != "published" ||
		!strings.HasPrefix(string(r.raw), `{"job_ids":[`) {
		t.Fatalf("bulk: %d %s", r.status, r.raw)
	}
	for i, want := range []string{`{"a": 1}`, `"x"`, `3`, `null`} {
		j := e.consume("ns", "q", "", nil)
		if j == nil || j.ID != res.JobIDs[i] || string(j.Data) != want || j.RemainTries != 1 || j.TTL != 100 {
			t.Errorf("bulk job %d: %+v, want data %s", i, j, want)
		}
	}
	items := func(n int) []byte { return []byte("[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]") }
	expect(t, "bulk of 64", e.api("PUT", "/api/ns/q/bulk", nil, items(64)), 201, "")
	for _, c := range []struct {
		query string
		body  []byte
		code  int
		msg   string
	}{
		{"", items(65), 400, "too many jobs"},
		{"", []byte(`[]`), 400, "no jobs"},
		{"", []byte(`null`), 400, "no jobs"},
		{"", []byte(`{"a":1}`), 400, "request body should be an array of objects"},
		{"", []byte(`[1,`), 400, "request body should be an array of objects"},
		{"", []byte(``), 400, "request body should be an array of objects"},
		{"", []byte(`["` + strings.Repeat("a", 1<<20) + `"]`), 413, "job too large"},
		{"?tries=0", items(1), 400, "tries shouldn't be zero"},
		{"?delay=5&ttl=4", items(1), 400, "ttl is shorter than delay"},
		{"?ttl=x", items(1), 400, "invalid ttl"},
	} {
		expect(t, "bulk "+c.query+" "+string(c.body[:min(len(c.body), 20)]), e.api("PUT", "/api/ns/q2/bulk"+c.query, nil, c.body), c.code, errBody(c.msg))
	}
	if n := e.size("ns", "q2", "/size"); n != 0 {
		t.Errorf("rejected bulks left %d jobs", n)
	}
	// A body over the server's request cap (16 MiB) is refused whole.
	huge := append([]byte(`["`), bytes.Repeat([]byte("a"), 16<<20)...)
	expect(t, "bulk over 16 MiB", e.api("PUT", "/api/ns/q2/bulk", nil, append(huge, `"]`...)), 413, errBody("body too large"))
}

// TestRepublish: PUT /job/:id publishes a new job and deletes the old one.
func TestRepublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fake: true})
	old := e.publish("ns", "q", "?tries=3", nil, "v1")
	j := e.consume("ns", "q", "?ttr=30", nil)
	if j == nil || j.ID != old {
		t.Fatalf("consume: %+v", j)
	}
	// A bad republish changes nothing (lmstfy would already have deleted the
	// old job).
	expect(t, "republish with tries=0", e.api("PUT", "/api/ns/q/job/"+old+"?tries=0", nil, []byte("v2")), 400, errBody("tries shouldn't be zero"))
	expect(t, "old job after a bad republish", e.api("GET", "/api/ns/q/job/"+old, nil, nil), 200, "")

	r := e.api("PUT", "/api/ns/q/job/"+old+"?delay=10&tries=2", nil, []byte("v2"))
	expect(t, "republish", r, 201, "")
	nid, _ := r.json(t)["job_id"].(string)
	if !ulidRe.MatchString(nid) || nid == old {
		t.Fatalf("republish answered id %q (old %s)", nid, old)
	}
	expect(t, "old job after republish", e.api("GET", "/api/ns/q/job/"+old, nil, nil), 404, errBody("job not found"))
	e.clock.advance(10 * time.Second)
	if j := e.consume("ns", "q", "", nil); j == nil || j.ID != nid || string(j.Data) != "v2" || j.RemainTries != 1 {
		t.Errorf("republished job: %+v", j)
	}
	// Republishing a job that is not reserved, or does not exist, works too.
	ready := e.publish("ns", "r", "", nil, "a")
	r = e.api("PUT", "/api/ns/r/job/"+ready, nil, []byte("b"))
	expect(t, "republish of a ready job", r, 201, "")
	if n := e.size("ns", "r", "/size"); n != 1 {
		t.Errorf("after republishing a ready job: size %d, want 1", n)
	}
	expect(t, "republish of an unknown id", e.api("PUT", "/api/ns/r/job/01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, []byte("c")), 201, "")
	if n := e.size("ns", "r", "/size"); n != 2 {
		t.Errorf("after republishing an unknown id: size %d, want 2", n)
	}
}

// TestAckAndPeek: DELETE is 204 for anything; peeks answer lmstfy's shapes.
func TestAckAndPeek(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	expect(t, "peek of a missing queue", e.api("GET", "/api/ns/q/peek", nil, nil), 404, errBody("the queue is empty"))
	expect(t, "peek of a missing job", e.api("GET", "/api/ns/q/job/nope", nil, nil), 404, errBody("job not found"))
	a := e.publish("ns", "q", "?tries=4", nil, "first")
	b := e.publish("ns", "q", "", nil, "second")
	r := e.api("GET", "/api/ns/q/peek", nil, nil)
	var pk job
	if r.status != 200 || json.Unmarshal(r.raw, &pk) != nil || pk.ID != a || string(pk.Data) != "first" || pk.RemainTries != 4 || pk.Msg != nil {
		t.Errorf("peek: %d %s", r.status, r.raw)
	}
	if e.size("ns", "q", "/size") != 2 {
		t.Errorf("peek consumed something")
	}
	// Ack of a ready job deletes it; of a reserved one too; of unknown
	// ids, queues and namespaces: 204.
	e.ack("ns", "q", a, nil)
	j := e.consume("ns", "q", "", nil)
	if j == nil || j.ID != b {
		t.Fatalf("consume after deleting the head: %+v", j)
	}
	e.ack("ns", "q", b, nil)
	e.ack("ns", "q", b, nil)
	e.ack("ns", "nope", b, nil)
	e.ack("nope", "q", "whatever", nil)
	if n := e.size("ns", "q", "/size"); n != 0 || e.consume("ns", "q", "", nil) != nil {
		t.Errorf("queue not empty after acks")
	}
	// Destroy: the queue and its jobs go; 204 also for a missing queue.
	e.publish("ns", "d", "", nil, "x")
	e.publish("ns", "d", "?delay=100", nil, "y")
	expect(t, "destroy", e.api("DELETE", "/api/ns/d", nil, nil), 204, "")
	expect(t, "destroy again", e.api("DELETE", "/api/ns/d", nil, nil), 204, "")
	if e.size("ns", "d", "/size") != 0 || e.consume("ns", "d", "", nil) != nil {
		t.Errorf("jobs left after destroy")
	}
	// Size of something that never existed is 0, with the names echoed.
	r = e.api("GET", "/api/never/seen/size", nil, nil)
	expect(t, "size of a missing queue", r, 200, `{"namespace":"never","queue":"seen","size":0}`)
}

// TestErrorMapping: chronoq's own refusals in lmstfy's shape: a queue a
// namespace does not auto-create, max_jobs (429, lmstfy's throttle status)
// and a queue's payload cap.
func TestErrorMapping(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	// A namespace whose queues are not auto-created refuses unknown queues.
	if _, _, err := e.b.CreateNamespace(t.Context(), "strict", noAutoCreate); err != nil {
		t.Fatal(err)
	}
	expect(t, "publish to a queue that does not exist", e.api("PUT", "/api/strict/q", nil, []byte("x")), 404, errBody("queue not found"))
	if _, _, err := e.b.PutQueue(t.Context(), "strict", "small", smallQueue); err != nil {
		t.Fatal(err)
	}
	e.publish("strict", "small", "", nil, "x")
	expect(t, "publish to a full queue", e.api("PUT", "/api/strict/small", nil, []byte("y")), 429, errBody("queue is full"))
	if _, _, err := e.b.PutQueue(t.Context(), "strict", "tiny", tinyPayload); err != nil {
		t.Fatal(err)
	}
	expect(t, "payload over the queue's cap", e.api("PUT", "/api/strict/tiny", nil, []byte("0123456789")), 413, errBody("body too large"))
	expect(t, "bulk payload over the queue's cap", e.api("PUT", "/api/strict/tiny/bulk", nil, []byte(`["0123456789"]`)), 413, errBody("job too large"))
	// Content type of every JSON answer.
	r := e.api("GET", "/api/strict/tiny/size", nil, nil)
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
}

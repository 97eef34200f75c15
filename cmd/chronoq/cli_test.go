package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/chronoq/chronoq/client"
)

// cliFake is an httptest server with canned answers per "METHOD path"; it
// records the requests.
type cliFake struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []cliReq
	answers map[string]func(r cliReq) (int, string)
}

type cliReq struct {
	method, path string
	query        url.Values
	body         []byte
	auth         string
}

func newCLIFake(t *testing.T, answers map[string]func(r cliReq) (int, string)) *cliFake {
	f := &cliFake{answers: answers}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := cliReq{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.Query(), body: body, auth: r.Header.Get("Authorization")}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		a, ok := answers[r.Method+" "+req.path]
		if !ok {
			w.WriteHeader(404)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no route for `+r.Method+" "+req.path+`"}}`)
			return
		}
		st, out := a(req)
		w.WriteHeader(st)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *cliFake) last(t *testing.T) cliReq {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("no request reached the fake server")
	}
	return f.reqs[len(f.reqs)-1]
}

func (f *cliFake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func fixed(status int, body string) func(cliReq) (int, string) {
	return func(cliReq) (int, string) { return status, body }
}

// runCLI runs one verb with stdin and returns what it printed.
func runCLI(t *testing.T, stdin string, verb string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	fn, ok := cliVerbs()[verb]
	if !ok {
		t.Fatalf("no verb %q", verb)
	}
	var out, errb bytes.Buffer
	oldOut, oldErr, oldIn := cliOut, cliErr, cliIn
	cliOut, cliErr, cliIn = &out, &errb, strings.NewReader(stdin)
	defer func() { cliOut, cliErr, cliIn = oldOut, oldErr, oldIn }()
	err = fn(args)
	return out.String(), errb.String(), err
}

func jsonSame(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got  %s\n want %s", what, got, want)
	}
}

// cliIsolate clears the CHRONOQ_* variables a developer may have set.
func cliIsolate(t *testing.T) {
	for _, k := range []string{"CHRONOQ_URL", "CHRONOQ_ADMIN_URL", "CHRONOQ_TOKEN", "CHRONOQ_NS"} {
		t.Setenv(k, "")
	}
}

const cliQueueA = `{"namespace":"default","name":"emails","config":{"default_ttr":"30s","default_tries":25,"default_ttl":"0s",
 "default_priority":1024,"max_jobs":0,"max_payload":1048576,"dedup_window":"15m0s","retain_results":"0s","key_mode":"strict",
 "backoff":{"initial":"1s","max":"10m0s","multiplier":2,"jitter":0.1}},"paused":false,
 "counts":{"delayed":3,"ready":1200,"blocked":0,"reserved":4,"dead":17,"completed":0},"oldest_ready_age":"2.5s"}`

const cliQueueB = `{"namespace":"default","name":"audit","config":{"default_ttr":"30s","default_tries":25,"default_ttl":"0s",
 "default_priority":1024,"max_jobs":0,"max_payload":1048576,"dedup_window":"15m0s","retain_results":"1h0m0s","key_mode":"strict",
 "backoff":{"initial":"1s","max":"10m0s","multiplier":2,"jitter":0.1}},"paused":true,
 "counts":{"delayed":0,"ready":7,"blocked":1,"reserved":0,"dead":0,"completed":99},"oldest_ready_age":"1h0m0s"}`

func TestCLIStatsTable(t *testing.T) {
	cliIsolate(t)
	f := newCLIFake(t, map[string]func(cliReq) (int, string){
		"GET /v1/ns/default/queues": fixed(200, `{"queues":[`+cliQueueA+`,`+cliQueueB+`]}`),
	})
	out, _, err := runCLI(t, "", "stats", "--url", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"QUEUE   STATE   READY  DELAYED  BLOCKED  RESERVED  DEAD  COMPLETED  OLDEST_READY\n" +
		"audit   paused  7      0        1        0         0     99         1h0m0s\n" +
		"emails  active  1200   3        0        4         17    0          2.5s\n"
	if out != want {
		t.Errorf("stats table:\n%s\nwant:\n%s", out, want)
	}
}

func TestCLIStatsJSON(t *testing.T) {
	cliIsolate(t)
	f := newCLIFake(t, map[string]func(cliReq) (int, string){
		"GET /v1/ns/default/queues": fixed(200, `{"queues":[`+cliQueueA+`,`+cliQueueB+`]}`),
	})
	out, _, err := runCLI(t, "", "stats", "--json", "--url", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Same objects as the server's, sorted by name.
	jsonSame(t, "stats --json", []byte(out), `{"queues":[`+cliQueueB+`,`+cliQueueA+`]}`)
	if strings.Count(out, "\n") != 1 {
		t.Errorf("stats --json is not one line: %q", out)
	}

	// Named queues, with the address, namespace and token from the
	// environment.
	f2 := newCLIFake(t, map[string]func(cliReq) (int, string){
		"GET /v1/ns/billing/queues/emails": fixed(200, cliQueueA),
	})
	t.Setenv("CHRONOQ_URL", f2.srv.URL)
	t.Setenv("CHRONOQ_NS", "billing")
	t.Setenv("CHRONOQ_TOKEN", "secret")
	out, _, err = runCLI(t, "", "stats", "emails", "--json")
	if err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "stats emails --json", []byte(out), `{"queues":[`+cliQueueA+`]}`)
	if r := f2.last(t); r.auth != "Bearer secret" {
		t.Errorf("Authorization %q", r.auth)
	}
}

func TestCLIPut(t *testing.T) {
	cliIsolate(t)
	status := 201
	f := newCLIFake(t, map[string]func(cliReq) (int, string){
		"POST /v1/ns/default/queues/emails/jobs": func(cliReq) (int, string) {
			return status, `{"id":"01JD3W0Q8Z6M1N2P3Q4R5S6T7V","state":"delayed","activate_at":"2026-11-22T10:00:10.000Z","duplicate":` +
				map[bool]string{true: "true", false: "false"}[status == 200] + `}`
		},
	})
	file := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(file, []byte("{\"from\": \"file\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string // body without idempotency_key
	}{
		{"json arg and flags after it", "", []string{"emails", `{"to": "a@b.c"}`, "--delay", "10s", "--priority", "0", "--tries", "0",
			"--tag", "user_id=42", "--tag", "vip=yes", "--key", "user:42", "--ttl", "1.5", "--id", "order-42", "--cron", "@hourly", "--reply-to", "results"},
			`{"payload":{"to":"a@b.c"},"delay":"10s","priority":0,"tries":0,"tags":{"user_id":"42","vip":"yes"},"key":"user:42",
			  "ttl":"1.5s","id":"order-42","cron":"@hourly","reply_to":"results"}`},
		{"text is sent as bytes", "", []string{"emails", "hello world"}, `{"payload_base64":"aGVsbG8gd29ybGQ="}`},
		{"number", "", []string{"emails", "42"}, `{"payload":42}`},
		{"binary flag", "", []string{"--binary", "emails", "42"}, `{"payload_base64":"NDI="}`},
		{"file", "", []string{"emails", "@" + file, "--at", "2027-01-01T00:00:00Z"}, `{"payload":{"from":"file"},"at":"2027-01-01T00:00:00Z"}`},
		{"stdin", "[1, 2]\n", []string{"emails", "-", "--ttr", "1m"}, `{"payload":[1,2],"ttr":"1m0s"}`},
		{"dash payload after --", "", []string{"emails", "--", "-5"}, `{"payload":-5}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// --url first: after "--" everything is positional.
			out, _, err := runCLI(t, tc.stdin, "put", append([]string{"--url", f.srv.URL}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if out != "01JD3W0Q8Z6M1N2P3Q4R5S6T7V\n" {
				t.Errorf("output %q, want the id", out)
			}
			m := map[string]any{}
			_ = json.Unmarshal(f.last(t).body, &m)
			if k, _ := m["idempotency_key"].(string); k == "" {
				t.Errorf("no idempotency key in %s", f.last(t).body)
			}
			delete(m, "idempotency_key")
			b, _ := json.Marshal(m)
			jsonSame(t, "put body", b, tc.want)
		})
	}

	status = 200
	out, errOut, err := runCLI(t, "", "put", "emails", "1", "--json", "--url", f.srv.URL, "--idempotency-key", "k1")
	if err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "put --json", []byte(out), `{"id":"01JD3W0Q8Z6M1N2P3Q4R5S6T7V","state":"delayed","activate_at":"2026-11-22T10:00:10.000Z","duplicate":true}`)
	if errOut != "" {
		t.Errorf("--json also wrote to stderr: %q", errOut)
	}
	if !strings.Contains(string(f.last(t).body), `"idempotency_key":"k1"`) {
		t.Errorf("body %s lacks the given idempotency key", f.last(t).body)
	}

	n := f.count()
	for _, args := range [][]string{
		{"emails"},                      // no payload
		{"emails", "1", "--delay", "x"}, // bad duration
		{"emails", "1", "--priority", "-1"},
		{"emails", "1", "--tag", "novalue"},
		{"emails", "@/does/not/exist"},
		{"emails", "1", "--delay", "1s", "--at", "2027-01-01T00:00:00Z"},
	} {
		if _, _, err := runCLI(t, "", "put", append(args, "--url", f.srv.URL)...); err == nil {
			t.Errorf("put %v: no error", args)
		}
	}
	if f.count() != n {
		t.Error("an invalid put reached the server")
	}
}

func TestCLIServerErrors(t *testing.T) {
	cliIsolate(t)
	f := newCLIFake(t, map[string]func(cliReq) (int, string){
		"POST /v1/ns/default/queues/emails/jobs/J1/ack": fixed(409, `{"error":{"code":"conflict","message":"receipt does not match the current reservation"}}`),
		"POST /v1/ns/default/queues/emails/jobs":        fixed(400, `{"error":{"code":"bad_request","message":"delay: must be at most 87600h0m0s"}}`),
	})
	_, _, err := runCLI(t, "", "ack", "emails", "J1", "WRONG", "--url", f.srv.URL)
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("ack with a wrong receipt: %v, want conflict", err)
	}
	if got := err.Error(); got != "conflict: receipt does not match the current reservation" {
		t.Errorf("error text %q", got)
	}
	jsonSame(t, "ack body", f.last(t).body, `{"receipt":"WRONG"}`)
	_, _, err = runCLI(t, "", "put", "emails", "1", "--delay", "100000h", "--url", f.srv.URL)
	if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "bad_request: delay:") {
		t.Errorf("put: %v", err)
	}
	_, _, err = runCLI(t, "", "peek", "emails", "--url", f.srv.URL)
	if err == nil || !strings.Contains(err.Error(), "usage: chronoq peek QUEUE ID") {
		t.Errorf("peek with a missing id: %v", err)
	}
	_, _, err = runCLI(t, "", "peek", "emails", "x", "--bogus", "--url", f.srv.URL)
	if err == nil {
		t.Error("unknown flag: no error")
	}
}

func TestCLIHelp(t *testing.T) {
	cliIsolate(t)
	t.Setenv("CHRONOQ_TOKEN", "do-not-print-me")
	for verb := range cliVerbs() {
		t.Run(verb, func(t *testing.T) {
			out, _, err := runCLI(t, "", verb, "--help")
			if err != nil {
				t.Fatalf("%s --help: %v", verb, err)
			}
			if !strings.HasPrefix(out, "Usage: chronoq "+verb) || !strings.Contains(out, "Example:\n  chronoq "+verb) {
				t.Errorf("%s --help lacks the usage line or an example:\n%s", verb, out)
			}
			if strings.Contains(out, "do-not-print-me") {
				t.Errorf("%s --help shows the token", verb)
			}
			if !strings.Contains(cliUsage, "chronoq "+verb+" ") {
				t.Errorf("cliUsage does not list %s", verb)
			}
		})
	}
	for _, sub := range [][]string{{"queue", "create"}, {"queue", "get"}, {"queue", "purge"}, {"ns", "create"}, {"ns", "list"}, {"token", "create"}, {"token", "revoke"}} {
		out, _, err := runCLI(t, "", sub[0], sub[1], "--help")
		if err != nil || !strings.HasPrefix(out, "Usage: chronoq "+sub[0]+" "+sub[1]) || !strings.Contains(out, "Example:") {
			t.Errorf("%v --help: %v\n%s", sub, err, out)
		}
	}
}

const cliJob = `{"id":"01JD3W0Q8Z6M1N2P3Q4R5S6T7V","namespace":"default","queue":"emails","state":"reserved",
  "payload":{"to":"a@b.c"},"priority":1024,"created_at":"2026-11-22T10:00:00.000Z",
  "activate_at":"2026-11-22T10:00:00.000Z","ttr":"30s","tries":25,"attempt":1,
  "receipt":"01JD3W1A2B3C4D5E6F7G8H9J0K","reserved_until":"2026-11-22T10:00:30.000Z"}`

func TestCLITakeAckNack(t *testing.T) {
	cliIsolate(t)
	f := newCLIFake(t, map[string]func(cliReq) (int, string){
		"POST /v1/ns/default/queues/emails/take":        fixed(200, `{"jobs":[`+cliJob+`]}`),
		"POST /v1/ns/default/take":                      fixed(200, `{"jobs":[]}`),
		"POST /v1/ns/default/queues/emails/jobs/J/ack":  fixed(200, `{"id":"J","state":"delayed"}`),
		"POST /v1/ns/default/queues/emails/jobs/J/nack": fixed(200, `{"state":"delayed"}`),
	})
	out, _, err := runCLI(t, "", "take", "emails", "--max", "5", "--wait", "20s", "--url", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "take body", f.last(t).body, `{"max":5,"wait":"20s"}`)
	want := "" +
		"QUEUE   ID                          RECEIPT                     ATTEMPT  TTR  KEY  PAYLOAD\n" +
		"emails  01JD3W0Q8Z6M1N2P3Q4R5S6T7V  01JD3W1A2B3C4D5E6F7G8H9J0K  1        30s  -    {\"to\":\"a@b.c\"}\n"
	if out != want {
		t.Errorf("take table:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = runCLI(t, "", "take", "emails", "--json", "--url", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "take --json", []byte(out), `{"jobs":[`+cliJob+`]}`)
	out, errOut, err := runCLI(t, "", "take", "high", "low", "--url", f.srv.URL)
	if err != nil || out != "" || !strings.Contains(errOut, "no job") {
		t.Errorf("empty multi take: %v %q %q", err, out, errOut)
	}
	jsonSame(t, "multi take body", f.last(t).body, `{"queues":["high","low"],"max":1}`)

	out, _, err = runCLI(t, `{"sent": true}`, "ack", "emails", "J", "R", "--result", "-", "--reschedule", "1h", "--url", f.srv.URL)
	if err != nil || out != "delayed\n" {
		t.Fatalf("ack: %v %q", err, out)
	}
	jsonSame(t, "ack body", f.last(t).body, `{"receipt":"R","result":{"sent":true},"reschedule":{"delay":"1h0m0s"}}`)
	if _, _, err := runCLI(t, "", "ack", "emails", "J", "R", "--result", "not json", "--url", f.srv.URL); err == nil {
		t.Error("ack with a non-JSON result: no error")
	}

	out, _, err = runCLI(t, "", "nack", "emails", "J", "R", "--delay", "0s", "--error", "smtp timeout", "--url", f.srv.URL)
	if err != nil || out != "delayed\n" {
		t.Fatalf("nack: %v %q", err, out)
	}
	jsonSame(t, "nack body", f.last(t).body, `{"receipt":"R","delay":"0s","error":"smtp timeout"}`)
	if _, _, err := runCLI(t, "", "nack", "emails", "J", "R", "--url", f.srv.URL); err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "bare nack body", f.last(t).body, `{"receipt":"R"}`)
}

func TestCLIPeekAndList(t *testing.T) {
	cliIsolate(t)
	page := func(ids []string, next string) string {
		var parts []string
		for _, id := range ids {
			parts = append(parts, strings.Replace(strings.Replace(cliJob, "01JD3W0Q8Z6M1N2P3Q4R5S6T7V", id, 1), `"state":"reserved"`, `"state":"ready"`, 1))
		}
		s := `{"jobs":[` + strings.Join(parts, ",") + `]`
		if next != "" {
			s += `,"next_cursor":"` + next + `"`
		}
		return s + "}"
	}
	f := newCLIFake(t, map[string]func(cliReq) (int, string){
		"GET /v1/ns/default/queues/emails/jobs/J": fixed(200, cliJob),
		"GET /v1/ns/default/queues/emails/jobs": func(r cliReq) (int, string) {
			switch r.query.Get("cursor") {
			case "":
				return 200, page([]string{"A", "B"}, "c1")
			case "c1":
				return 200, page([]string{"C", "D"}, "c2")
			}
			return 200, page([]string{"E"}, "")
		},
	})
	out, _, err := runCLI(t, "", "peek", "emails", "J", "--url", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"id              01JD3W0Q8Z6M1N2P3Q4R5S6T7V\n", "payload         {\"to\":\"a@b.c\"}\n", "receipt         01JD3W1A2B3C4D5E6F7G8H9J0K\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("peek output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runCLI(t, "", "peek", "emails", "J", "--json", "--url", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "peek --json", []byte(out), cliJob)

	out, _, err = runCLI(t, "", "list", "emails", "--state", "ready,delayed", "--tag", "user_id=42", "--limit", "0", "--json", "--url", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Jobs []struct{ ID string } }
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Jobs) != 5 || res.Jobs[4].ID != "E" {
		t.Fatalf("list --limit 0: %v %s", err, out)
	}
	r := f.last(t)
	if r.query.Get("state") != "ready,delayed" || r.query.Get("tag.user_id") != "42" || r.query.Get("cursor") != "c2" {
		t.Errorf("last list query %v", r.query)
	}
	n := f.count()
	out, _, err = runCLI(t, "", "list", "emails", "--limit", "3", "--url", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "QUEUE") || !strings.Contains(lines[3], " C ") {
		t.Errorf("list --limit 3:\n%s", out)
	}
	if f.count()-n != 2 {
		t.Errorf("list --limit 3 fetched %d pages, want 2", f.count()-n)
	}
}

func TestCLICancelRespawn(t *testing.T) {
	cliIsolate(t)
	f := newCLIFake(t, map[string]func(cliReq) (int, string){
		"DELETE /v1/ns/default/queues/emails/jobs/J":     fixed(204, ""),
		"DELETE /v1/ns/default/queues/emails/jobs":       fixed(200, `{"deleted":3}`),
		"DELETE /v1/ns/default/jobs":                     fixed(200, `{"deleted":7}`),
		"POST /v1/ns/default/queues/emails/dead/respawn": fixed(200, `{"respawned":2}`),
		"DELETE /v1/ns/default/queues/emails/dead":       fixed(200, `{"deleted":5}`),
	})
	u := []string{"--url", f.srv.URL}
	out, _, err := runCLI(t, "", "cancel", append([]string{"emails", "J", "--receipt", "R"}, u...)...)
	if err != nil || out != "deleted 1\n" || f.last(t).query.Get("receipt") != "R" {
		t.Errorf("cancel one: %v %q %v", err, out, f.last(t).query)
	}
	out, _, err = runCLI(t, "", "cancel", append([]string{"emails", "--state", "delayed", "--tag", "user_id=42"}, u...)...)
	if err != nil || out != "deleted 3\n" {
		t.Errorf("cancel by filter: %v %q", err, out)
	}
	if q := f.last(t).query; q.Get("state") != "delayed" || q.Get("tag.user_id") != "42" {
		t.Errorf("cancel query %v", q)
	}
	out, _, err = runCLI(t, "", "cancel", append([]string{"--all-queues", "--key", "user:42", "--json"}, u...)...)
	if err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "cancel --all-queues", []byte(out), `{"deleted":7}`)
	n := f.count()
	for _, args := range [][]string{{"emails"}, {"--all-queues"}, {"emails", "J", "--state", "ready"}, {}} {
		if _, _, err := runCLI(t, "", "cancel", append(args, u...)...); err == nil {
			t.Errorf("cancel %v: no error", args)
		}
	}
	if f.count() != n {
		t.Error("an unfiltered cancel reached the server")
	}

	out, _, err = runCLI(t, "", "respawn", append([]string{"emails", "--limit", "100"}, u...)...)
	if err != nil || out != "respawned 2\n" {
		t.Errorf("respawn: %v %q", err, out)
	}
	jsonSame(t, "respawn body", f.last(t).body, `{"limit":100}`)
	if _, _, err := runCLI(t, "", "respawn", append([]string{"emails", "A", "B"}, u...)...); err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "respawn ids body", f.last(t).body, `{"ids":["A","B"]}`)
	out, _, err = runCLI(t, "", "respawn", append([]string{"emails", "--purge"}, u...)...)
	if err != nil || out != "deleted 5\n" {
		t.Errorf("respawn --purge: %v %q", err, out)
	}
	if _, _, err := runCLI(t, "", "respawn", append([]string{"emails"}, u...)...); err == nil {
		t.Error("respawn without ids or limit: no error")
	}
}

func TestCLIQueue(t *testing.T) {
	cliIsolate(t)
	f := newCLIFake(t, map[string]func(cliReq) (int, string){
		"PUT /v1/ns/default/queues/emails":         fixed(201, cliQueueA),
		"GET /v1/ns/default/queues/emails":         fixed(200, cliQueueA),
		"POST /v1/ns/default/queues/emails/pause":  fixed(200, strings.Replace(cliQueueA, `"paused":false`, `"paused":true`, 1)),
		"POST /v1/ns/default/queues/emails/resume": fixed(200, cliQueueA),
		"POST /v1/ns/default/queues/emails/purge":  fixed(200, `{"deleted":42}`),
		"DELETE /v1/ns/default/queues/emails":      fixed(204, ""),
	})
	u := []string{"--url", f.srv.URL}
	out, errOut, err := runCLI(t, "", "queue", append([]string{"create", "emails", "--ttr", "1m", "--tries", "0", "--backoff-initial", "2s", "--key-mode", "exclusive"}, u...)...)
	if err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "queue create body", f.last(t).body, `{"default_ttr":"1m0s","default_tries":0,"key_mode":"exclusive","backoff":{"initial":"2s"}}`)
	if !strings.Contains(errOut, "created queue emails") || !strings.Contains(out, "ready 1200, delayed 3") {
		t.Errorf("queue create output %q / %q", out, errOut)
	}
	out, _, err = runCLI(t, "", "queue", append([]string{"get", "emails", "--json"}, u...)...)
	if err != nil {
		t.Fatal(err)
	}
	jsonSame(t, "queue get --json", []byte(out), cliQueueA)
	out, _, err = runCLI(t, "", "queue", append([]string{"pause", "emails"}, u...)...)
	if err != nil || !strings.Contains(out, "state             paused") {
		t.Errorf("queue pause: %v\n%s", err, out)
	}
	if r := f.last(t); r.method != "POST" || r.path != "/v1/ns/default/queues/emails/pause" {
		t.Errorf("pause request %s %s", r.method, r.path)
	}
	if _, _, err := runCLI(t, "", "queue", append([]string{"resume", "emails"}, u...)...); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, "", "queue", append([]string{"purge", "emails"}, u...)...)
	if err != nil || out != "deleted 42\n" {
		t.Errorf("queue purge: %v %q", err, out)
	}
	out, _, err = runCLI(t, "", "queue", append([]string{"delete", "emails"}, u...)...)
	if err != nil || out != "deleted queue emails\n" {
		t.Errorf("queue delete: %v %q", err, out)
	}
	if r := f.last(t); r.method != "DELETE" {
		t.Errorf("delete sent %s", r.method)
	}
	if _, _, err := runCLI(t, "", "queue", "frobnicate", "emails"); err == nil {
		t.Error("unknown queue subcommand: no error")
	}
	if _, _, err := runCLI(t, "", "queue"); err == nil {
		t.Error("queue without a subcommand: no error")
	}
}

func TestCLIAdmin(t *testing.T) {
	cliIsolate(t)
	main := newCLIFake(t, nil)
	admin := newCLIFake(t, map[string]func(cliReq) (int, string){
		"POST /admin/namespaces":                          fixed(201, `{"name":"billing","auto_create_queues":false}`),
		"GET /admin/namespaces":                           fixed(200, `{"namespaces":[{"name":"default","auto_create_queues":true},{"name":"billing","auto_create_queues":false}]}`),
		"POST /admin/namespaces/billing/tokens":           fixed(201, `{"token":"cq_4f9a"}`),
		"DELETE /admin/namespaces/billing/tokens/cq_4f9a": fixed(204, ""),
	})
	t.Setenv("CHRONOQ_ADMIN_URL", admin.srv.URL)
	u := []string{"--url", main.srv.URL, "--token", "ADMIN"}
	out, _, err := runCLI(t, "", "ns", append([]string{"create", "billing", "--no-auto-create"}, u...)...)
	if err != nil || out != "billing (auto_create_queues false)\n" {
		t.Errorf("ns create: %v %q", err, out)
	}
	jsonSame(t, "ns create body", admin.last(t).body, `{"name":"billing","auto_create_queues":false}`)
	if a := admin.last(t).auth; a != "Bearer ADMIN" {
		t.Errorf("Authorization %q", a)
	}
	out, _, err = runCLI(t, "", "ns", append([]string{"list"}, u...)...)
	want := "NAMESPACE  AUTO_CREATE_QUEUES\ndefault    true\nbilling    false\n"
	if err != nil || out != want {
		t.Errorf("ns list: %v\n%s\nwant\n%s", err, out, want)
	}
	out, _, err = runCLI(t, "", "token", append([]string{"create", "billing", "--description", "workers"}, u...)...)
	if err != nil || out != "cq_4f9a\n" {
		t.Errorf("token create: %v %q", err, out)
	}
	jsonSame(t, "token body", admin.last(t).body, `{"description":"workers"}`)
	out, _, err = runCLI(t, "", "token", append([]string{"revoke", "billing", "cq_4f9a"}, u...)...)
	if err != nil || out != "revoked\n" {
		t.Errorf("token revoke: %v %q", err, out)
	}
	if main.count() != 0 {
		t.Error("admin calls went to the main listener")
	}
}

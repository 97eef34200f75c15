package beanstalk_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	httpapi "github.com/chronoq/chronoq/internal/api/http"
)

// Jobs put over beanstalkd are visible over chronoq's HTTP API, and the
// other way round: one broker, one set of queues.
func TestHTTPInterop(t *testing.T) {
	t.Parallel()
	s := startChronoq(t, serverOpts{})
	web := httptest.NewServer(httpapi.New(s.b, httpapi.Options{Logger: quiet}).Main())
	t.Cleanup(web.Close)
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, _ := http.NewRequest(method, web.URL+path, rd)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		raw, _ := io.ReadAll(res.Body)
		_ = json.Unmarshal(raw, &m)
		return res.StatusCode, m
	}

	c := s.dial()
	c.send("use emails\r\n")
	c.expect("USING emails\r\n")
	body := "hi\r\n\x00\xff"
	id := c.put(7, 0, 10, body)
	code, list := call("GET", "/v1/ns/default/queues/emails/jobs", nil)
	jobs, _ := list["jobs"].([]any)
	if code != 200 || len(jobs) != 1 {
		t.Fatalf("list over HTTP: %d %v", code, list)
	}
	j := jobs[0].(map[string]any)
	if j["payload_base64"] != base64.StdEncoding.EncodeToString([]byte(body)) || j["priority"] != 7.0 ||
		j["ttr"] != "10s" || j["tries"] != 0.0 || j["state"] != "ready" {
		t.Errorf("beanstalkd job over HTTP: %v", j)
	}
	httpID := j["id"].(string)

	// Reserved over beanstalkd, it shows as reserved over HTTP; deleted,
	// it is gone.
	c.send("watch emails\r\nreserve\r\n")
	c.expect("WATCHING 2\r\nRESERVED " + itoa(id) + " " + strconv.Itoa(len(body)) + "\r\n" + body + "\r\n")
	if code, j := call("GET", "/v1/ns/default/queues/emails/jobs/"+httpID, nil); code != 200 || j["state"] != "reserved" || j["attempt"] != 1.0 {
		t.Errorf("reserved job over HTTP: %d %v", code, j)
	}
	c.send("delete " + itoa(id) + "\r\n")
	c.expect("DELETED\r\n")
	if code, _ := call("GET", "/v1/ns/default/queues/emails/jobs/"+httpID, nil); code != 404 {
		t.Errorf("deleted job over HTTP: %d", code)
	}

	// Put over HTTP, reserved over beanstalkd: JSON payloads arrive as
	// their text, binary ones as their bytes.
	if code, m := call("POST", "/v1/ns/default/queues/emails/jobs", map[string]any{"payload": map[string]int{"a": 1}, "priority": 3}); code != 201 {
		t.Fatalf("put over HTTP: %d %v", code, m)
	}
	if code, m := call("POST", "/v1/ns/default/queues/emails/jobs", map[string]any{"payload_base64": base64.StdEncoding.EncodeToString([]byte{0, 1, 2})}); code != 201 {
		t.Fatalf("put over HTTP: %d %v", code, m)
	}
	c.send("reserve\r\n")
	l := c.line()
	c.expect(`{"a":1}` + "\r\n")
	seq, _ := strconv.ParseUint(l[len("RESERVED "):len(l)-len(" 7\r\n")], 10, 64)
	if l != "RESERVED "+itoa(seq)+" 7\r\n" || seq <= id {
		t.Fatalf("reserve of a job put over HTTP: %q", l)
	}
	if m := c.statsJob(seq); m["pri"] != "3" || m["tube"] != `"emails"` || m["reserves"] != "1" {
		t.Errorf("stats-job of a job put over HTTP: %v", m)
	}
	c.send("reserve\r\n")
	c.expect("RESERVED " + itoa(seq+1) + " 3\r\n\x00\x01\x02\r\n")

	// Tubes with characters queue names lack are escaped queues.
	c.send("use a+b\r\n")
	c.expect("USING a+b\r\n")
	c.put(0, 0, 10, "x")
	if code, m := call("GET", "/v1/ns/default/queues/a..2Bb", nil); code != 200 || m["counts"] == nil {
		t.Errorf("escaped queue over HTTP: %d %v", code, m)
	}
	c.send("list-tubes\r\n")
	if got := c.data(); got != "---\n- default\n- emails\n- a+b\n" {
		t.Errorf("list-tubes: %q", got)
	}
}

package lmstfy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/api/lmstfy"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/wal"
)

// messages is every error string the API may answer on /api.
var messages = map[string]bool{
	"api not found": true, "token not found": true, "invalid token": true,
	"namespace or queue name too long": true, "namespace name contains forbidden characters": true,
	"queue name contains forbidden characters": true, "invalid queue name(s)": true,
	"invalid delay": true, "invalid ttl": true, "ttl is shorter than delay": true, "invalid tries": true,
	"tries shouldn't be zero": true, "body too large": true, "job too large": true,
	"too many attributes, cannot exceed 16": true, "request body should be an array of objects": true,
	"no jobs": true, "too many jobs": true, "invalid ttr": true, "invalid timeout": true, "invalid count": true,
	"invalid limit": true, "the queue is empty": true, "job not found": true,
}

// fuzzServer is an in-process API on a broker that does not fsync, with
// long-polls cut to a nanosecond so no input can stall the fuzzer.
func fuzzServer(f *testing.F) http.Handler {
	b, err := broker.Open(broker.Options{Dir: f.TempDir(), Logger: quiet, WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	return lmstfy.New(b, lmstfy.Options{Logger: quiet, MaxWait: time.Nanosecond, MaxBody: 1 << 16, MaxPayload: 1 << 12}).Main()
}

func serve(h http.Handler, method, path, rawQuery string, hdr http.Header, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "/", bytes.NewReader(body))
	req.Host = "127.0.0.1" // a local client: the open mode refuses other Hosts
	req.Method = method
	req.URL.Path = path
	req.URL.RawQuery = rawQuery
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// checkAnswer holds for every answer: never a 5xx, and a body in one of
// lmstfy's shapes with one of its messages.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	code, body := rec.Code, rec.Body.Bytes()
	if code >= 500 {
		t.Fatalf("%s: %d %s", what, code, body)
	}
	switch code {
	case 204, 301, 307:
		return
	case 200, 201:
		if !json.Valid(body) {
			t.Fatalf("%s: %d with invalid JSON %q", what, code, body)
		}
		return
	}
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil || len(m) != 1 {
		t.Fatalf("%s: %d %q is not a one-field JSON object", what, code, body)
	}
	if msg, ok := m["msg"]; ok && msg == "no job available" && code == 404 {
		return
	}
	if !messages[m["error"]] {
		t.Fatalf("%s: %d unknown error %q", what, code, body)
	}
}

// publishOracle is lmstfy's publish parameter check written out plainly
// from its handler: the message it would answer, "" for none.
func publishOracle(v url.Values) string {
	get := func(k, def string) string {
		if vs, ok := v[k]; ok && len(vs) > 0 {
			return vs[0]
		}
		return def
	}
	delay, err := strconv.ParseUint(get("delay", "0"), 10, 32)
	if err != nil || delay > 315360000 {
		return "invalid delay"
	}
	ttl, err := strconv.ParseUint(get("ttl", "86400"), 10, 32)
	if err != nil || ttl > 315360000 {
		return "invalid ttl"
	}
	if ttl > 0 && ttl < delay {
		return "ttl is shorter than delay"
	}
	tries, err := strconv.ParseUint(get("tries", "1"), 10, 16)
	if err != nil {
		return "invalid tries"
	}
	if tries == 0 {
		return "tries shouldn't be zero"
	}
	return ""
}

func consumeOracle(v url.Values) string {
	get := func(k, def string) string {
		if vs, ok := v[k]; ok && len(vs) > 0 {
			return vs[0]
		}
		return def
	}
	ttr, err := strconv.ParseUint(get("ttr", "120"), 10, 32)
	if err != nil || ttr > 30*86400 {
		return "invalid ttr"
	}
	if _, err := strconv.ParseUint(get("timeout", "0"), 10, 32); err != nil {
		return "invalid timeout"
	}
	count, err := strconv.ParseUint(get("count", "1"), 10, 32)
	if err != nil || count == 0 || count > 100 {
		return "invalid count"
	}
	return ""
}

// FuzzQuery feeds raw query strings to publish, bulk publish and consume
// and checks each answer against the oracles.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"", "delay=1", "delay=&ttl=", "ttl=0&delay=99", "tries=65535", "tries=0", "delay=1;ttl=2",
		"delay=%31", "ttl=%zz", "count=100&ttr=1&timeout=0", "count=101", "ttr=2592000", "ttr=2592001",
		"delay=4294967295&ttl=0", "tries=1&tries=0", "delay", "&&&", "ttl=10&delay=10", "count=0x10",
	} {
		f.Add(s)
	}
	h := fuzzServer(f)
	f.Fuzz(func(t *testing.T, raw string) {
		v, _ := url.ParseQuery(raw) // what net/http hands the handler
		want := publishOracle(v)
		for _, path := range []string{"/api/fz/q", "/api/fz/q/bulk"} {
			rec := serve(h, "PUT", path, raw, nil, []byte(`["x"]`))
			checkAnswer(t, "PUT "+path+"?"+raw, rec)
			switch {
			case want == "" && rec.Code != 201:
				t.Fatalf("PUT %s?%s: %d %s, want 201", path, raw, rec.Code, rec.Body)
			case want != "" && (rec.Code != 400 || rec.Body.String() != errBody(want)):
				t.Fatalf("PUT %s?%s: %d %s, want 400 %s", path, raw, rec.Code, rec.Body, want)
			}
		}
		want = consumeOracle(v)
		rec := serve(h, "GET", "/api/fz/q", raw, nil, nil)
		checkAnswer(t, "GET ?"+raw, rec)
		switch {
		case want == "" && rec.Code != 200 && rec.Code != 404:
			t.Fatalf("GET ?%s: %d %s, want 200 or 404", raw, rec.Code, rec.Body)
		case want != "" && (rec.Code != 400 || rec.Body.String() != errBody(want)):
			t.Fatalf("GET ?%s: %d %s, want 400 %s", raw, rec.Code, rec.Body, want)
		}
		// Acknowledge what was taken so the queue does not grow without end.
		if rec.Code == 200 {
			var jobs []struct {
				ID string `json:"job_id"`
			}
			b := rec.Body.Bytes()
			if b[0] == '{' {
				b = append(append([]byte{'['}, b...), ']')
			}
			_ = json.Unmarshal(b, &jobs)
			for _, j := range jobs {
				checkAnswer(t, "ack", serve(h, "DELETE", "/api/fz/q/job/"+j.ID, "", nil, nil))
			}
		}
	})
}

// FuzzRequest sends arbitrary methods, paths, headers and bodies: nothing
// may answer 5xx or an answer outside lmstfy's shapes.
func FuzzRequest(f *testing.F) {
	for _, s := range [][4]string{
		{"PUT", "ns/q", "", "x"},
		{"PUT", "ns/q/bulk", "", `[1,{"a":2},"x"]`},
		{"GET", "ns/q,r,,", "count=3", ""},
		{"GET", "ns/q/peek", "", ""},
		{"GET", "ns/q/job/01ARZ3NDEKTSV4RRFFQ69G5FAV", "", ""},
		{"PUT", "ns/q/job/abc", "delay=1", "y"},
		{"DELETE", "ns/q/job/abc", "", ""},
		{"GET", "ns/q/deadletter", "", ""},
		{"PUT", "ns/q/deadletter", "limit=3&ttl=1", ""},
		{"DELETE", "ns/q/deadletter", "limit=99", ""},
		{"GET", "ns/q/deadletter/size", "", ""},
		{"DELETE", "ns/q", "", ""},
		{"GET", "ns//q/", "", ""},
		{"PUT", "ns/_q", "", ""},
		{"GET", "ns/q/size/", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], "Enable-Job-Version", "Job-Attr-k")
	}
	h := fuzzServer(f)
	f.Fuzz(func(t *testing.T, method, path, rawQuery, body, h1, h2 string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n") {
			return
		}
		hdr := http.Header{}
		hdr.Set("Enable-Job-Version", "YES")
		for _, k := range []string{h1, h2} {
			if k != "" && !strings.ContainsAny(k, ":\r\n ") {
				hdr[k] = []string{body}
			}
		}
		checkAnswer(t, method+" /api/"+path, serve(h, method, "/api/"+path, rawQuery, hdr, []byte(body)))
	})
}

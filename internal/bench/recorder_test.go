package bench

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRecorderPercentiles(t *testing.T) {
	// 1..100 ms in random order, split over two recorders and merged
	var a, b Recorder
	for i, v := range rand.Perm(100) {
		d := time.Duration(v+1) * time.Millisecond
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var r Recorder
	r.Merge(&a)
	r.Merge(&b)
	r.Merge(nil)
	s := r.Summary()
	want := Summary{Count: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if s != want {
		t.Fatalf("summary %+v, want %+v", s, want)
	}
	if got := r.Quantile(0); got != time.Millisecond {
		t.Fatalf("min %s", got)
	}
	// recording after a sort must re-sort
	r.Record(-5 * time.Millisecond)
	r.Record(time.Second)
	if got := r.Quantile(0); got != -5*time.Millisecond {
		t.Fatalf("min after more samples %s", got)
	}
	if got := r.Quantile(1); got != time.Second {
		t.Fatalf("max after more samples %s", got)
	}
}

func TestRecorderNearestRank(t *testing.T) {
	cases := []struct {
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{[]time.Duration{7}, 0.5, 7},
		{[]time.Duration{7}, 0.99, 7},
		{[]time.Duration{1, 2}, 0.5, 1},
		{[]time.Duration{1, 2}, 0.51, 2},
		{[]time.Duration{3, 1, 2}, 0.9, 3},
		{[]time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9},
		{[]time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.91, 10},
	}
	for _, c := range cases {
		var r Recorder
		for _, s := range c.samples {
			r.Record(s)
		}
		if got := r.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) of %v = %v, want %v", c.q, c.samples, got, c.want)
		}
	}
	var empty Recorder
	if empty.Summary() != (Summary{}) || empty.CDF() != nil {
		t.Fatal("empty recorder should summarise to zeros and no CDF")
	}
}

func TestRecorderCDF(t *testing.T) {
	var r Recorder
	for i := 1000; i >= 1; i-- {
		r.Record(time.Duration(i) * time.Microsecond)
	}
	cdf := r.CDF()
	if len(cdf) != len(cdfQuantiles) {
		t.Fatalf("%d points", len(cdf))
	}
	for i := 1; i < len(cdf); i++ {
		if cdf[i].Q <= cdf[i-1].Q || cdf[i].MS < cdf[i-1].MS {
			t.Fatalf("not monotonic at %d: %+v then %+v", i, cdf[i-1], cdf[i])
		}
	}
	if last := cdf[len(cdf)-1]; last.Q != 1 || last.MS != 1 {
		t.Fatalf("last point %+v, want q=1 at 1 ms", last)
	}
	if cdf[50].Q != 0.5 || cdf[50].MS != 0.5 {
		t.Fatalf("median point %+v", cdf[50])
	}
}

func TestJSONIsExactlyTheIssuesObject(t *testing.T) {
	res := Result{Target: "chronoq-http", Scenario: "put", Conns: 64, Payload: 100, DurationS: 10.002,
		Jobs: 123456, JobsPerSec: 12343.531, P50MS: 0.9, P90MS: 1.5, P99MS: 3.25, MaxMS: 41, Errors: 2,
		ServerCPUS: 3.1, ServerCPUUsPerOp: 25.11, OpsPerServerCPUS: 39824.5}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasSuffix(out, "}\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("want one line ending in a newline, got %q", out)
	}
	// exactly these keys, in this order
	dec := json.NewDecoder(strings.NewReader(out))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("first token %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		switch v.(type) {
		case string, float64:
		default:
			t.Fatalf("key %s has a %T", tok, v)
		}
	}
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value")
	}
	want := []string{"target", "scenario", "conns", "payload", "duration_s", "jobs", "jobs_per_sec",
		"p50_ms", "p90_ms", "p99_ms", "max_ms", "errors", "server_cpu_s", "server_cpu_us_per_op", "ops_per_server_cpu_s"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %v\nwant %v", keys, want)
	}
	var back Result
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back != res {
		t.Fatalf("round trip %+v %v", back, err)
	}
	// a results file is an array of these objects
	arr := "[" + strings.TrimSpace(out) + "," + strings.TrimSpace(out) + "]"
	var rs []Result
	if err := json.Unmarshal([]byte(arr), &rs); err != nil || len(rs) != 2 || rs[1] != res {
		t.Fatalf("array %v %v", rs, err)
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	res := Result{Target: "redis", Scenario: "delayed", Conns: 8, Payload: 100, DurationS: 5, Jobs: 10, JobsPerSec: 2,
		P50MS: 1.234, P90MS: 12.34, P99MS: 123.4, MaxMS: 1234, Errors: 3, ServerCPUUsPerOp: 27.25}
	if err := WriteTable(&buf, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want header and one row, got %q", buf.String())
	}
	for _, w := range []string{"lateness p50", "jobs/s", "errors"} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("header lacks %q: %s", w, lines[0])
		}
	}
	for _, w := range []string{"redis", "delayed", "1.23ms", "12.3ms", "123ms", "1234ms", " 3", "27.2µs"} {
		if !strings.Contains(lines[1], w) {
			t.Errorf("row lacks %q: %s", w, lines[1])
		}
	}
}

func TestStamp(t *testing.T) {
	p := bytes.Repeat([]byte("x"), 100)
	due := time.Unix(1700000000, 123456789)
	stamp(p, due)
	got, ok := unstamp(p)
	if !ok || !got.Equal(due) {
		t.Fatalf("unstamp %v %v", got, ok)
	}
	if _, ok := unstamp(bytes.Repeat([]byte("x"), 100)); ok {
		t.Fatal("unstamped payload accepted")
	}
	if _, ok := unstamp([]byte("12")); ok {
		t.Fatal("short payload accepted")
	}
}

func TestParseDelayRange(t *testing.T) {
	for in, want := range map[string][2]time.Duration{
		"1s..10s": {time.Second, 10 * time.Second}, "250ms": {250 * time.Millisecond, 250 * time.Millisecond},
		"0s..1s": {0, time.Second},
	} {
		lo, hi, err := ParseDelayRange(in)
		if err != nil || lo != want[0] || hi != want[1] {
			t.Errorf("%q: %v %v %v", in, lo, hi, err)
		}
	}
	for _, in := range []string{"", "10s..1s", "x..1s", "1s..", "-1s..1s"} {
		if _, _, err := ParseDelayRange(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	ok := Config{Target: "chronoq-http", Scenario: "put", Conns: 1, Duration: time.Second}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Conns = 0 },
		func(c *Config) { c.Duration = 0 },
		func(c *Config) { c.Payload = -1 },
		func(c *Config) { c.Scenario = "take-ack" },
		func(c *Config) { c.Scenario, c.DelayMin, c.DelayMax = "delayed", 2*time.Second, time.Second },
	} {
		c := ok
		bad(&c)
		if err := c.check(); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}

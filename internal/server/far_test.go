package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/server/servertest"
)

// --far-horizon: below a second (bucket windows of a few hundred
// milliseconds) or negative is refused with the flag's value in the error,
// before anything is opened.
func TestFarHorizonBounds(t *testing.T) {
	for _, h := range []time.Duration{-time.Second, 500 * time.Millisecond} {
		cfg := testConfig(t)
		cfg.FarHorizon = h
		s, err := server.New(cfg)
		if err == nil {
			s.Shutdown(t.Context())
			t.Fatalf("far horizon %s accepted", h)
		}
		if !strings.Contains(err.Error(), "far horizon "+h.String()) {
			t.Fatalf("far horizon %s: %v", h, err)
		}
	}
}

// Far jobs are counted everywhere a client sees counts and budgets: GET
// queue and beanstalkd stats-tube count them as delayed, --max-jobs
// counts them (OUT_OF_MEMORY beyond it), and kick N kicks them when the
// tube has no buried job.
func TestFarJobsCountedOverTheWire(t *testing.T) {
	cfg := testConfig(t)
	cfg.FarHorizon = time.Second
	cfg.MaxJobs = 4
	s := servertest.Start(t, cfg, 10*time.Second)
	c, err := net.DialTimeout("tcp", s.Addr(server.Beanstalk), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	say := func(cmd string, want ...string) string {
		t.Helper()
		if _, err := io.WriteString(c, cmd); err != nil {
			t.Fatal(err)
		}
		var got string
		for _, w := range want {
			line, err := r.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, w) {
				t.Fatalf("%q: got %q (%v), want %s", cmd, line, err, w)
			}
			got = line
		}
		return got
	}
	stats := func() string {
		t.Helper()
		line := say("stats-tube t\r\n", "OK ")
		var n int
		fmt.Sscanf(line, "OK %d", &n)
		body := make([]byte, n+2)
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	say("use t\r\n", "USING t")
	for i := 0; i < 3; i++ {
		say("put 0 3600 60 1\r\nx\r\n", "INSERTED ")
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		st, err := s.Broker().FarStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Jobs == 3 {
			break
		}
		if i == 500 {
			t.Fatalf("%d of 3 jobs went to the far store", st.Jobs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if body := stats(); !strings.Contains(body, "current-jobs-delayed: 3\n") {
		t.Fatalf("stats-tube with 3 far jobs: %s", body)
	}
	if code, body := get(t, "http://"+s.Addr(server.Admin)+"/metrics"); code != 200 || !strings.Contains(body, "\nchronoq_far_jobs 3\n") ||
		!strings.Contains(body, "\nchronoq_far_backlog_jobs 0\n") || !strings.Contains(body, "\nchronoq_far_buckets ") {
		t.Fatalf("metrics with 3 far jobs: %d\n%s", code, grepLines(body, "chronoq_far_"))
	}
	code, body := get(t, "http://"+s.Addr(server.HTTP)+"/v1/ns/default/queues/t")
	if code != 200 || !strings.Contains(body, `"delayed":3`) {
		t.Fatalf("GET queue with 3 far jobs: %d %s", code, body)
	}
	say("put 0 3600 60 1\r\nx\r\n", "INSERTED ")
	say("put 0 3600 60 1\r\nx\r\n", "OUT_OF_MEMORY")
	say("kick 2\r\n", "KICKED 2")
	if body := stats(); !strings.Contains(body, "current-jobs-ready: 2\n") || !strings.Contains(body, "current-jobs-delayed: 2\n") {
		t.Fatalf("stats-tube after kick 2: %s", body)
	}
}

// grepLines keeps the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

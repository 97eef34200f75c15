package realtime

// Measurements for docs/realtime.md, run only when asked:
//
//	CHRONOQ_RT_MEASURE=1 go test -run Measure -v -timeout 20m ./test/realtime
//
// Clients run in a child process (this test binary re-executed), so the
// server's RSS is the server's alone and the two sides do not share a Go
// scheduler. Everything is on loopback. Each process needs one descriptor
// per connection: mind `ulimit -n` (10k connections need > 10k).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	httpapi "github.com/chronoq/chronoq/internal/api/http"
	"github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

func TestMain(m *testing.M) {
	if os.Getenv("CHRONOQ_RT_CHILD") != "" {
		runChild()
		return
	}
	os.Exit(m.Run())
}

func measuring(t *testing.T) {
	if os.Getenv("CHRONOQ_RT_MEASURE") == "" {
		t.Skip("set CHRONOQ_RT_MEASURE=1 to run the measurements")
	}
}

func rssKB() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// settle collects until the heap and goroutine stacks stop shrinking: a
// GC halves at most once the stack of a goroutine using under a quarter
// of it, so an idle server reaches its steady size over a few cycles (the
// runtime forces one at least every two minutes).
func settle() {
	for i := 0; i < 4; i++ {
		runtime.GC()
	}
	debug.FreeOSMemory()
}

// child starts the client side: n connections to url, each subscribed to
// channel; it prints "ready" and then, for measure mode, a JSON summary
// once every connection got `expect` publications.
type child struct {
	cmd *exec.Cmd
	out *bufio.Scanner
	in  *os.File
}

func startChild(t *testing.T, url string, n int, channel string, expect int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CHRONOQ_RT_CHILD=1", "CHILD_URL="+url, "CHILD_N="+strconv.Itoa(n),
		"CHILD_CHANNEL="+channel, "CHILD_EXPECT="+strconv.Itoa(expect))
	stdout, _ := cmd.StdoutPipe()
	r, w, _ := os.Pipe()
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	c := &child{cmd: cmd, out: bufio.NewScanner(stdout), in: w}
	t.Cleanup(func() { w.Close(); cmd.Wait() })
	if !c.out.Scan() || c.out.Text() != "ready" {
		t.Fatalf("child did not get ready: %q", c.out.Text())
	}
	return c
}

type summary struct {
	Deliveries int64   `json:"deliveries"`
	Missing    int64   `json:"missing"`
	LastNanos  int64   `json:"last"` // wall clock of the last delivery
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
}

func (c *child) summary(t *testing.T) summary {
	t.Helper()
	if !c.out.Scan() {
		t.Fatal("child ended without a summary")
	}
	var s summary
	if err := json.Unmarshal(c.out.Bytes(), &s); err != nil {
		t.Fatalf("child summary %q: %v", c.out.Text(), err)
	}
	return s
}

func runChild() {
	url := os.Getenv("CHILD_URL")
	n, _ := strconv.Atoi(os.Getenv("CHILD_N"))
	expect, _ := strconv.Atoi(os.Getenv("CHILD_EXPECT"))
	channel := os.Getenv("CHILD_CHANNEL")
	d := websocket.Dialer{ReadBufferSize: 4096, WriteBufferSize: 512, HandshakeTimeout: time.Minute}
	conns := make([]*websocket.Conn, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var c *websocket.Conn
			var err error
			for try := 0; try < 50; try++ {
				if c, _, err = d.Dial(url, nil); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "child dial:", err)
				os.Exit(1)
			}
			c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{}}`))
			c.WriteMessage(websocket.TextMessage, []byte(`{"id":2,"subscribe":{"channel":"`+channel+`"}}`))
			for got := 0; got < 2; got++ {
				if _, _, err := c.ReadMessage(); err != nil {
					fmt.Fprintln(os.Stderr, "child handshake:", err)
					os.Exit(1)
				}
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	fmt.Println("ready")
	if expect == 0 {
		io := bufio.NewReader(os.Stdin)
		io.ReadByte() // until the parent closes stdin
		return
	}
	var mu sync.Mutex
	var lat []float64
	var deliveries, missing, last atomic.Int64
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := make([]float64, 0, expect)
			for got := 0; got < expect; got++ {
				c.SetReadDeadline(time.Now().Add(2 * time.Minute))
				_, data, err := c.ReadMessage()
				if err != nil {
					missing.Add(int64(expect - got))
					break
				}
				now := time.Now().UnixNano()
				var m struct {
					Pub struct {
						Data struct {
							T int64 `json:"t"`
						} `json:"data"`
					} `json:"pub"`
				}
				json.Unmarshal(data, &m)
				own = append(own, float64(now-m.Pub.Data.T)/1e6)
				deliveries.Add(1)
				for {
					l := last.Load()
					if now <= l || last.CompareAndSwap(l, now) {
						break
					}
				}
			}
			mu.Lock()
			lat = append(lat, own...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	out, _ := json.Marshal(summary{Deliveries: deliveries.Load(), Missing: missing.Load(), LastNanos: last.Load(), P50: q(0.5), P99: q(0.99), Max: q(1)})
	fmt.Println(string(out))
}

func measureEnv(t *testing.T, opts ws.Options) (*broker.Broker, *ws.Server, *httptest.Server) {
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet, WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = quiet
	opts.MaxConnections = 100000
	opts.ConnectRate = 1e6
	rt, err := ws.New(b, b.Channels(), opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rt.Shutdown(ctx)
		srv.Close()
		b.Close()
	})
	return b, rt, srv
}

func TestMeasureIdleMemory(t *testing.T) {
	measuring(t)
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("CHRONOQ_RT_CONNS")); err == nil {
		n = v
	}
	_, rt, srv := measureEnv(t, ws.Options{})
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"
	settle()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	before := rssKB()
	startChild(t, url, n, "default/idle", 0)
	for rt.Stats().Connections < int64(n) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // let handshake garbage become collectable
	settle()
	after := rssKB()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if path := os.Getenv("CHRONOQ_RT_HEAPPROFILE"); path != "" {
		f, _ := os.Create(path)
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	t.Logf("%d idle connections (connected + 1 subscription each): RSS %d → %d kB, %.2f KB per connection",
		n, before, after, float64(after-before)/float64(n))
	t.Logf("  of which heap in use %.2f KB, goroutine stacks %.2f KB, goroutines %d",
		float64(ms.HeapInuse-ms0.HeapInuse)/1024/float64(n), float64(ms.StackInuse-ms0.StackInuse)/1024/float64(n), runtime.NumGoroutine())
}

// cpuTime is the CPU (user + system) this process, the server, has used:
// the clients run in a child process, so this is the server's cost alone.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestMeasureFanout(t *testing.T) {
	measuring(t)
	for _, tc := range []struct {
		subs, burst, paced int
		rate               float64 // publications per second when paced
	}{
		{1000, 200, 200, 100},
		{10000, 50, 60, 20},
	} {
		t.Run(strconv.Itoa(tc.subs), func(t *testing.T) {
			b, _, srv := measureEnv(t, ws.Options{})
			url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"
			pub := func() {
				b.Publish(context.Background(), "default", "fan", []byte(fmt.Sprintf(`{"t":%d}`, time.Now().UnixNano())))
			}
			// Burst: publications back to back; throughput is total
			// deliveries over first publish → last delivery.
			c := startChild(t, url, tc.subs, "default/fan", tc.burst)
			cpu0 := cpuTime()
			start := time.Now()
			var slowest time.Duration
			for i := 0; i < tc.burst; i++ {
				t0 := time.Now()
				pub()
				slowest = max(slowest, time.Since(t0))
			}
			s := c.summary(t)
			cpu := cpuTime() - cpu0
			el := time.Duration(s.LastNanos - start.UnixNano())
			t.Logf("%d subscribers, burst of %d: %d deliveries (%d missing) in %v = %.0f deliveries/s; server CPU %.2f µs per delivery; latency p50 %.1f ms p99 %.1f ms max %.1f ms; slowest Publish call %v",
				tc.subs, tc.burst, s.Deliveries, s.Missing, el.Round(time.Millisecond), float64(s.Deliveries)/el.Seconds(),
				float64(cpu.Microseconds())/float64(max(s.Deliveries, 1)), s.P50, s.P99, s.Max, slowest)

			// Paced: a steady rate below saturation, for latency.
			c = startChild(t, url, tc.subs, "default/fan", tc.paced)
			tick := time.NewTicker(time.Duration(float64(time.Second) / tc.rate))
			for i := 0; i < tc.paced; i++ {
				<-tick.C
				pub()
			}
			tick.Stop()
			s = c.summary(t)
			t.Logf("%d subscribers at %.0f publications/s (%.0f deliveries/s): latency p50 %.1f ms p99 %.1f ms max %.1f ms (%d missing)",
				tc.subs, tc.rate, tc.rate*float64(tc.subs), s.P50, s.P99, s.Max, s.Missing)
		})
	}
}

// TestMeasureConsume compares one worker taking jobs by push (WebSocket,
// prefetch) with one taking them by HTTP long-poll take + ack.
func TestMeasureConsume(t *testing.T) {
	measuring(t)
	const jobs = 20000
	b, _, srv := measureEnv(t, ws.Options{})
	api := httptest.NewServer(httpapi.New(b, httpapi.Options{Logger: quiet}).Main())
	defer api.Close()
	ctx := context.Background()
	fill := func(q string) {
		for i := 0; i < jobs; i += 1000 {
			reqs := make([]engine.PutRequest, 1000)
			for j := range reqs {
				reqs[j] = engine.PutRequest{Payload: []byte(`{"x":1}`), PayloadJSON: true}
			}
			if _, err := b.PutBatch(ctx, "default", q, reqs); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, prefetch := range []int{1, 100} {
		q := "push" + strconv.Itoa(prefetch)
		fill(q)
		c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{}}`))
		c.ReadMessage()
		start := time.Now()
		c.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"id":2,"consume":{"queues":[%q],"prefetch":%d}}`, q, prefetch)))
		acked, id := 0, 2
		for acked < jobs {
			_, data, err := c.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Job *struct {
					ID, Queue, Receipt string
				} `json:"job"`
				Result *struct {
					State string `json:"state"`
				} `json:"result"`
			}
			json.Unmarshal(data, &m)
			if m.Job != nil {
				id++
				c.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"id":%d,"ack":{"queue":%q,"id":%q,"receipt":%q}}`, id, m.Job.Queue, m.Job.ID, m.Job.Receipt)))
			} else if m.Result != nil && m.Result.State != "" {
				acked++
			}
		}
		el := time.Since(start)
		c.Close()
		t.Logf("push, prefetch %d: %d jobs taken and acked in %v = %.0f jobs/s", prefetch, jobs, el.Round(time.Millisecond), jobs/el.Seconds())
	}

	for _, max := range []int{1, 100} {
		q := "poll" + strconv.Itoa(max)
		fill(q)
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		post := func(path, body string) []byte {
			resp, err := hc.Post(api.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf strings.Builder
			bufio.NewReader(resp.Body).WriteTo(&buf)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", path, resp.StatusCode, buf.String())
			}
			return []byte(buf.String())
		}
		start := time.Now()
		done := 0
		for done < jobs {
			var got struct {
				Jobs []struct{ ID, Receipt string } `json:"jobs"`
			}
			json.Unmarshal(post("/v1/ns/default/queues/"+q+"/take", fmt.Sprintf(`{"max":%d,"wait":"5s"}`, max)), &got)
			for _, j := range got.Jobs {
				post("/v1/ns/default/queues/"+q+"/jobs/"+j.ID+"/ack", fmt.Sprintf(`{"receipt":%q}`, j.Receipt))
				done++
			}
		}
		el := time.Since(start)
		t.Logf("HTTP long-poll take max %d + ack each: %d jobs in %v = %.0f jobs/s", max, jobs, el.Round(time.Millisecond), jobs/el.Seconds())
	}
}

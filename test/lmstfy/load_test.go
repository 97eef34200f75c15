package lmstfy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/wal"
)

// TestThroughput measures publish and consume+ack jobs/s through /api over
// loopback TCP with 16 and 64 connections. It runs only with
// LMSTFY_BENCH=1 (LMSTFY_BENCH_SECONDS sets each phase's length, default 5;
// LMSTFY_BENCH_SYNC=interval|never changes the fsync policy from always;
// LMSTFY_BENCH_URL=http://host:port measures a running server instead of an
// in-process one, so the load generator does not share its CPUs).
func TestThroughput(t *testing.T) {
	if os.Getenv("LMSTFY_BENCH") == "" {
		t.Skip("set LMSTFY_BENCH=1 to measure throughput")
	}
	secs, _ := strconv.Atoi(os.Getenv("LMSTFY_BENCH_SECONDS"))
	if secs <= 0 {
		secs = 5
	}
	dur := time.Duration(secs) * time.Second
	policy := wal.SyncAlways
	switch os.Getenv("LMSTFY_BENCH_SYNC") {
	case "interval":
		policy = wal.SyncInterval
	case "never":
		policy = wal.SyncNever
	}
	for _, conns := range []int{16, 64} {
		t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
			base := os.Getenv("LMSTFY_BENCH_URL")
			if base == "" {
				base = newEnv(t, envOpts{sync: policy}).main.URL
			}
			queue := fmt.Sprintf("/api/bench/q%d-%d", conns, time.Now().UnixNano())
			tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
			defer tr.CloseIdleConnections()
			cli := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			body := bytes.Repeat([]byte("p"), 100)
			do := func(method, url string, b []byte) (int, []byte, error) {
				var rd io.Reader
				if b != nil {
					rd = bytes.NewReader(b)
				}
				req, _ := http.NewRequest(method, url, rd)
				res, err := cli.Do(req)
				if err != nil {
					return 0, nil, err
				}
				defer res.Body.Close()
				raw, err := io.ReadAll(res.Body)
				return res.StatusCode, raw, err
			}
			run := func(work func() bool) (int64, time.Duration) {
				var n atomic.Int64
				var wg sync.WaitGroup
				stop := time.Now().Add(dur)
				start := time.Now()
				for range conns {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for time.Now().Before(stop) && work() {
							n.Add(1)
						}
					}()
				}
				wg.Wait()
				return n.Load(), time.Since(start)
			}
			pubURL := base + queue + "?ttl=0&tries=3"
			published, pd := run(func() bool {
				st, raw, err := do("PUT", pubURL, body)
				if err != nil || st != 201 {
					t.Errorf("publish: %d %s %v", st, raw, err)
					return false
				}
				return true
			})
			conURL := base + queue + "?ttr=60"
			consumed, cd := run(func() bool {
				st, raw, err := do("GET", conURL, nil)
				if err != nil || (st != 200 && st != 404) {
					t.Errorf("consume: %d %s %v", st, raw, err)
					return false
				}
				if st == 404 {
					return false // drained
				}
				var j struct {
					ID string `json:"job_id"`
				}
				if err := json.Unmarshal(raw, &j); err != nil {
					t.Errorf("consume answer %s: %v", raw, err)
					return false
				}
				st, raw, err = do("DELETE", base+queue+"/job/"+j.ID, nil)
				if err != nil || st != 204 {
					t.Errorf("ack: %d %s %v", st, raw, err)
					return false
				}
				return true
			})
			pr, cr := float64(published)/pd.Seconds(), float64(consumed)/cd.Seconds()
			t.Logf("%s sync=%v conns=%d: publish %d jobs in %v = %.0f jobs/s; consume+ack %d jobs in %v = %.0f jobs/s",
				base, syncName(policy), conns, published, pd.Round(time.Millisecond), pr, consumed, cd.Round(time.Millisecond), cr)
		})
	}
}

func syncName(p wal.SyncPolicy) string {
	switch p {
	case wal.SyncInterval:
		return "interval"
	case wal.SyncNever:
		return "never"
	}
	return "always"
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const benchUsage = `Usage: chronoq bench [flags]

Drives a running chronoq server over its HTTP API with N keep-alive
connections for a fixed time and prints throughput and latency percentiles.

Scenarios:
  put        single-job puts
  take-ack   take one job, ack it (the queue is pre-filled first)
  delayed    puts with a delay, then takes as jobs activate; reports
             how late after activate_at each job was handed out

Example:
  chronoq bench --url http://127.0.0.1:7777 --scenario put --connections 64 --duration 10s
`

type benchConfig struct {
	url, scenario, queue string
	conns                int
	duration             time.Duration
	payload              int
	prefill              int
	delay                time.Duration
	jsonOut              bool
}

func benchCmd(args []string) error {
	var c benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&c.url, "url", benchEnvOr("CHRONOQ_URL", "http://127.0.0.1:7777"), "server base URL")
	fs.StringVar(&c.scenario, "scenario", "put", "put, take-ack or delayed")
	fs.StringVar(&c.queue, "queue", "", "queue to use (default: a fresh bench-<time> queue)")
	fs.IntVar(&c.conns, "connections", 64, "concurrent keep-alive connections")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to run")
	fs.IntVar(&c.payload, "payload", 100, "payload size in bytes")
	fs.IntVar(&c.prefill, "prefill", 200000, "jobs put before a take-ack run")
	fs.DurationVar(&c.delay, "delay", 50*time.Millisecond, "delay of each job in the delayed scenario")
	fs.BoolVar(&c.jsonOut, "json", false, "print the result as JSON")
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchUsage, "\nFlags:\n"); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if c.queue == "" {
		c.queue = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	if c.conns < 1 || c.duration <= 0 {
		return errors.New("bench: --connections and --duration must be positive")
	}
	res, err := runBench(context.Background(), c)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("scenario %s, %d connections, %s, %d-byte payloads\n", c.scenario, c.conns, c.duration, c.payload)
	fmt.Printf("  ops:        %d (%d errors)\n", res.Ops, res.Errors)
	fmt.Printf("  throughput: %.0f ops/s\n", res.OpsPerSec)
	fmt.Printf("  latency:    p50 %s  p99 %s  max %s\n", res.P50, res.P99, res.Max)
	if res.LateP50 != "" {
		fmt.Printf("  lateness:   p50 %s  p99 %s (activate_at → handed out)\n", res.LateP50, res.LateP99)
	}
	return nil
}

type benchResult struct {
	Scenario  string  `json:"scenario"`
	Ops       int64   `json:"ops"`
	Errors    int64   `json:"errors"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50       string  `json:"p50"`
	P99       string  `json:"p99"`
	Max       string  `json:"max"`
	LateP50   string  `json:"lateness_p50,omitempty"`
	LateP99   string  `json:"lateness_p99,omitempty"`
}

type benchClient struct {
	hc   *http.Client
	base string
}

func (bc *benchClient) post(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, bc.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := bc.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

type benchJobs struct {
	Jobs []struct {
		ID         string    `json:"id"`
		Receipt    string    `json:"receipt"`
		ActivateAt time.Time `json:"activate_at"`
	} `json:"jobs"`
}

func runBench(ctx context.Context, c benchConfig) (benchResult, error) {
	tr := &http.Transport{
		MaxIdleConns: c.conns, MaxIdleConnsPerHost: c.conns, MaxConnsPerHost: c.conns,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	bc := &benchClient{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, base: strings.TrimRight(c.url, "/")}
	qpath := "/v1/ns/default/queues/" + c.queue
	payload, _ := json.Marshal(strings.Repeat("x", max(c.payload-2, 0)))
	putBody := []byte(`{"payload":` + string(payload) + `}`)

	if c.scenario == "take-ack" {
		// fill the queue with batches first
		var batch bytes.Buffer
		for n := 0; n < c.prefill; n += 1000 {
			batch.Reset()
			batch.WriteString(`{"jobs":[`)
			for i := 0; i < 1000; i++ {
				if i > 0 {
					batch.WriteByte(',')
				}
				batch.Write(putBody)
			}
			batch.WriteString(`]}`)
			if err := bc.post(ctx, qpath+"/jobs/batch", batch.Bytes(), nil); err != nil {
				return benchResult{}, fmt.Errorf("bench prefill: %w", err)
			}
		}
	}

	var ops, errs atomic.Int64
	var mu sync.Mutex
	var lat, late []time.Duration
	deadline := time.Now().Add(c.duration)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c.conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine, myLate []time.Duration
			delayBody := []byte(fmt.Sprintf(`{"payload":%s,"delay":%q}`, payload, c.delay.String()))
			for time.Now().Before(deadline) {
				t0 := time.Now()
				var err error
				switch c.scenario {
				case "put":
					err = bc.post(ctx, qpath+"/jobs", putBody, nil)
				case "take-ack":
					var got benchJobs
					if err = bc.post(ctx, qpath+"/take", []byte(`{"max":1,"wait":"1s"}`), &got); err == nil && len(got.Jobs) == 1 {
						j := got.Jobs[0]
						err = bc.post(ctx, qpath+"/jobs/"+j.ID+"/ack", []byte(`{"receipt":"`+j.Receipt+`"}`), nil)
					}
				case "delayed":
					if err = bc.post(ctx, qpath+"/jobs", delayBody, nil); err == nil {
						var got benchJobs
						if err = bc.post(ctx, qpath+"/take", []byte(`{"max":1,"wait":"5s"}`), &got); err == nil && len(got.Jobs) == 1 {
							myLate = append(myLate, time.Since(got.Jobs[0].ActivateAt))
							j := got.Jobs[0]
							err = bc.post(ctx, qpath+"/jobs/"+j.ID+"/ack", []byte(`{"receipt":"`+j.Receipt+`"}`), nil)
						}
					}
				default:
					err = fmt.Errorf("unknown scenario %q", c.scenario)
				}
				if err != nil {
					errs.Add(1)
					if errs.Load() > 1000 {
						return
					}
					continue
				}
				ops.Add(1)
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			late = append(late, myLate...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ops.Load() == 0 {
		return benchResult{}, fmt.Errorf("bench: no operation succeeded (%d errors); is the server at %s?", errs.Load(), c.url)
	}
	slices.Sort(lat)
	slices.Sort(late)
	pct := func(s []time.Duration, p float64) string {
		if len(s) == 0 {
			return ""
		}
		return s[min(len(s)-1, int(float64(len(s))*p))].Round(10 * time.Microsecond).String()
	}
	return benchResult{
		Scenario: c.scenario, Ops: ops.Load(), Errors: errs.Load(),
		OpsPerSec: float64(ops.Load()) / elapsed.Seconds(),
		P50:       pct(lat, 0.50), P99: pct(lat, 0.99), Max: pct(lat, 1),
		LateP50: pct(late, 0.50), LateP99: pct(late, 0.99),
	}, nil
}

func benchEnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

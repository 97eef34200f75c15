// Command drain fills queue "drain" of namespace default with ready jobs,
// one put per request, or drains it with takes of 50 jobs and one batch
// ack per take, as fast as it can, and prints the rate. bench/drain-ab.sh
// uses it to measure what a cold backlog's drain does to other clients'
// puts (docs/benchmarks.md, "Background reads in small pieces").
//
// Mode farfill puts n jobs into queue "far" in batches of 1000, each
// delayed 2 h to a year, for a server whose far-future store moves them
// to bucket files (bench/far-drain-ab.sh).
//
// Usage: go run ./bench/drain [-addr HOST:PORT] -mode fill|farfill -n N | -mode drain -for D [-conns C]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:17987", "")
	mode := flag.String("mode", "fill", "fill|drain")
	n := flag.Int("n", 1000000, "fill: jobs")
	conns := flag.Int("conns", 64, "")
	dur := flag.Duration("for", 20*time.Second, "drain: how long")
	flag.Parse()
	base := "http://" + *addr + "/v1/ns/default/queues/drain"
	farBase := "http://" + *addr + "/v1/ns/default/queues/far"
	tr := &http.Transport{MaxIdleConnsPerHost: *conns}
	cl := &http.Client{Transport: tr}
	payload := `{"payload":"` + strings.Repeat("x", 98) + `"}`
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				switch *mode {
				default:
					fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
					os.Exit(2)
				case "fill":
					if done.Add(1) > int64(*n) {
						return
					}
					put(cl, base+"/jobs", payload)
				case "farfill":
					k := done.Add(1000)
					if k-1000 >= int64(*n) {
						return
					}
					var b strings.Builder
					b.WriteString(`{"jobs":[`)
					for i := k - 1000; i < k && i < int64(*n); i++ {
						if i > k-1000 {
							b.WriteByte(',')
						}
						// spread over the year by the job's number, so every
						// batch writes to many hourly buckets
						delay := 7200 + (i*7919)%(365*86400-7200)
						fmt.Fprintf(&b, `{"payload":"%s","delay":"%ds"}`, strings.Repeat("x", 98), delay)
					}
					b.WriteString(`]}`)
					put(cl, farBase+"/jobs/batch", b.String())
				case "drain":
					if time.Since(start) > *dur {
						return
					}
					resp, err := cl.Post(base+"/take", "application/json", strings.NewReader(`{"max":50,"ttr":"10m"}`))
					if err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
					var tk struct {
						Jobs []struct{ ID, Receipt string }
					}
					err = json.NewDecoder(resp.Body).Decode(&tk)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK {
						fmt.Fprintln(os.Stderr, "take:", resp.Status, err)
						os.Exit(1)
					}
					if len(tk.Jobs) == 0 {
						return
					}
					type ack struct {
						ID      string `json:"id"`
						Receipt string `json:"receipt"`
					}
					var acks []ack
					for _, j := range tk.Jobs {
						acks = append(acks, ack{j.ID, j.Receipt})
					}
					b, _ := json.Marshal(map[string]any{"acks": acks})
					resp, err = cl.Post(base+"/ack", "application/json", bytes.NewReader(b))
					if err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						fmt.Fprintln(os.Stderr, "ack:", resp.Status)
						os.Exit(1)
					}
					done.Add(int64(len(tk.Jobs)))
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	k := done.Load()
	if *mode == "fill" || *mode == "farfill" {
		k = int64(*n)
	}
	fmt.Printf("%s: %d jobs in %s (%.0f/s)\n", *mode, k, d.Round(time.Millisecond), float64(k)/d.Seconds())
}

// put posts a put or batch put and exits on anything but success.
func put(cl *http.Client, url, body string) {
	resp, err := cl.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "put:", resp.Status)
		os.Exit(1)
	}
}

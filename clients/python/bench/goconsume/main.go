// Command goconsume is the Go side of clients/python/bench/bench.py: it
// puts n no-op jobs into a queue, then times client.Consume at the given
// concurrency until every job was handled, and prints jobs/s.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/client"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:7777", "server URL")
	queue := flag.String("queue", "bench-go", "queue")
	n := flag.Int("n", 10000, "jobs")
	conc := flag.Int("concurrency", 64, "handlers at once")
	flag.Parse()
	if err := run(*url, *queue, *n, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "goconsume:", err)
		os.Exit(1)
	}
}

func run(url, queue string, n, conc int) error {
	c := client.New(url)
	ctx := context.Background()
	batch := make([]client.PutOptions, 0, 1000)
	for i := 0; i < n; i += len(batch) {
		batch = batch[:0]
		for j := i; j < n && len(batch) < 1000; j++ {
			batch = append(batch, client.PutOptions{Payload: json.RawMessage(fmt.Sprint(j))})
		}
		if _, err := c.PutBatch(ctx, queue, batch); err != nil {
			return fmt.Errorf("put: %w", err)
		}
	}
	var done atomic.Int64
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var elapsed time.Duration
	err := c.Consume(cctx, []string{queue}, func(context.Context, *client.Job) (any, error) {
		if done.Add(1) == int64(n) {
			elapsed = time.Since(start)
			cancel()
		}
		return nil, nil
	}, client.Concurrency(conc), client.PollWait(time.Second), client.OnError(func(error) {}))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	fmt.Printf("%.1f\n", float64(n)/elapsed.Seconds())
	return nil
}

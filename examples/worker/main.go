// Command worker consumes the "emails" queue until interrupted, then stops
// cleanly: running jobs finish, prefetched ones are handed back.
//
//	CHRONOQ_URL=http://127.0.0.1:7777 go run ./examples/worker
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/chronoq/chronoq/client"
)

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func main() {
	queue := flag.String("queue", "emails", "queue to consume")
	concurrency := flag.Int("concurrency", 4, "jobs handled at once")
	flag.Parse()

	c := client.New(envOr("CHRONOQ_URL", "http://127.0.0.1:7777"), client.WithToken(os.Getenv("CHRONOQ_TOKEN")))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	err := c.Consume(ctx, []string{*queue}, func(ctx context.Context, j *client.Job) (any, error) {
		var e email
		if err := j.Decode(&e); err != nil {
			// Retrying will not fix a malformed payload, but the job's
			// tries bound the retries and the dead letters keep it.
			return nil, err
		}
		if e.To == "" {
			return nil, errors.New("no recipient")
		}
		log.Printf("sending %q to %s (attempt %d)", e.Subject, e.To, j.Attempt)
		return map[string]bool{"sent": true}, nil
	}, client.Concurrency(*concurrency))
	if err != nil {
		log.Fatal(err)
	}
	log.Print("stopped")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

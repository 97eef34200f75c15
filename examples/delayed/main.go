// Command delayed puts a job that becomes visible in a few seconds and
// waits for it with a long-poll take.
//
//	CHRONOQ_URL=http://127.0.0.1:7777 go run ./examples/delayed
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/chronoq/chronoq/client"
)

func main() {
	c := client.New(envOr("CHRONOQ_URL", "http://127.0.0.1:7777"), client.WithToken(os.Getenv("CHRONOQ_TOKEN")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res, err := c.Put(ctx, "reminders", client.PutOptions{
		Payload: json.RawMessage(`{"remind":"stand up"}`),
		Delay:   3 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("put %s, %s until %s\n", res.ID, res.State, res.ActivateAt.Format(time.RFC3339Nano))

	// An absolute time works too: tomorrow at 08:00 UTC.
	tomorrow := time.Now().UTC().Truncate(24 * time.Hour).Add(32 * time.Hour)
	if _, err := c.Put(ctx, "reminders", client.PutOptions{Payload: json.RawMessage(`{"remind":"coffee"}`), At: tomorrow}); err != nil {
		log.Fatal(err)
	}

	start := time.Now()
	jobs, err := c.Take(ctx, "reminders", client.TakeOptions{Wait: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		fmt.Printf("got %s after %s: %s\n", j.ID, time.Since(start).Round(time.Millisecond), j.Payload)
		if _, err := c.Ack(ctx, j.Queue, j.ID, j.Receipt, nil); err != nil {
			log.Fatal(err)
		}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

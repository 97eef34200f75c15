// Command producer puts jobs into the "emails" queue.
//
//	CHRONOQ_URL=http://127.0.0.1:7777 go run ./examples/producer -n 10
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/chronoq/chronoq/client"
)

func main() {
	n := flag.Int("n", 10, "jobs to put")
	queue := flag.String("queue", "emails", "queue to put into")
	flag.Parse()

	c := client.New(envOr("CHRONOQ_URL", "http://127.0.0.1:7777"), client.WithToken(os.Getenv("CHRONOQ_TOKEN")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// One at a time: each put carries a generated idempotency key, so the
	// client's retries after a network error never put a job twice.
	for i := range *n {
		payload, _ := json.Marshal(map[string]any{"to": fmt.Sprintf("user%d@example.com", i), "subject": "hello"})
		res, err := c.Put(ctx, *queue, client.PutOptions{
			Payload: payload,
			Tags:    map[string]string{"campaign": "welcome"},
		})
		if err != nil {
			log.Fatalf("put: %v", err)
		}
		fmt.Println(res.ID, res.State)
	}

	// Many at once: a batch is all or nothing.
	batch := make([]client.PutOptions, 0, *n)
	for i := range *n {
		batch = append(batch, client.PutOptions{Payload: json.RawMessage(fmt.Sprintf(`{"to":"batch%d@example.com"}`, i))})
	}
	results, err := c.PutBatch(ctx, *queue, batch)
	if err != nil {
		log.Fatalf("put batch: %v", err)
	}
	fmt.Printf("batch: %d jobs\n", len(results))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

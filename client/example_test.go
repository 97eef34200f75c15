package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/chronoq/chronoq/client"
)

func Example() {
	c := client.New("http://127.0.0.1:7777")
	ctx := context.Background()

	res, err := c.Put(ctx, "emails", client.PutOptions{
		Payload: json.RawMessage(`{"to":"a@b.c"}`),
		Delay:   10 * time.Second,
		Key:     "user:42",
		Tags:    map[string]string{"user_id": "42"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.ID, res.State)
}

func ExampleClient_Consume() {
	c := client.New("http://127.0.0.1:7777")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	err := c.Consume(ctx, []string{"emails"}, func(ctx context.Context, j *client.Job) (any, error) {
		var msg struct{ To string }
		if err := j.Decode(&msg); err != nil {
			return nil, err // nacked; the queue's backoff decides the retry
		}
		return map[string]bool{"sent": true}, nil // acked with this result
	}, client.Concurrency(8), client.GracePeriod(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_List() {
	c := client.New("http://127.0.0.1:7777")
	ctx := context.Background()

	it := c.List(ctx, "emails", client.Filter{States: []string{client.StateDead}})
	for it.Next(ctx) {
		fmt.Println(it.Job().ID, it.Job().LastError)
	}
	if err := it.Err(); err != nil {
		log.Fatal(err)
	}
}

func ExampleError() {
	c := client.New("http://127.0.0.1:7777")
	ctx := context.Background()

	_, err := c.Ack(ctx, "emails", "01JD3W0Q8Z6M1N2P3Q4R5S6T7V", "stale-receipt", nil)
	switch {
	case errors.Is(err, client.ErrConflict):
		// The reservation ran out and the job went to another worker.
	case errors.Is(err, client.ErrNotFound):
		// The job is gone (acked, cancelled, purged).
	case err != nil:
		var e *client.Error
		if errors.As(err, &e) {
			log.Printf("server said %d %s: %s", e.Status, e.Code, e.Message)
		}
	}
}

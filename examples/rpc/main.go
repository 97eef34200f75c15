// Command rpc runs a worker and calls it through the queue: Call puts a
// job and waits for the result the worker acks with.
//
//	CHRONOQ_URL=http://127.0.0.1:7777 go run ./examples/rpc
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/chronoq/chronoq/client"
)

type request struct {
	Width  int `json:"w"`
	Height int `json:"h"`
}

type response struct {
	Pixels int `json:"pixels"`
}

func main() {
	c := client.New(envOr("CHRONOQ_URL", "http://127.0.0.1:7777"), client.WithToken(os.Getenv("CHRONOQ_TOKEN")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The server side of the call; usually another process.
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() {
		workerDone <- c.Consume(wctx, []string{"resize"}, func(ctx context.Context, j *client.Job) (any, error) {
			var r request
			if err := j.Decode(&r); err != nil {
				return nil, err
			}
			return response{Pixels: r.Width * r.Height}, nil
		}, client.Concurrency(2))
	}()

	payload, _ := json.Marshal(request{Width: 128, Height: 96})
	res, err := c.Call(ctx, "resize", client.PutOptions{Payload: payload}, 10*time.Second)
	if errors.Is(err, client.ErrWaitTimeout) {
		// The job is still there; its result can be fetched later.
		log.Fatalf("no answer yet for job %s (state %s)", res.ID, res.State)
	}
	if err != nil {
		log.Fatal(err)
	}
	var out response
	if err := json.Unmarshal(res.Result, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("job %s: %d pixels\n", res.ID, out.Pixels)

	stopWorker()
	if err := <-workerDone; err != nil {
		log.Fatal(err)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

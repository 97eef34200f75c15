// Command fifo shows per-key FIFO: jobs of one user are handled one at a
// time and in order, while different users' jobs run in parallel.
//
//	CHRONOQ_URL=http://127.0.0.1:7777 go run ./examples/fifo
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/chronoq/chronoq/client"
)

type step struct {
	User string `json:"user"`
	Seq  int    `json:"seq"`
}

func main() {
	c := client.New(envOr("CHRONOQ_URL", "http://127.0.0.1:7777"), client.WithToken(os.Getenv("CHRONOQ_TOKEN")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const users, steps = 3, 4
	for seq := range steps {
		for u := range users {
			user := fmt.Sprintf("user:%d", u)
			payload, _ := json.Marshal(step{User: user, Seq: seq})
			if _, err := c.Put(ctx, "account-events", client.PutOptions{Payload: payload, Key: user}); err != nil {
				log.Fatal(err)
			}
		}
	}

	var mu sync.Mutex
	last := map[string]int{}
	handled := 0
	wctx, stop := context.WithCancel(ctx)
	err := c.Consume(wctx, []string{"account-events"}, func(ctx context.Context, j *client.Job) (any, error) {
		var s step
		if err := j.Decode(&s); err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := last[s.User]; ok && s.Seq != prev+1 {
			log.Printf("out of order for %s: %d after %d", s.User, s.Seq, prev)
		}
		last[s.User] = s.Seq
		fmt.Printf("%s step %d\n", s.User, s.Seq)
		if handled++; handled == users*steps {
			stop()
		}
		return nil, nil
	}, client.Concurrency(4))
	if err != nil {
		log.Fatal(err)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Requests are recycled (newRequest, release): under concurrent puts,
// queued puts and other calls, every caller still hears its own answer.
// A put answered with another put's id would show here as a job whose
// payload is not the one its caller sent.
func TestRecycledRequestsKeepTheirAnswers(t *testing.T) {
	b := open(t, t.TempDir(), 0)
	defer b.Close()
	ctx := context.Background()
	const workers, each = 16, 60
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				payload := fmt.Sprintf("%q", fmt.Sprintf("w%d-%d", w, i))
				var res engine.PutResult
				var err error
				switch i % 3 {
				case 0:
					res, err = b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte(payload)})
				case 1:
					res, err = b.PutQueued(ctx, "default", "q", engine.PutRequest{Payload: []byte(payload)})()
				default:
					// Another kind of call through the same pool.
					if _, err = b.GetQueue(ctx, "default", "q"); err == nil {
						res, err = b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte(payload)})
					}
				}
				if err != nil {
					errs <- err
					return
				}
				j, err := b.Peek(ctx, "default", "q", res.ID)
				if err != nil {
					errs <- fmt.Errorf("peek %s: %w", res.ID, err)
					return
				}
				if string(j.Data) != payload {
					errs <- fmt.Errorf("put of %s answered with job %s holding %s", payload, res.ID, j.Data)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkBrokerPut is a durable put through the broker from 64
// goroutines (go test -bench BrokerPut -benchmem ./internal/broker): the
// allocations per put are the request's path (the loop, the log, the
// syncer), not the network's.
func BenchmarkBrokerPut(b *testing.B) {
	br, err := Open(Options{Dir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	ctx := context.Background()
	payload := []byte(`"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456"`)
	b.SetParallelism(32) // × GOMAXPROCS goroutines
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := br.Put(ctx, "default", "q", engine.PutRequest{Payload: payload}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// A request that reaches the loop's queue after the loop's final drain —
// a sender that found the broker running, then lost the race with Close
// — is refused once the loop is gone, instead of waiting forever (a far
// bucket rewrite did, and Close waited for it).
func TestRequestStrandedByCloseIsRefused(t *testing.T) {
	b := open(t, t.TempDir(), 0)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// What submit's send does when it passes the stop check just before
	// Close and lands after the final drain.
	stranded := make([]*request, 3)
	for i := range stranded {
		stranded[i] = newRequest()
		stranded[i].fn = func(time.Time) (any, error) { return "ran", nil }
		b.reqs <- stranded[i]
	}
	done := make(chan error, len(stranded))
	for _, r := range stranded {
		go func() {
			b.await(r)
			done <- r.err
		}()
	}
	for range stranded {
		select {
		case err := <-done:
			if err != errClosed {
				t.Errorf("a stranded request answered %v, want errClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a stranded request is still waiting")
		}
	}
}

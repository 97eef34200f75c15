package broker

import (
	"context"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// A payload read that races with compaction — the loop answered with the
// payload's old place, then compaction moved it and dropped the segment
// before the bytes were read — answers from the new place, never with
// unavailable.
func TestPayloadReadRacingCompactionReadsTheNewPlace(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, 16<<10)
	defer b.Close()
	ctx := context.Background()
	year := 365 * 24 * time.Hour
	pinned, err := b.Put(ctx, "default", "slow", engine.PutRequest{Payload: []byte("see you next year"), Delay: &year})
	if err != nil {
		t.Fatal(err)
	}
	// the loop's answer, before the bytes are read
	stale, err := call(b, ctx, func(now time.Time) (engine.Job, error) { return b.eng.Peek(now, "default", "slow", pinned.ID) })
	if err != nil || stale.Payload.Segment != 1 {
		t.Fatalf("peek: %v %+v", err, stale.Payload)
	}
	consumed(t, b, 400)
	deadline := time.Now().Add(10 * time.Second)
	for b.log.Segments()[0].Number == 1 && time.Now().Before(deadline) {
		b.Stats(ctx) // let the loop turn: it compacts between batches
		time.Sleep(20 * time.Millisecond)
	}
	if b.log.Segments()[0].Number == 1 {
		t.Fatal("segment 1 was never removed")
	}
	if err := b.fillJob(&stale); err != nil || string(stale.Data) != "see you next year" {
		t.Fatalf("read after the move: %v %q", err, stale.Data)
	}
	if stale.Payload.Segment == 1 {
		t.Fatal("the job still points at the removed segment")
	}
}

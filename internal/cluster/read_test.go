package cluster

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// trio is three members whose messages the test delivers by hand.
type trio struct {
	t     *testing.T
	nodes map[uint64]*Node
	cut   map[uint64]bool
	now   time.Time
}

func newTrio(t *testing.T) *trio {
	tr := &trio{t: t, nodes: map[uint64]*Node{}, cut: map[uint64]bool{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	for id := uint64(1); id <= 3; id++ {
		n, err := Open(Config{ID: id, Peers: []uint64{1, 2, 3}, Dir: filepath.Join(dir, fmt.Sprint(id)),
			WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		tr.nodes[id] = n
	}
	return tr
}

// round processes every member and delivers what they sent, except to or
// from cut members; tick says which members tick first.
func (tr *trio) round(tick ...uint64) {
	for _, id := range tick {
		tr.nodes[id].Tick()
	}
	var msgs []raftpb.Message
	for id := uint64(1); id <= 3; id++ {
		if err := tr.nodes[id].Process(); err != nil {
			tr.t.Fatal(err)
		}
		msgs = append(msgs, tr.nodes[id].Outbox()...)
	}
	for _, m := range msgs {
		if !tr.cut[m.From] && !tr.cut[m.To] {
			tr.nodes[m.To].Step(m)
		}
	}
}

func (tr *trio) leader() *Node {
	for id := uint64(1); id <= 3; id++ {
		if tr.nodes[id].CanExec() == nil && !tr.cut[id] {
			return tr.nodes[id]
		}
	}
	return nil
}

func (tr *trio) waitLeader(tick ...uint64) *Node {
	for i := 0; i < 500; i++ {
		if l := tr.leader(); l != nil {
			return l
		}
		tr.round(tick...)
	}
	tr.t.Fatal("no leader")
	return nil
}

func (tr *trio) exec(n *Node, linearize bool, fn func(e *engine.Engine, now time.Time) (any, error)) *Proposal {
	tr.now = tr.now.Add(time.Millisecond)
	p := n.Exec(tr.now, linearize, fn)
	for i := 0; i < 50 && !p.Done; i++ {
		tr.round()
	}
	return p
}

// A leader cut off from the others, whose clock has not yet told it so
// (CheckQuorum has not run), must not answer a read from state a new
// leader has changed since.
func TestCutOffLeaderDoesNotServeStaleReads(t *testing.T) {
	tr := newTrio(t)
	old := tr.waitLeader(1, 2, 3)
	p := tr.exec(old, true, func(e *engine.Engine, now time.Time) (any, error) {
		return e.Put(now, "default", "q", engine.PutRequest{Payload: []byte("x"), ID: "job-1"})
	})
	if !p.Done || p.Err != nil {
		t.Fatalf("put: done %v err %v", p.Done, p.Err)
	}
	tr.cut[old.ID()] = true
	var others []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != old.ID() {
			others = append(others, id)
		}
	}
	// Only the others' clocks run: they elect a new leader, which deletes
	// the job.
	next := tr.waitLeader(others...)
	p = tr.exec(next, true, func(e *engine.Engine, now time.Time) (any, error) {
		return nil, e.Cancel(now, "default", "q", "job-1", "")
	})
	if !p.Done || p.Err != nil {
		t.Fatalf("cancel on the new leader: done %v err %v", p.Done, p.Err)
	}
	p = tr.exec(old, true, func(e *engine.Engine, now time.Time) (any, error) {
		return e.Peek(now, "default", "q", "job-1")
	})
	if p.Done && p.Err == nil {
		t.Fatalf("the cut-off leader answered a read with %+v after the new leader deleted the job", p.Res)
	}
	// Healed, it learns of the new term and the read fails instead of
	// answering stale state.
	delete(tr.cut, old.ID())
	for i := 0; i < 200 && !p.Done; i++ {
		tr.round(1, 2, 3)
	}
	if !p.Done || p.Err == nil {
		t.Fatalf("after healing: done %v err %v res %+v", p.Done, p.Err, p.Res)
	}
}

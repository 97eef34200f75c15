package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
)

// Membership changes of a cluster member (docs/cluster.md, "Add, remove
// or replace a member"); the raft side is internal/cluster/membership.go.

// ClusterMember is one member in ClusterStatus.
type ClusterMember struct {
	ID       uint64 `json:"id"`
	PeerAddr string `json:"peer_addr,omitempty"`
	// Role is "voter" or "learner" (a learner receives the log but does
	// not vote until the leader promotes it).
	Role string `json:"role"`
}

// MemberChange is the answer to AddMember and RemoveMember.
type MemberChange struct {
	ID      uint64 `json:"id"`
	Index   uint64 `json:"index"` // the conf-change entry
	Warning string `json:"warning,omitempty"`
}

// changeWait bounds how long AddMember and RemoveMember wait for their
// entry to apply.
const changeWait = 10 * time.Second

// onLoop runs fn on the loop goroutine.
func (b *Broker) onLoop(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case b.cl.ctl <- func() { fn(); close(done) }:
	case <-b.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-b.done:
		return errClosed
	}
}

func notMember() error {
	return &engine.Error{Code: engine.CodeBadRequest, Message: "this server is not a cluster member"}
}

// AddMember adds member id (peer address addr) as a learner, on the
// leader; it answers once the change is applied here. The leader promotes
// the learner to voter by itself once its log caught up.
func (b *Broker) AddMember(ctx context.Context, id uint64, addr string) (MemberChange, error) {
	if b.cl == nil {
		return MemberChange{}, notMember()
	}
	var idx uint64
	var err error
	if e := b.awaitCaughtUp(ctx); e != nil {
		return MemberChange{}, e
	}
	if e := b.onLoop(ctx, func() { idx, err = b.cl.node.AddLearner(id, addr) }); e != nil {
		return MemberChange{}, e
	}
	if err != nil {
		return MemberChange{}, err
	}
	b.lg.Info("cluster: adding a member as learner", "node", id, "peer_addr", addr, "index", idx)
	return MemberChange{ID: id, Index: idx}, b.waitChange(ctx, idx, func(ms []cluster.Member) bool {
		for _, m := range ms {
			if m.ID == id {
				return true
			}
		}
		return false
	})
}

// RemoveMember removes member id, on the leader (which cannot remove
// itself: the server hands leadership over first). It answers once the
// change is applied here.
func (b *Broker) RemoveMember(ctx context.Context, id uint64) (MemberChange, error) {
	if b.cl == nil {
		return MemberChange{}, notMember()
	}
	var idx uint64
	var warn string
	var err error
	// Raft's view of which voters answer is reset every election timeout
	// and refilled by their next answers: a refusal for a lost quorum is
	// asked again for a moment before it stands.
	if e := b.awaitCaughtUp(ctx); e != nil {
		return MemberChange{}, e
	}
	for try := 0; ; try++ {
		if e := b.onLoop(ctx, func() { idx, warn, err = b.cl.node.RemoveMember(id) }); e != nil {
			return MemberChange{}, e
		}
		if engine.CodeOf(err) != cluster.CodeWouldLoseQuorum || try == 5 {
			break
		}
		select {
		case <-ctx.Done():
			return MemberChange{}, err
		case <-time.After(b.opts.Cluster.TickInterval * 2):
		}
	}
	if err != nil {
		return MemberChange{}, err
	}
	b.lg.Info("cluster: removing a member", "node", id, "index", idx, "warning", warn)
	return MemberChange{ID: id, Index: idx, Warning: warn}, b.waitChange(ctx, idx, func(ms []cluster.Member) bool {
		for _, m := range ms {
			if m.ID == id {
				return false
			}
		}
		return true
	})
}

// awaitCaughtUp waits (at most holdCatchUp, as the loop holds a client's
// request) while this member was just elected and has not committed an
// entry of its term, so that a membership change sent to it a moment after
// an election is not refused "catching up".
func (b *Broker) awaitCaughtUp(ctx context.Context) error {
	deadline := time.Now().Add(holdCatchUp)
	for {
		var catching bool
		if err := b.onLoop(ctx, func() { catching = b.cl.node.CatchingUp() }); err != nil {
			return err
		}
		if !catching || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // the change itself answers
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitChange waits until the conf change at idx is applied and done says
// the membership shows it.
func (b *Broker) waitChange(ctx context.Context, idx uint64, done func([]cluster.Member) bool) error {
	ctx, cancel := context.WithTimeout(ctx, changeWait)
	defer cancel()
	for {
		var applied bool
		var members []cluster.Member
		var lost error
		err := b.onLoop(ctx, func() {
			_, a, _ := b.cl.node.Status()
			applied, members = a >= idx, b.cl.node.Members()
			if !applied && b.cl.node.CanExec() != nil {
				lost = b.cl.node.CanExec()
			}
		})
		switch {
		case err != nil:
			return &engine.Error{Code: engine.CodeUnavailable, Message: fmt.Sprintf("the membership change at log index %d is not applied yet: check chronoq cluster status", idx)}
		case applied && done(members):
			return nil
		case applied:
			return &engine.Error{Code: cluster.CodeUnknownOutcome, Message: "the membership change was dropped (leadership changed): check chronoq cluster status and retry"}
		case lost != nil && engine.CodeOf(lost) == cluster.CodeNotLeader:
			return &engine.Error{Code: cluster.CodeUnknownOutcome, Message: "leadership changed before the membership change committed: check chronoq cluster status and retry"}
		}
		select {
		case <-ctx.Done():
			return &engine.Error{Code: engine.CodeUnavailable, Message: fmt.Sprintf("the membership change at log index %d is not applied yet: check chronoq cluster status", idx)}
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// PeerRemovedMe is the transport's word that a peer refused this member
// as removed from the cluster.
func (b *Broker) PeerRemovedMe(reason string) {
	if b.cl == nil {
		return
	}
	go b.onLoop(context.Background(), func() { b.cl.node.MarkRemoved(reason) })
}

// publishMembership, on the loop after each Process, tells the server
// about membership changes and that this member was removed.
func (b *Broker) publishMembership() {
	cl := b.cl
	n := cl.node
	if why := n.Removed(); why != "" && cl.removedWhy.Load() == nil {
		cl.removedWhy.Store(&why)
		if f := b.opts.Cluster.OnRemoved; f != nil {
			f(why)
		}
	}
	self := false
	for _, m := range n.Members() {
		if m.ID == b.opts.Cluster.ID {
			self = true
		}
	}
	cl.isMember.Store(self)
	if n.CanExec() == nil {
		n.Promote()
	}
}

// membershipReady is the membership part of Ready.
func (b *Broker) membershipReady() error {
	if why := b.cl.removedWhy.Load(); why != nil {
		return &engine.Error{Code: cluster.CodeRemoved, Message: fmt.Sprintf("this node was removed from the cluster (%s) and takes no part in it", *why)}
	}
	if !b.cl.isMember.Load() {
		return &engine.Error{Code: CodeNoQuorum, Message: fmt.Sprintf("this node is not a member yet: add it on the leader with chronoq cluster add %d PEER_ADDR", b.opts.Cluster.ID)}
	}
	return nil
}

// statusMembers fills the membership part of ClusterStatus (on the loop).
func (b *Broker) statusMembers(st *ClusterStatus) {
	for _, m := range b.cl.node.Members() {
		role := "voter"
		if m.Learner {
			role = "learner"
			st.Learners = append(st.Learners, m.ID)
		}
		st.Members = append(st.Members, ClusterMember{ID: m.ID, PeerAddr: m.Addr, Role: role})
	}
	st.ChangeIndex, _ = b.cl.node.ChangeInFlight()
	st.Removed = b.cl.node.Removed()
}

// membershipRank is this member's rank among the other voters than id
// (PeerDown).
func (b *Broker) membershipRank(id uint64) int {
	rank := 0
	for _, m := range b.cl.node.Members() {
		if !m.Learner && m.ID != id && m.ID < b.opts.Cluster.ID {
			rank++
		}
	}
	return rank
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// ClusterOptions makes the broker a member of a raft group
// (docs/cluster.md): its log is the raft log, and its loop drives the
// member.
type ClusterOptions struct {
	ID    uint64
	Peers []uint64 // every voter, this member included (bootstrap)
	// Transport sends raft messages to peers; it must not block.
	Transport Transport
	// TickInterval is raft's tick (default 100 ms): elections take 10
	// ticks without a heartbeat, heartbeats go every tick.
	TickInterval time.Duration
	// Entropy replaces crypto/rand for receipts and ids (tests).
	Entropy io.Reader
	// OnCommit, when set, is told how long each batch that wrote waited
	// from being decided on the leader to being committed.
	OnCommit func(d time.Duration)
	// Addrs are the peer addresses of Peers (written into the bootstrap
	// entries); Join makes a fresh member wait to be added instead of
	// bootstrapping (cluster_members.go).
	Addrs map[uint64]string
	Join  bool
	// OnMembership, when set, is told on the loop about every applied
	// membership change (the transport follows it); OnRemoved once this
	// member was removed from the cluster.
	OnMembership func(members []cluster.Member, removed []uint64)
	OnRemoved    func(why string)
	// Raft snapshots and log compaction (docs/cluster.md, "Snapshots and
	// log compaction"): a member snapshots after SnapshotEntries applied
	// entries or SnapshotBytes of log (defaults cluster.DefaultSnapshot*;
	// SnapshotEntries ^uint64(0) never) and keeps SnapshotCatchUp entries
	// before it for followers that lag a little (^uint64(0): none).
	SnapshotEntries, SnapshotCatchUp uint64
	SnapshotBytes                    int64
	// SnapshotTurnJobs: jobs a snapshot walks per loop turn (default
	// cluster.DefaultSnapshotTurnJobs).
	SnapshotTurnJobs int
	// StreamSnapshots: the transport streams snapshot items
	// (cluster.TransportConfig.SnapshotItems is Broker.SnapshotItems), so
	// a snapshot of any size reaches a follower.
	StreamSnapshots bool
}

// Transport carries raft messages between members.
type Transport interface {
	Send(msgs []raftpb.Message)
}

// CodeNoQuorum answers a request a member cannot serve because it knows
// no leader (a minority partition, an election under way).
const CodeNoQuorum engine.Code = "no_quorum"

// clusterState is the broker's part of a member.
type clusterState struct {
	node   *cluster.Node
	inbox  chan raftpb.Message
	turns  []turn
	tr     Transport
	lead   atomic.Uint64 // the leader this member knows (read off the loop by Ready)
	status chan chan ClusterStatus
	ctl    chan func() // runs on the loop

	leaderChanges uint64
	held          []heldRequest // arrived while a new leader caught up
	campaignAt    time.Time     // stand for election then, if still leaderless
	campaigns     int           // attempts left after the leader's connection ended

	// leaderLost is when the member last stopped knowing a leader (unix
	// ns; read off the loop by the server's forwarding).
	leaderLost atomic.Int64
	removedWhy atomic.Pointer[string] // set once this member was removed
	isMember   atomic.Bool            // the membership holds this member
}

// heldRequest waits for a new leader to catch up with the log (at most
// holdCatchUp), instead of failing a client a moment before it would be
// served.
type heldRequest struct {
	r     *request
	since time.Time
}

const holdCatchUp = 3 * time.Second

// turn is one loop turn's requests on the leader: they are answered when
// every entry the turn produced (or could have observed) has committed.
type turn struct {
	p       *cluster.Proposal
	reqs    []*request
	pubs    []outPub
	decided time.Time // when the leader decided it; zero if it wrote nothing
}

// ClusterStatus is what a member knows of the group.
type ClusterStatus struct {
	ID      uint64 `json:"id"`
	Role    string `json:"role"`
	Term    uint64 `json:"term"`
	Leader  uint64 `json:"leader"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
	// Match is, on the leader, each member's last log index known to
	// match the leader's.
	Match map[uint64]uint64 `json:"match,omitempty"`
	// LeaderChanges counts the leader changes this member saw since it
	// started; Proposals the entries it proposed as leader.
	LeaderChanges uint64 `json:"leader_changes"`
	Proposals     uint64 `json:"proposals"`
	// Members is the membership this member applied (cluster_members.go);
	// Learners the ids among them that do not vote yet; ChangeIndex the
	// log index of a membership change proposed here and not applied yet;
	// Removed why this member no longer takes part ("" while it does).
	Members     []ClusterMember `json:"members,omitempty"`
	Learners    []uint64        `json:"learners,omitempty"`
	ChangeIndex uint64          `json:"change_index,omitempty"`
	Removed     string          `json:"removed,omitempty"`
	// Snapshot is the index of the member's newest raft snapshot (0:
	// none); SnapshotsTaken and SnapshotsInstalled count those it made
	// and those it received from a leader since it started.
	Snapshot           uint64 `json:"snapshot_index"`
	SnapshotsTaken     uint64 `json:"snapshots_taken"`
	SnapshotsInstalled uint64 `json:"snapshots_installed"`
}

func (b *Broker) openCluster() error {
	co := b.opts.Cluster
	if co.TickInterval == 0 {
		co.TickInterval = 100 * time.Millisecond
	}
	if co.Transport == nil {
		return errors.New("broker: a cluster member needs a transport")
	}
	// A payload read that fails its checksum dead-letters the jobs that
	// own the bytes through the log, as on a single node (docs/cluster.md,
	// "Damaged payloads").
	b.opts.WAL.OnDamage = b.onDamage
	node, err := cluster.Open(cluster.Config{
		ID:        co.ID,
		Peers:     co.Peers,
		Dir:       b.walDir(),
		WAL:       b.opts.WAL,
		Engine:    engine.Options{Entropy: co.Entropy},
		Logger:    b.lg,
		SendEarly: co.Transport.Send,
		OnEntry:   b.onEntry,
		Addrs:     co.Addrs,
		Join:      co.Join,
		OnMembership: func(ms []cluster.Member, removed []uint64) {
			if co.OnMembership != nil {
				co.OnMembership(ms, removed)
			}
		},

		SnapshotEntries:  co.SnapshotEntries,
		SnapshotBytes:    co.SnapshotBytes,
		SnapshotCatchUp:  co.SnapshotCatchUp,
		SnapshotStream:   co.StreamSnapshots,
		SnapshotTurnJobs: co.SnapshotTurnJobs,
	})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	b.cl = &clusterState{node: node, inbox: make(chan raftpb.Message, 4096), tr: co.Transport, status: make(chan chan ClusterStatus), ctl: make(chan func())}
	b.publishMembership()
	b.log = node.Log()
	b.eng = node.Engine()
	// The hub follows the log (cluster_channels.go).
	b.chans.hub = pubsub.New(pubsub.Options{Clock: b.now})
	return nil
}

// Receive hands the loop a raft message from a peer. A full inbox drops
// it: raft retransmits.
func (b *Broker) Receive(m raftpb.Message) {
	if b.cl == nil {
		return
	}
	select {
	case b.cl.inbox <- m:
	default:
		cluster.DiscardMessage(m)
	}
}

// SnapshotItems streams the items of the member's snapshot at index (for
// the transport, off the loop: cluster.Node.SnapshotItems).
func (b *Broker) SnapshotItems(index uint64, fn func(item []byte) error) error {
	if b.cl == nil {
		return errors.New("broker: not a cluster member")
	}
	return b.cl.node.SnapshotItems(index, fn)
}

// SnapshotFailed tells the member that streaming a snapshot to peer to
// broke off, so raft sends it again (after a heartbeat) instead of
// waiting for the snapshot timeout.
func (b *Broker) SnapshotFailed(to uint64) {
	if b.cl == nil {
		return
	}
	go func() {
		select {
		case b.cl.ctl <- func() { b.cl.node.SnapshotFailed(to) }:
		case <-b.done:
		}
	}()
}

// PeerDown tells the member that peer id's connection ended (its process
// died, typically). If id was the leader, the member forgets it and, after
// a pause that grows with its rank among the other members (so that
// usually one stands), stands for election: failover then takes a few
// round trips instead of raft's randomized election timeout. Pre-vote and
// CheckQuorum keep a live leader in place if the drop was only a blip.
func (b *Broker) PeerDown(id uint64) {
	if b.cl == nil {
		return
	}
	fn := func() {
		rank := b.membershipRank(id)
		if b.cl.node.Removed() == "" && b.cl.node.ForgetLeader(id) {
			b.lg.Info("cluster: the leader's connection ended; standing for election unless another member does first", "leader", id)
			b.cl.campaignAt = time.Now().Add(time.Duration(rank) * 3 * b.opts.Cluster.TickInterval / 2)
			b.cl.campaigns = 3
		}
	}
	go func() {
		select {
		case b.cl.ctl <- fn:
		case <-b.done:
		}
	}()
}

// ClusterLeader is the leader this member knows (0: none) and whether it
// is this member; readable from any goroutine.
func (b *Broker) ClusterLeader() (leader uint64, self bool) {
	if b.cl == nil {
		return 0, true
	}
	l := b.cl.lead.Load()
	return l, l != 0 && l == b.opts.Cluster.ID
}

// TransferLeadership hands leadership to the most caught-up peer when this
// member leads, and waits (bounded by ctx) until another member leads, so
// that stopping it costs clients no election timeout. It does nothing
// outside a cluster or on a follower.
func (b *Broker) TransferLeadership(ctx context.Context) {
	if b.cl == nil {
		return
	}
	if _, self := b.ClusterLeader(); !self {
		return
	}
	res := make(chan uint64, 1)
	select {
	case b.cl.ctl <- func() { res <- b.cl.node.TransferLeadership() }:
	case <-b.done:
		return
	case <-ctx.Done():
		return
	}
	to := <-res
	if to == 0 {
		return
	}
	b.lg.Info("cluster: handing leadership over before stopping", "to", to)
	for {
		if lead, self := b.ClusterLeader(); !self && lead != 0 {
			b.lg.Info("cluster: leadership handed over", "leader", lead)
			return
		}
		select {
		case <-ctx.Done():
			b.lg.Warn("cluster: leadership not handed over in time; stopping anyway")
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TransferLeadershipTo asks the leader to hand over to member to and
// waits (bounded by ctx) until to leads. It fails on a follower (naming
// the leader) and for an id that is not a member.
func (b *Broker) TransferLeadershipTo(ctx context.Context, to uint64) error {
	if b.cl == nil {
		return &engine.Error{Code: engine.CodeBadRequest, Message: "this server is not a cluster member"}
	}
	if lead, self := b.ClusterLeader(); !self {
		return &engine.Error{Code: cluster.CodeNotLeader, Message: fmt.Sprintf("ask the leader (node %d)", lead)}
	}
	res := make(chan bool, 1)
	select {
	case b.cl.ctl <- func() { res <- b.cl.node.TransferTo(to) }:
	case <-b.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	if !<-res {
		if to == b.opts.Cluster.ID {
			return nil // already leads
		}
		return &engine.Error{Code: engine.CodeBadRequest, Field: "to", Message: fmt.Sprintf("node %d is not a member of this cluster", to)}
	}
	for {
		if lead, _ := b.ClusterLeader(); lead == to {
			return nil
		}
		select {
		case <-ctx.Done():
			return &engine.Error{Code: engine.CodeUnavailable, Message: fmt.Sprintf("node %d did not take over in time (is it caught up and reachable?)", to)}
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ClusterStatus reports this member's view (zero outside a cluster).
func (b *Broker) ClusterStatus() (ClusterStatus, bool) {
	if b.cl == nil {
		return ClusterStatus{}, false
	}
	ch := make(chan ClusterStatus, 1)
	select {
	case b.cl.status <- ch:
		return <-ch, true
	case <-b.done:
		return ClusterStatus{}, false
	}
}

func (b *Broker) clusterStatus() ClusterStatus {
	st, applied, _ := b.cl.node.Status()
	sn := b.cl.node.SnapshotStats()
	cs := ClusterStatus{ID: st.ID, Role: strings.TrimPrefix(st.RaftState.String(), "State"), Term: st.Term, Leader: st.Lead,
		Commit: st.Commit, Applied: applied, Match: b.cl.node.Progress(),
		LeaderChanges: b.cl.leaderChanges, Proposals: b.cl.node.Proposals(),
		Snapshot: sn.Index, SnapshotsTaken: sn.Taken, SnapshotsInstalled: sn.Installed}
	b.statusMembers(&cs)
	return cs
}

// clusterReady is Ready for a member: it must know a leader.
func (b *Broker) clusterReady() error {
	if err := b.membershipReady(); err != nil {
		return err
	}
	if b.cl.lead.Load() == 0 {
		return &engine.Error{Code: CodeNoQuorum, Message: "this node knows no leader: no quorum is reachable"}
	}
	return nil
}

// clusterLoop is the loop of a member: step peer messages and ticks,
// handle Ready (persist, send, apply, answer), and on the leader run the
// batch and propose what it decided.
func (b *Broker) clusterLoop() {
	defer close(b.done)
	cl := b.cl
	tick := time.NewTicker(b.opts.Cluster.TickInterval)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	batch := make([]*request, 0, b.opts.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		case m := <-cl.inbox:
			b.step(m)
		case <-tick.C:
			cl.node.Tick()
		case <-timer.C:
		case ch := <-cl.status:
			ch <- b.clusterStatus()
		case fn := <-cl.ctl:
			fn()
		case <-b.stop:
			b.clusterShutdown()
			return
		}
	drain:
		for {
			reqs := b.reqs
			if len(batch) == cap(batch) {
				reqs = nil
			}
			select {
			case m := <-cl.inbox:
				b.step(m)
			case r := <-reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if !cl.campaignAt.IsZero() && !time.Now().Before(cl.campaignAt) {
			// A pre-vote the other members refused (they had not noticed
			// yet) is retried a few times before raft's own timeout.
			cl.campaignAt = time.Time{}
			if cl.node.Leader() == 0 && cl.campaigns > 0 {
				cl.campaigns--
				cl.node.Campaign()
				cl.campaignAt = time.Now().Add(3 * b.opts.Cluster.TickInterval)
			}
		}
		b.clusterProcess()
		now := b.now()
		if cl.node.CatchingUp() {
			for _, r := range batch {
				cl.held = append(cl.held, heldRequest{r, now})
			}
			k := 0
			for _, h := range cl.held {
				if now.Sub(h.since) > holdCatchUp {
					h.r.res, h.r.err = nil, unavailable("the leader is still catching up with the log; retry shortly")
					h.r.finish()
					continue
				}
				cl.held[k] = h
				k++
			}
			clear(cl.held[k:])
			cl.held = cl.held[:k]
			b.clusterResetTimer(timer, now)
			continue
		}
		if len(cl.held) > 0 {
			all := make([]*request, 0, len(cl.held)+len(batch))
			for _, h := range cl.held {
				all = append(all, h.r)
			}
			batch = append(all, batch...)
			clear(cl.held)
			cl.held = cl.held[:0]
		}
		b.eng = cl.node.Engine()
		if cl.node.CanExec() == nil {
			st, _, _ := cl.node.Status()
			b.memberTakeOver(st.Term)
		}
		var served []*request
		proposed := cl.node.Proposals()
		p := cl.node.Exec(now, len(batch) > 0, func(e *engine.Engine, now time.Time) (any, error) {
			for _, r := range batch {
				r.run(b, now)
			}
			served = b.waiters.serve(b, now)
			b.queueEvents(now)
			return nil, nil
		})
		reqs := make([]*request, 0, len(batch)+len(served))
		for _, r := range batch {
			if !r.park && !r.answered {
				reqs = append(reqs, r)
			}
		}
		for _, r := range served {
			if !r.park && !r.answered {
				reqs = append(reqs, r)
			}
		}
		if p.Err != nil && engine.CodeOf(p.Err) == cluster.CodeNotLeader && cl.lead.Load() == 0 {
			p.Err = &engine.Error{Code: CodeNoQuorum, Message: "no leader is known: this node cannot reach a quorum"}
		}
		t := turn{p: p, reqs: reqs, pubs: b.takeOut()}
		if cl.node.Proposals() != proposed {
			t.decided = time.Now()
		}
		cl.turns = append(cl.turns, t)
		b.clusterProcess()
		// Shrinking the job table changes no state, only where jobs sit in
		// memory, so every member does it on its own (compact.go).
		b.eng = cl.node.Engine()
		b.compact.shrink(b)
		b.clusterResetTimer(timer, now)
	}
}

// clusterResetTimer is resetTimer for a member: while it writes a raft
// snapshot (a bounded part per Process) the loop turns again at once.
func (b *Broker) clusterResetTimer(t *time.Timer, now time.Time) {
	if !b.cl.node.SnapshotBusy() {
		b.resetTimer(t, now)
		return
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(0)
}

func (b *Broker) step(m raftpb.Message) {
	if err := b.cl.node.Step(m); err != nil {
		if m.Type == raftpb.MsgSnap {
			// A refused snapshot leaves this member behind: worth saying.
			b.lg.Warn("cluster: snapshot from the leader refused", "from", m.From, "err", err)
			return
		}
		b.lg.Debug("cluster: peer message refused", "from", m.From, "type", m.Type.String(), "err", err)
	}
}

// clusterProcess handles raft's Readys, sends, and answers the turns that
// completed.
func (b *Broker) clusterProcess() {
	cl := b.cl
	before, _, _ := cl.node.Status()
	if err := cl.node.Process(); err != nil {
		b.fail(err)
	}
	b.publishMembership()
	if out := cl.node.Outbox(); len(out) > 0 {
		cl.tr.Send(out)
	}
	st, _, _ := cl.node.Status()
	if st.Lead != cl.lead.Load() {
		b.lg.Info("cluster: leader changed", "id", st.ID, "leader", st.Lead, "term", st.Term)
		cl.lead.Store(st.Lead)
		cl.leaderChanges++
		if st.Lead == 0 {
			cl.leaderLost.Store(time.Now().UnixNano())
		}
	}
	if st.Applied != before.Applied || b.eng != cl.node.Engine() {
		b.eng = cl.node.Engine()
		b.refreshTokens()
	}
	b.memberChannelsStep(st.Lead == st.ID && st.ID != 0)
	if cl.node.CanExec() != nil && len(b.waiters.dl) > 0 {
		// Parked long-polls end empty on a member that no longer leads:
		// their clients ask again, and reach the new leader.
		b.waiters.releaseAll()
	}
	k := 0
	for _, t := range cl.turns {
		if !t.p.Done {
			cl.turns[k] = t
			k++
			continue
		}
		if t.p.Err == nil {
			b.deliver(t.pubs)
			b.delivered(t.p.Index)
			if !t.decided.IsZero() && b.opts.Cluster.OnCommit != nil {
				b.opts.Cluster.OnCommit(time.Since(t.decided))
			}
		}
		for _, r := range t.reqs {
			if t.p.Err != nil {
				r.res, r.err = nil, t.p.Err
			}
			r.finish()
		}
	}
	clear(cl.turns[k:])
	cl.turns = cl.turns[:k]
}

func (b *Broker) clusterShutdown() {
	b.refuseQueued()
	for _, h := range b.cl.held {
		h.r.res, h.r.err = nil, errClosed
		h.r.finish()
	}
	b.cl.held = nil
	for _, t := range b.cl.turns {
		for _, r := range t.reqs {
			r.res, r.err = nil, &engine.Error{Code: cluster.CodeUnknownOutcome, Message: "server shut down before the change committed; it may or may not have been applied"}
			r.finish()
		}
	}
	b.cl.turns = nil
}

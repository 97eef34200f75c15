package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// Error codes a member adds to the engine's (they travel the same way to
// clients: docs/api.md error bodies).
const (
	// CodeNotLeader: this member does not decide commands; the error
	// message names the leader when one is known.
	CodeNotLeader engine.Code = "not_leader"
	// CodeUnknownOutcome: the member lost leadership after proposing the
	// change; it may or may not commit (retry with the same client id).
	CodeUnknownOutcome engine.Code = "unknown_outcome"
)

// Config configures a member.
type Config struct {
	ID uint64
	// Peers are the voters a fresh member bootstraps with (itself
	// included). A member whose log already holds raft state ignores them.
	Peers []uint64
	// Group is the raft group id written into every record (1 today).
	Group uint64
	// Dir is the member's log directory.
	Dir string
	WAL wal.Options
	// Engine options for the replica's engine; its Sink is set here. The
	// leader draws receipts and ids from Engine.Entropy.
	Engine engine.Options
	Logger *slog.Logger
	// ElectionTick and HeartbeatTick count Tick calls (defaults 10 and 1).
	ElectionTick, HeartbeatTick int
	// OnApplied, when set, is called whenever the engine holds exactly the
	// state after entry (index, term): after a follower applies it, and on
	// the leader after the command that proposed it. Tests hash the state
	// there.
	OnApplied func(index, term uint64)
	// SendEarly, when set, receives a leader's messages before its own
	// fdatasync, so that the followers write in parallel with it (raft
	// allows it: the leader counts itself towards a quorum only once its
	// own write is durable). Followers' messages always wait for the sync.
	SendEarly func([]raftpb.Message)
	// OnEntry, when set, sees each committed entry the engine applies
	// from the log (not the ones this leader decided itself), before it
	// is applied: the broker hands durable channel publications to its
	// hub there.
	OnEntry func(index uint64, ent *engine.Entry)
	// Addrs are the peer addresses of Peers: a fresh member writes them
	// into its bootstrap entries (membership.go).
	Addrs map[uint64]string
	// Join makes a fresh member wait to be added by the leader instead of
	// bootstrapping a configuration of its own (ignored once the log holds
	// raft state).
	Join bool
	// OnMembership, when set, is called on the member's goroutine with
	// the members whenever an applied conf change altered them.
	OnMembership func(members []Member, removed []uint64)
	// Raft snapshots (snapshot.go): one is due after SnapshotEntries
	// applied entries or SnapshotBytes of log since the last (defaults
	// DefaultSnapshotEntries, DefaultSnapshotBytes; SnapshotEntries
	// ^uint64(0) never); SnapshotCatchUp entries before it stay for
	// followers that lag a little (^uint64(0): none); a snapshot larger
	// than SnapshotMaxSend bytes is not sent to a follower in memory.
	SnapshotEntries, SnapshotCatchUp uint64
	SnapshotBytes, SnapshotMaxSend   int64
	// SnapshotTurnJobs bounds the jobs a snapshot's walk takes per
	// Process (default DefaultSnapshotTurnJobs; tests lower it to spread a
	// small state over many turns).
	SnapshotTurnJobs int
	// SnapshotStream: the member's Transport streams snapshot items
	// (TransportConfig.SnapshotItems is Node.SnapshotItems), so a MsgSnap
	// carries only a descriptor and a snapshot of any size is sent
	// (snapshot.go, "Sending a snapshot").
	SnapshotStream bool
}

// Node is one member: its log (the raft log), its raft.RawNode and its
// engine, owned by one goroutine. Drive it by turns: Step what arrived and
// Tick, then Process; run commands with Exec on the leader; Process again;
// send Outbox.
type Node struct {
	cfg Config
	// sendable is the newest snapshot, read by the transport's senders
	// (SnapshotItems) off the member's goroutine.
	sendable atomic.Pointer[checkpoint]
	lg       *slog.Logger
	log      *wal.Log
	store    *Storage
	rn       *raft.RawNode
	eng      *engine.Engine
	sink     nodeSink

	lastIndex  uint64 // raft's last index, as the Readys so far told it
	applied    uint64 // last committed entry applied to the engine
	ahead      uint64 // last entry whose effects the engine holds (>= applied)
	leader     bool
	leaderTerm uint64
	termStart  uint64 // a leader's first entry of its term (0: not yet known)
	own        map[uint64]ownEntry
	pending    []*Proposal
	lastTime   int64 // time of the last entry the engine holds (unix ms)
	out        []raftpb.Message
	failed     error
	// confApplied is the last conf change handed to raft: a rebuild
	// applies entries again, raft must see each change once.
	confApplied uint64
	readSeq     uint64 // ReadIndex request contexts
	proposals   uint64 // entries this member proposed as leader
	// Membership (membership.go).
	mem        membership
	confIndex  uint64 // the last conf change this leader proposed
	removedWhy string // set once this member was removed
	joining    bool   // started empty with Join: must be added as a learner
	memChanged bool   // an applied conf change altered the membership
	snap       snapState
}

// ownEntry is an entry this leader decided and wrote itself.
type ownEntry struct {
	term uint64
	time int64
	pos  wal.Position
	body []byte // the frame body, readable before the log writes it
}

// Proposal is the outcome of one Exec: Done once the entries it produced
// are committed (or it failed).
type Proposal struct {
	Res   any
	Err   error
	Index uint64 // the last entry the command's answer depends on
	Term  uint64
	Done  bool
	read  []byte // a ReadIndex request not yet answered
}

// Open recovers a member from its log (or bootstraps a fresh one).
func Open(cfg Config) (*Node, error) {
	if cfg.ID == 0 {
		return nil, errors.New("cluster: node id must be at least 1")
	}
	if cfg.Group == 0 {
		cfg.Group = 1
	}
	if cfg.ElectionTick == 0 {
		cfg.ElectionTick = 10
	}
	if cfg.HeartbeatTick == 0 {
		cfg.HeartbeatTick = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.WAL.Logger == nil {
		cfg.WAL.Logger = cfg.Logger
	}
	log, err := wal.Open(cfg.Dir, cfg.WAL)
	if err != nil {
		return nil, fmt.Errorf("cluster: open log: %w", err)
	}
	rl := &wal.RaftLog{Group: cfg.Group}
	rs := &replayState{rl: rl}
	// Segments before a snapshot are deleted: replay from the oldest one
	// left (LoadStorageAt checks that the log continues the snapshot).
	var from wal.Position
	if segs := log.Segments(); len(segs) > 0 {
		from = segs[0].FirstPos
		rs.firstSeg = segs[0].Number
	}
	if _, err := log.Replay(from, rs.add); err != nil {
		log.Close()
		return nil, fmt.Errorf("cluster: replay log %s: %w", cfg.Dir, err)
	}
	var snapMeta raftpb.SnapshotMetadata
	if rs.ckpt != nil {
		rs.trim()
		snapMeta = rs.ckpt.meta
	}
	store, err := LoadStorageAt(rl, snapMeta, log)
	if err != nil {
		log.Close()
		return nil, err
	}
	fresh := len(rl.Entries) == 0 && !rl.HasState && rs.ckpt == nil
	mem, err := loadMembership(rl, rs.ckpt)
	if err != nil {
		log.Close()
		return nil, err
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:            cfg.ID,
		ElectionTick:  cfg.ElectionTick,
		HeartbeatTick: cfg.HeartbeatTick,
		Storage:       store,
		MaxSizePerMsg: 1 << 20,
		// Entries are decided and applied on the leader before raft sees
		// them, so raft must never drop a proposal for size.
		MaxUncommittedEntriesSize: 0,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		// A follower's engine must never decide: proposals are refused
		// there, not forwarded.
		DisableProposalForwarding: true,
		// A leader that a conf change removed must not go on leading.
		StepDownOnRemoval: true,
		Logger:            discardRaftLogger{},
	})
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	if fresh && !cfg.Join {
		if len(cfg.Peers) == 0 {
			log.Close()
			return nil, errors.New("cluster: a fresh member needs its peers")
		}
		peers := make([]raft.Peer, len(cfg.Peers))
		for i, id := range cfg.Peers {
			// Every member bootstraps the same entries from the same
			// --peers: the addresses travel with the membership.
			peers[i] = raft.Peer{ID: id, Context: encodeConfContext(cfg.Addrs[id])}
			mem.apply(raftpb.ConfChange{Type: raftpb.ConfChangeAddNode, NodeID: id, Context: peers[i].Context}.AsV2())
		}
		if err := rn.Bootstrap(peers); err != nil {
			log.Close()
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	n := &Node{cfg: cfg, lg: cfg.Logger, log: log, store: store, rn: rn, own: map[uint64]ownEntry{}, mem: mem}
	if mem.removed[cfg.ID] {
		n.removedWhy = "its log holds its removal"
	}
	n.joining = fresh && cfg.Join
	n.lastIndex, _ = store.LastIndex()
	n.sink.n = n
	n.newEngine()
	if ck := rs.ckpt; ck != nil {
		if err := n.loadCheckpoint(ck); err != nil {
			log.Close()
			return nil, fmt.Errorf("cluster: load the raft snapshot at entry %d: %w", ck.meta.Index, err)
		}
		n.setCheckpoint(ck)
		store.snapData = n.snapshotData(ck)
	}
	return n, nil
}

func (n *Node) newEngine() {
	opts := n.cfg.Engine
	opts.Sink = &n.sink
	n.eng = engine.New(opts)
	n.applied, n.ahead, n.lastTime = 0, 0, 0
	clear(n.own)
}

// ID is the member's id.
func (n *Node) ID() uint64 { return n.cfg.ID }

// Engine is the replica's engine (for reads by the owning goroutine).
func (n *Node) Engine() *engine.Engine { return n.eng }

// Log is the member's log (payload reads).
func (n *Node) Log() *wal.Log { return n.log }

// Status is raft's view plus what the engine holds.
func (n *Node) Status() (st raft.BasicStatus, applied, ahead uint64) {
	return n.rn.BasicStatus(), n.applied, n.ahead
}

// ReadBlob reads a payload or result the engine refers to, including one
// in an entry this leader decided that the log has not written yet.
func (n *Node) ReadBlob(r engine.BlobRef) ([]byte, error) {
	if b, ok := n.ownBlob(r); ok {
		return b, nil
	}
	return n.log.ReadAt(r.Segment, r.Offset, r.Len)
}

// ownBlob finds a blob in an entry this leader decided.
func (n *Node) ownBlob(r engine.BlobRef) ([]byte, bool) {
	for _, o := range n.own {
		start := uint64(o.pos.Offset) + wal.FrameHeaderSize
		if o.pos.Segment == r.Segment && uint64(r.Offset) >= start && uint64(r.Offset)+uint64(r.Len) <= start+uint64(len(o.body)) {
			off := uint64(r.Offset) - start
			return o.body[off : off+uint64(r.Len)], true
		}
	}
	return nil, false
}

// TransferTo asks raft to hand leadership to member to (a no-op on a
// follower; raft ignores an unknown member).
func (n *Node) TransferTo(to uint64) bool {
	if !n.leader || to == n.cfg.ID {
		return false
	}
	if !n.isVoter(to) {
		return false
	}
	n.rn.TransferLeader(to)
	return true
}

// TransferLeadership asks raft to hand leadership to the voter whose log
// is furthest along (the leader's own excluded); it answers the target, 0
// when this member does not lead or has no peer to hand to.
func (n *Node) TransferLeadership() uint64 {
	if !n.leader {
		return 0
	}
	var best, match uint64
	for id, m := range n.Progress() {
		if id != n.cfg.ID && n.isVoter(id) && (best == 0 || m > match) {
			best, match = id, m
		}
	}
	if best != 0 {
		n.rn.TransferLeader(best)
	}
	return best
}

// Progress is, on the leader, how far each member's log is known to match
// the leader's (nil elsewhere).
func (n *Node) Progress() map[uint64]uint64 {
	st := n.rn.Status()
	if len(st.Progress) == 0 {
		return nil
	}
	out := make(map[uint64]uint64, len(st.Progress))
	for id, pr := range st.Progress {
		out[id] = pr.Match
	}
	return out
}

// Proposals counts the entries this member proposed as leader.
func (n *Node) Proposals() uint64 { return n.proposals }

// Failed is the error that stopped the member, if any.
func (n *Node) Failed() error { return n.failed }

// Tick advances raft's logical clock by one tick.
func (n *Node) Tick() {
	if n.removedWhy == "" {
		n.rn.Tick()
	}
	n.snapTick()
}

// ForgetLeader makes a follower forget leader id (when its connection
// dropped, say), so that it grants pre-votes at once instead of waiting
// out the election timeout. It answers whether id was the leader it knew.
func (n *Node) ForgetLeader(id uint64) bool {
	if n.leader || id == 0 || n.rn.BasicStatus().Lead != id {
		return false
	}
	return n.rn.ForgetLeader() == nil
}

// Campaign makes the member stand for election now.
func (n *Node) Campaign() error {
	if n.removedWhy != "" {
		return errors.New("cluster: this node was removed from the cluster")
	}
	return n.rn.Campaign()
}

// Step hands raft a message from a peer. Messages raft does not accept
// (from an unknown peer, say) are dropped: they change nothing.
func (n *Node) Step(m raftpb.Message) (err error) {
	if n.failed != nil {
		return n.failed
	}
	if n.removedWhy != "" {
		return fmt.Errorf("cluster: this node was removed from the cluster (%s): refusing %s from %d", n.removedWhy, m.Type, m.From)
	}
	defer n.recoverStep(m, &err)
	if err := checkSnapMessage(&m); err != nil {
		DiscardMessage(m)
		return fmt.Errorf("cluster: step %s from %d: %w", m.Type, m.From, err)
	}
	n.noteReceived(&m)
	if err := n.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) && !errors.Is(err, raft.ErrStepLocalMsg) {
		return fmt.Errorf("cluster: step %s from %d: %w", m.Type, m.From, err)
	}
	return nil
}

// recoverStep turns a raft panic on a peer's message into a stopped
// member: raft panics when a leader says entries are committed that this
// log does not hold — a member whose data directory was lost and came
// back under its old id (membership.go).
func (n *Node) recoverStep(m raftpb.Message, err *error) {
	r := recover()
	if r == nil {
		return
	}
	e := fmt.Errorf("raft stopped on %s from node %d: %v: this node's log lacks entries the cluster says it holds "+
		"(was its data directory lost? replace it under a new id: docs/cluster.md)", m.Type, m.From, r)
	if n.joining {
		e = fmt.Errorf("node %d started with --join and an empty data directory, but the cluster counts it as a voter holding entries (%v): "+
			"its id belonged to an earlier member; replace a member that lost its data under a new id (docs/cluster.md)", n.cfg.ID, r)
	}
	n.fail(e)
	*err = e
}

// Outbox returns and clears the messages to send.
func (n *Node) Outbox() []raftpb.Message {
	out := n.out
	n.out = nil
	return out
}

// Leader is the id of the leader this member knows, 0 if none.
func (n *Node) Leader() uint64 { return n.rn.BasicStatus().Lead }

// LastTime is the time of the last entry the engine holds: a new leader
// decides at no earlier time (docs/cluster.md, "Time across failover").
func (n *Node) LastTime() time.Time { return time.UnixMilli(n.lastTime).UTC() }

func notLeader(lead uint64) error {
	msg := "this node is not the leader"
	if lead != 0 {
		msg = fmt.Sprintf("this node is not the leader; the leader is node %d", lead)
	}
	return &engine.Error{Code: CodeNotLeader, Message: msg}
}

func unavailable(format string, args ...any) error {
	return &engine.Error{Code: engine.CodeUnavailable, Message: fmt.Sprintf(format, args...)}
}

// CatchingUp reports a new leader that has not yet committed an entry of
// its term: it will serve in a moment, so callers may hold requests.
func (n *Node) CatchingUp() bool {
	if n.failed != nil {
		return false
	}
	if !n.leader {
		// Elected, but the Ready that says so is not handled yet.
		return n.rn.BasicStatus().RaftState == raft.StateLeader
	}
	return n.termStart == 0 || n.applied < n.termStart
}

// CanExec says whether Exec would run a command: this member leads, has
// committed an entry of its term (so its engine holds every entry
// committed before it), and no leadership transfer is under way.
func (n *Node) CanExec() error {
	if n.failed != nil {
		return unavailable("this cluster member stopped: %v", n.failed)
	}
	if n.removedWhy != "" {
		return &engine.Error{Code: CodeRemoved, Message: "this node was removed from the cluster"}
	}
	st := n.rn.BasicStatus()
	if !n.leader || st.RaftState != raft.StateLeader || st.Term != n.leaderTerm {
		return notLeader(st.Lead)
	}
	if n.termStart == 0 || n.applied < n.termStart {
		return unavailable("the new leader is catching up with the log; retry shortly")
	}
	if st.LeadTransferee != raft.None {
		return notLeader(st.LeadTransferee)
	}
	return nil
}

// Exec runs a command on the leader's engine at now (never earlier than the
// last entry's time). Entries it produces are proposed and written to the
// log buffer; the proposal is Done when they commit. A command that
// produced nothing depends on what it observed: if the engine holds
// uncommitted entries, it is Done when they commit; otherwise, with
// linearize, once raft confirms (ReadIndex) that this member still leads
// and its applied index covers the commit index of that moment — a leader
// cut off from the others must not answer from state a new leader may
// have changed. Without linearize it is Done at once.
func (n *Node) Exec(now time.Time, linearize bool, fn func(e *engine.Engine, now time.Time) (any, error)) *Proposal {
	p := &Proposal{}
	if err := n.CanExec(); err != nil {
		p.Err, p.Done = err, true
		return p
	}
	if lt := n.LastTime(); now.Before(lt) {
		now = lt
	}
	n.sink.term = n.leaderTerm
	before := n.ahead
	p.Res, p.Err = fn(n.eng, now)
	p.Index, p.Term = n.ahead, n.sink.term
	if n.ahead != before && n.cfg.OnApplied != nil {
		n.cfg.OnApplied(n.ahead, n.sink.term)
	}
	switch {
	case p.Index > n.applied:
		n.pending = append(n.pending, p)
	case linearize:
		n.readSeq++
		p.read = binary.LittleEndian.AppendUint64(nil, n.readSeq)
		n.rn.ReadIndex(p.read)
		n.pending = append(n.pending, p)
	default:
		p.Done = true
	}
	return p
}

// nodeSink is the engine's Sink on a member: each entry the leader's
// engine decides becomes a raft proposal and a frame in the log buffer at
// the index raft gives it.
type nodeSink struct {
	n    *Node
	term uint64
}

func (s *nodeSink) Append(ent *engine.Entry) error {
	n := s.n
	if err := n.CanExec(); err != nil {
		return err
	}
	idx := n.lastIndex + 1
	buf := wal.AppendRaftEntry(make([]byte, 0, 256), &wal.RaftEntry{Group: n.cfg.Group, Term: s.term, Index: idx, Type: uint8(raftpb.EntryNormal)})
	buf = ent.Encode(buf)
	if err := n.rn.Propose(buf[wal.RaftEntryHeader:]); err != nil {
		return notLeader(n.rn.BasicStatus().Lead)
	}
	pos, err := n.log.Append(buf)
	if err != nil {
		// Raft holds an entry the log does not: this member cannot go on.
		n.fail(fmt.Errorf("append entry %d to the log: %w", idx, err))
		return unavailable("log append failed: %v", err)
	}
	ent.Locate(pos.Segment, pos.Offset+wal.FrameHeaderSize+wal.RaftEntryHeader)
	n.lastIndex, n.ahead, n.lastTime = idx, idx, ent.Time
	n.proposals++
	n.own[idx] = ownEntry{term: s.term, time: ent.Time, pos: pos, body: buf}
	return nil
}

func (n *Node) fail(err error) {
	if n.failed == nil {
		n.failed = err
		n.lg.Error("cluster member stopped", "id", n.cfg.ID, "err", err)
	}
	n.finishPending(unavailable("this cluster member stopped: %v", err))
}

func (n *Node) finishPending(err error) {
	for _, p := range n.pending {
		if !p.Done {
			p.Res, p.Err, p.Done = nil, err, true
		}
	}
	n.pending = n.pending[:0]
}

// Process handles every Ready raft has: persist entries and hard state
// with one write and one fdatasync, queue the messages, apply committed
// entries, answer the proposals they complete.
func (n *Node) Process() error {
	for n.failed == nil && n.rn.HasReady() {
		if err := n.processReady(n.rn.Ready()); err != nil {
			n.fail(err)
		}
	}
	n.maybeSnapshot()
	for n.failed == nil && n.rn.HasReady() {
		// The entry a snapshot's end stamps its time with goes out now.
		if err := n.processReady(n.rn.Ready()); err != nil {
			n.fail(err)
		}
	}
	return n.failed
}

func (n *Node) processReady(rd raft.Ready) error {
	n.roleChange()
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.installSnapshot(rd.Snapshot, rd.HardState); err != nil {
			return err
		}
	}
	n.noteSnapMessages(rd.Messages)
	pos := make([]wal.Position, len(rd.Entries))
	for i := range rd.Entries {
		e := &rd.Entries[i]
		if o, ok := n.own[e.Index]; ok {
			if o.term == e.Term {
				pos[i] = o.pos
				continue
			}
			return fmt.Errorf("entry %d of term %d replaces this leader's own entry of term %d without a change of leader", e.Index, e.Term, o.term)
		}
		if e.Index <= n.ahead && n.ahead > n.applied {
			return fmt.Errorf("entry %d of term %d arrived while the engine holds uncommitted entries up to %d", e.Index, e.Term, n.ahead)
		}
		p, err := n.log.Append(wal.AppendRaftEntry(nil, &wal.RaftEntry{Group: n.cfg.Group, Term: e.Term, Index: e.Index, Type: uint8(e.Type), Data: e.Data}))
		if err != nil {
			return fmt.Errorf("append entry %d: %w", e.Index, err)
		}
		pos[i] = p
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		hs := rd.HardState
		if _, err := n.log.Append(wal.AppendRaftState(nil, &wal.RaftState{Group: n.cfg.Group, Term: hs.Term, Vote: hs.Vote, Commit: hs.Commit})); err != nil {
			return fmt.Errorf("append hard state: %w", err)
		}
	}
	early := n.leader && n.cfg.SendEarly != nil && len(rd.Messages) > 0
	if early {
		n.cfg.SendEarly(rd.Messages)
	}
	if err := n.log.Commit(); err != nil {
		return fmt.Errorf("write raft state: %w", err)
	}
	if err := n.store.Append(rd.Entries, pos); err != nil {
		return fmt.Errorf("raft storage: %w", err)
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := n.store.SetHardState(rd.HardState); err != nil {
			return fmt.Errorf("raft storage: %w", err)
		}
	}
	if len(rd.Entries) > 0 {
		n.lastIndex = rd.Entries[len(rd.Entries)-1].Index
	}
	if n.leader && n.termStart == 0 {
		n.termStart = n.lastIndex
	}
	if !early {
		n.out = append(n.out, rd.Messages...)
	}
	for _, rs := range rd.ReadStates {
		for _, p := range n.pending {
			if p.read != nil && bytes.Equal(p.read, rs.RequestCtx) {
				p.read, p.Index = nil, rs.Index
			}
		}
	}
	for i := range rd.CommittedEntries {
		if err := n.apply(&rd.CommittedEntries[i]); err != nil {
			return err
		}
	}
	n.publishMembership()
	n.completePending()
	n.rn.Advance(rd)
	return nil
}

// roleChange follows raft's role, before a Ready is handled. A leader that steps down while its
// engine holds entries that have not committed drops that state: they may
// never commit. It rebuilds from the committed log and answers the waiting
// clients that the outcome is unknown.
func (n *Node) roleChange() {
	st := n.rn.BasicStatus()
	lead := st.RaftState == raft.StateLeader
	if n.leader && (!lead || st.Term != n.leaderTerm) {
		// Leadership of leaderTerm ended (possibly regained in a later
		// term between two Readys: the entries decided in the old term
		// are then still uncommitted and may be replaced).
		n.leader, n.termStart = false, 0
		n.lg.Info("cluster: this node is no longer the leader", "id", n.cfg.ID, "term", st.Term, "leader", st.Lead, "uncommitted", n.ahead-n.applied)
		n.finishPending(&engine.Error{Code: CodeUnknownOutcome, Message: "leadership changed before the change committed; it may or may not have been applied"})
		n.snapLeadershipLost()
		if n.ahead > n.applied {
			if err := n.rebuild(); err != nil {
				n.fail(err)
			}
		}
		clear(n.own)
	}
	if lead && !n.leader {
		n.leader, n.leaderTerm, n.termStart = true, st.Term, 0
		n.lg.Info("cluster: this node is now the leader", "id", n.cfg.ID, "term", st.Term)
	}
}

// rebuild drops the engine and applies the committed entries again.
func (n *Node) rebuild() error {
	applied := n.applied
	n.newEngine()
	if ck := n.snap.ckpt; ck != nil {
		if err := n.loadCheckpoint(ck); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
	}
	if applied <= n.applied {
		return nil
	}
	ents, err := n.store.Entries(n.applied+1, applied+1, 1<<62)
	if err != nil {
		return fmt.Errorf("rebuild: read committed entries: %w", err)
	}
	for i := range ents {
		if err := n.apply(&ents[i]); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
	}
	return nil
}

// apply applies one committed entry. The leader's engine already holds the
// entries it decided; everything else is decoded with its payloads located
// in this member's log and applied at the entry's own time.
func (n *Node) apply(e *raftpb.Entry) error {
	if e.Index <= n.applied {
		return nil
	}
	if e.Index != n.applied+1 {
		return fmt.Errorf("committed entry %d follows applied entry %d", e.Index, n.applied)
	}
	switch e.Type {
	case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
		if err := n.applyConf(e); err != nil {
			return err
		}
	case raftpb.EntryNormal:
		if len(e.Data) == 0 {
			break // a new leader's empty entry
		}
		if e.Index <= n.ahead {
			o, ok := n.own[e.Index]
			if !ok || o.term != e.Term {
				return fmt.Errorf("committed entry %d of term %d is not the one this leader applied ahead", e.Index, e.Term)
			}
			delete(n.own, e.Index)
			break
		}
		pos, err := n.store.Position(e.Index)
		if err != nil {
			return err
		}
		ent, err := engine.DecodeEntry(e.Data, pos.Segment, pos.Offset+wal.FrameHeaderSize+wal.RaftEntryHeader)
		if err != nil {
			return fmt.Errorf("committed entry %d at %s: %w", e.Index, pos, err)
		}
		if ent.Time < n.lastTime {
			return fmt.Errorf("committed entry %d has time %d, before the previous entry's %d", e.Index, ent.Time, n.lastTime)
		}
		applyHook(ent)
		if n.cfg.OnEntry != nil {
			n.cfg.OnEntry(e.Index, ent)
		}
		n.eng.Apply(ent)
		n.lastTime = ent.Time
	default:
		return fmt.Errorf("entry %d: unknown entry type %d", e.Index, e.Type)
	}
	n.applied = e.Index
	if n.ahead < n.applied {
		n.ahead = n.applied
		if n.cfg.OnApplied != nil && e.Type == raftpb.EntryNormal && len(e.Data) > 0 {
			n.cfg.OnApplied(e.Index, e.Term)
		}
	}
	return nil
}

// applyHook lets a test damage what followers apply, to check that the
// simulation notices (sim_test.go).
var applyHook = func(*engine.Entry) {}

// completePending answers the proposals whose entries have committed.
func (n *Node) completePending() {
	k := 0
	for _, p := range n.pending {
		if p.Done {
			continue
		}
		if p.read == nil && p.Index <= n.applied {
			p.Done = true
			continue
		}
		n.pending[k] = p
		k++
	}
	clear(n.pending[k:])
	n.pending = n.pending[:k]
}

// Close syncs and closes the log.
func (n *Node) Close() error { return n.log.Close() }

// Crash closes the log the way a crash would: what was appended but not
// yet written and synced is lost.
func (n *Node) Crash() error { return n.log.Crash() }

// discardRaftLogger keeps raft's own chatter out of chronoq's log; the
// member logs role changes itself.
type discardRaftLogger struct{}

func (discardRaftLogger) Debug(...any)                   {}
func (discardRaftLogger) Debugf(string, ...any)          {}
func (discardRaftLogger) Error(...any)                   {}
func (discardRaftLogger) Errorf(string, ...any)          {}
func (discardRaftLogger) Info(...any)                    {}
func (discardRaftLogger) Infof(string, ...any)           {}
func (discardRaftLogger) Warning(...any)                 {}
func (discardRaftLogger) Warningf(string, ...any)        {}
func (discardRaftLogger) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (discardRaftLogger) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (discardRaftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (discardRaftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }

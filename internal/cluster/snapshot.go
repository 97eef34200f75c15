package cluster

// Raft snapshots and log compaction of a member (docs/cluster.md,
// "Snapshots and log compaction").
//
// # Where a snapshot lives: in the member's own log
//
// A job's payload and result are references (segment, offset, length) into
// the member's log, so the bytes of a snapshot must sit where such a
// reference can point: a member writes its snapshot into its own log, as
// member-local frames that raft replay does not take for entries:
//
//	kind 0xC3, snapshot item, snapItemHeader bytes then an encoded engine
//	Entry whose payloads and results are inline:
//	  offset  size  field
//	       0     1  kind (0xC3)
//	       1     8  group id
//	       9     8  the index the snapshot's walk began at (I0 below;
//	                for a snapshot received from the leader, and for
//	                those written before snapshots were fuzzy, its
//	                raft index)
//	      17     4  the item's number in the snapshot (from 0)
//	      21     -  engine entry
//
//	kind 0xC4, snapshot commit, after the snapshot's items:
//	       0     1  kind (0xC4)
//	       1     8  group id
//	       9     8  raft index
//	      17     8  raft term
//	      25     8  time of the entry at index (unix ms)
//	      33     1  flags (1: received from the leader; it replaces the log)
//	      34     4  items
//	      38     8  item bytes (engine entries, headers excluded)
//	      46     4  conf state length c
//	      50     c  conf state (raftpb.ConfState encoding)
//	    50+c     -  membership with peer addresses and removed ids (JSON,
//	                membership.go: the conf-change entries it replaces
//	                carried them)
//
// A snapshot counts only once its commit frame is read after all its items
// (replay ignores items without one: a crash while writing them, or a
// snapshot abandoned; item number 0 starts a snapshot again, as a member
// that restarted writes one at the same index again). The commit frame's
// index is the items' index or a later one. Raft entries and hard states
// may come between a snapshot's items, which are written a part per turn.
// A hard state frame follows the commit frame, so the hard state survives
// the removal of the segments before the snapshot.
//
// # A fuzzy snapshot: the member keeps working while it is written
//
// A large state takes seconds to write, a bounded part per Process
// (snapTurnJobs jobs, snapTurnBudget of time), and meanwhile the member
// goes on applying committed entries and, on the leader, running
// commands. As on a single node (internal/engine/snapshot.go) the items
// are then a fuzzy state, made exact by the entries that came meanwhile:
//
//   - The walk begins at I0, the entry the engine holds then: the applied
//     one on a follower; on a leader the last one it decided (ahead),
//     committed or not. The first item (namespaces, queues, tokens,
//     channels, idempotency keys, counters) is the exact state at I0; the
//     job items after it are each the job's image at the moment it was
//     walked, some entry between I0 and the walk's end.
//   - Each Process first writes the entries that committed since the last
//     one as further items, exactly as the log holds them (engine entries
//     with their payloads and results inline), then walks on. So every
//     job item is at least as new as the entries written before it, and
//     every entry after I0 is written, in order, after the items walked
//     before it took effect.
//   - When the walk is over the engine holds entry E (ahead). A leader's
//     clock may have run past E's time (reads advance it) and the walk may
//     have seen the effects (a reservation expired): it then first
//     decides an entry with no records stamping its clock, which becomes
//     E. The snapshot is committed once E has committed and been applied,
//     at the applied index I1 >= E, with the entries up to I1 written and
//     the time of the last engine entry up to I1, the membership and conf
//     state raft holds at I1.
//   - Loading applies the items in order. Every record is an absolute
//     image or a delete (internal/engine/record.go): a job image older
//     than an entry after it is overwritten by that entry; an entry older
//     than an image after it restates what that image already holds, and
//     the last change of every job after I0 comes in an entry after any
//     image that predates it. Namespace, queue, token, channel and
//     idempotency records are in the exact first item and in entries
//     only. A purge or a queue delete removes jobs walked after it, which
//     the puts after it bring back. A publication below the channel's
//     offset is skipped (applyPublication). Counters only grow (max).
//     Time-derived transitions (activation, expiry) are a function of
//     each image and the clock, which reaches the same I1 time. A record
//     that restates a job with a reference (not inline) keeps the local
//     copy (engine.localRef). So the loaded state is the state at I1.
//   - The leader's walk may have seen entries that never commit: when it
//     loses leadership (its engine is rebuilt from committed entries), or
//     installs the leader's snapshot, the snapshot is abandoned before
//     its commit frame.
//
// # Re-homing payloads instead of relocating them
//
// Right after a part of the items is durable (every snapFlushBytes), the
// member points each job whose payload or result an item copied at the
// copy, but only if the job still refers to the very bytes copied
// (engine.Rehome): an image may be older than the job, so applying it
// again, as exact snapshots did, would undo later changes. A job whose
// blob changed since keeps its reference, into an entry after I0, whose
// own item re-homes it when it is written, or into an entry after I1,
// which raft storage keeps. So no live reference points before the
// snapshot's first item once it is committed, and every log segment
// before that item and before the oldest entry raft still holds can be
// deleted (dropSegments still checks the engine's live bytes per segment
// and keeps any segment a job points into: a mistake costs disk, not
// data). This replaces the single node's relocation
// (internal/broker/compact.go) in cluster mode: there a relocation is an
// ordinary logged change, which on a member would have to go through raft.
// The price is that each snapshot writes every live payload again; a
// snapshot is therefore due only once the log has grown by the previous
// snapshot's size (snapshotDue), which bounds what snapshots write to
// about what the clients wrote.
//
// # Sending a snapshot
//
// With Config.SnapshotStream (a member on the peer transport), raft.Snapshot.Data
// is only a descriptor (snapshotDesc: time, item count, item bytes,
// membership); the leader's transport sends the items after the MsgSnap on
// the same authenticated connection, reading them from the log one at a
// time (Node.SnapshotItems, safe off the loop), and the follower's
// transport writes them to a file as they come (transport.go,
// receiveSnapshot), checks count, bytes and a CRC-32C over them, and only
// then hands raft the message, whose Data then names that file
// (snapLocalVersion). Neither side holds more than one item in memory, so
// a snapshot of any size reaches a follower. A transfer that breaks off
// (leader gone, connection lost, the items' segments deleted by a newer
// snapshot) delivers nothing; the leader's raft sends again after
// snapTick's timeout reports the snapshot failed, or the new leader sends
// its own. Without SnapshotStream (the in-memory simulation) Data holds
// the items themselves (snapDataVersion), capped at Config.SnapshotMaxSend.
//
// A follower validates the data when the message arrives (never after raft
// accepted it) and writes it into its own log as its own snapshot, flagged
// as replacing the log, so its payload references point into its own files.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

const (
	snapItemKind    byte = 0xC3
	snapCommitKind  byte = 0xC4
	snapItemHeader       = 21
	snapCommitFixed      = 50

	snapFlagInstalled = 1

	// snapDataMagic starts raft.Snapshot.Data: magic u8, version u8,
	// time i64, membership length u32, membership (JSON, membership.go),
	// items u32, then items × (length u32, engine entry), then a CRC-32C
	// of everything before it.
	snapDataMagic   = 0xC5
	snapDataVersion = 1
	// snapDescVersion: the descriptor a streaming leader sends: magic u8,
	// version u8, time i64, items u32, item bytes u64, membership length
	// u32, membership. On the wire the MsgSnap is followed by items ×
	// (length u32, engine entry) and a CRC-32C of the descriptor and those
	// (transport.go).
	snapDescVersion = 2
	// snapLocalVersion: what the follower's transport hands raft once the
	// items are in a local file: the descriptor with this version, then
	// the CRC u32 and the file's path. The transport refuses it from a peer.
	snapLocalVersion = 3
	snapDescFixed    = 2 + 8 + 4 + 8 + 4
)

// Snapshot policy defaults (Config).
const (
	DefaultSnapshotEntries = 10000
	DefaultSnapshotBytes   = 64 << 20
	DefaultSnapshotCatchUp = 1000
	DefaultSnapshotMaxSend = 200 << 20
)

// How many log bytes of items go to the disk before their re-homing is
// applied (bounds the memory a snapshot holds, and the re-homing done in
// one Process: about 6,000 jobs of 100-byte payloads a MiB); how many job
// records one item holds at most.
var (
	snapFlushBytes = 1 << 20
	snapItemJobs   = 256
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpoint is a complete snapshot in the member's log.
type checkpoint struct {
	meta      raftpb.SnapshotMetadata
	time      int64 // time of the entry at meta.Index
	installed bool
	mem       membership // the membership at meta.Index, with addresses
	itemIndex uint64     // the index in its items' headers (where its walk began)
	items     []wal.Position
	bytes     int64
	commit    wal.Position // the commit frame
}

// snapState is a member's snapshot bookkeeping.
type snapState struct {
	ckpt    *checkpoint
	retryAt uint64 // no new attempt before this tick
	// forceAt: a member was added at this index while the log before it
	// is compacted away; the leader snapshots once it applied it, since
	// raft can only send the new member a snapshot whose configuration
	// holds it (an older one is refused by the member's raft).
	forceAt    uint64
	ticks      uint64
	sent       map[uint64]uint64 // follower → tick a MsgSnap went to it
	dataIndex  uint64            // data is the Data of the snapshot at dataIndex
	refused    uint64            // the snapshot found too large to send (logged once)
	bytesCheck uint64            // next applied index at which to count the log's bytes
	data       []byte
	run        *snapRun // the snapshot being written
	taken      uint64   // snapshots made here
	aborted    uint64   // snapshots abandoned (leadership lost, a leader's snapshot installed)
	during     uint64   // entries that committed while this member's snapshots were written
	lostLead   uint64   // snapshots abandoned because leadership ended
	keptLive   uint64   // times dropSegments kept a segment a live job pointed into
	installs   uint64   // snapshots received and installed
	lastTook   time.Duration
	received   string // the file of the last snapshot received (noteReceived)
}

// SnapshotStats is what a member did with snapshots.
type SnapshotStats struct {
	Index     uint64        // the newest snapshot's index (0: none)
	Taken     uint64        // snapshots this member made since it started
	Installed uint64        // snapshots it received from a leader
	LastTook  time.Duration // how long the last one took to make or install
	Aborted   uint64        // snapshots it abandoned before their commit frame
	During    uint64        // entries that committed while its snapshots were written
	Writing   uint64        // a snapshot is being written, begun at this entry (0: none)
}

// SnapshotStats reports the member's snapshots.
func (n *Node) SnapshotStats() SnapshotStats {
	st := SnapshotStats{Taken: n.snap.taken, Installed: n.snap.installs, LastTook: n.snap.lastTook, Aborted: n.snap.aborted, During: n.snap.during}
	if n.snap.ckpt != nil {
		st.Index = n.snap.ckpt.meta.Index
	}
	if n.snap.run != nil {
		st.Writing = n.snap.run.from
	}
	return st
}

func (n *Node) snapshotEntries() uint64 {
	if n.cfg.SnapshotEntries == 0 {
		return DefaultSnapshotEntries
	}
	return n.cfg.SnapshotEntries
}

func (n *Node) snapshotBytes() int64 {
	if n.cfg.SnapshotBytes == 0 {
		return DefaultSnapshotBytes
	}
	return n.cfg.SnapshotBytes
}

func (n *Node) snapshotMaxSend() int64 {
	if n.cfg.SnapshotMaxSend == 0 {
		return DefaultSnapshotMaxSend
	}
	return n.cfg.SnapshotMaxSend
}

func (n *Node) segmentSize() int64 {
	if n.cfg.WAL.SegmentSize == 0 {
		return wal.DefaultSegmentSize
	}
	return n.cfg.WAL.SegmentSize
}

// logBytesSince is how much the log holds after pos.
func (n *Node) logBytesSince(pos wal.Position) int64 {
	var total int64
	for _, s := range n.log.Segments() {
		switch {
		case s.Number > pos.Segment:
			total += s.Size
		case s.Number == pos.Segment:
			total += max(s.Size-int64(pos.Offset), 0)
		}
	}
	return total
}

// snapshotDue: enough entries or log bytes since the last snapshot, and
// the log grew by at least that snapshot's size (see the top of this
// file).
func (n *Node) snapshotDue() bool {
	if n.cfg.SnapshotEntries == ^uint64(0) || n.snap.ticks < n.snap.retryAt {
		return false
	}
	var from uint64
	var since wal.Position
	var last int64
	if ck := n.snap.ckpt; ck != nil {
		from, since, last = ck.meta.Index, ck.commit, ck.bytes
	}
	if n.applied <= from {
		return false
	}
	if n.snap.forceAt != 0 && from < n.snap.forceAt && n.applied >= n.snap.forceAt {
		return n.leader
	}
	if n.applied-from < n.snapshotEntries() && n.applied < n.snap.bytesCheck {
		return false // the byte count reads the segment table: every 16 entries
	}
	n.snap.bytesCheck = n.applied + 16
	grown := n.logBytesSince(since)
	if n.applied-from < n.snapshotEntries() && grown < n.snapshotBytes() {
		return false
	}
	return grown >= last
}

// maybeSnapshot runs after every Process: it advances a running
// snapshot, or starts one when due.
func (n *Node) maybeSnapshot() {
	if n.failed != nil {
		return
	}
	if n.snap.run == nil {
		if !n.snapshotDue() {
			return
		}
		n.beginSnapshot()
	}
	from := n.snap.run.from
	if err := n.stepSnapshot(); err != nil {
		n.dropSnapRun()
		n.fail(fmt.Errorf("snapshot begun at entry %d: %w", from, err))
	}
}

// SnapshotBusy says a snapshot's walk is under way: the caller should call
// Process again soon, even with nothing else to do. (A walk that is over
// waits only for entries to commit, which a Process handles.)
func (n *Node) SnapshotBusy() bool { return n.snap.run != nil && !n.snap.run.walked }

// snapTick runs on every tick: a MsgSnap that got no answer is reported
// failed so raft sends it again (raft waits for that report forever
// otherwise).
func (n *Node) snapTick() {
	n.snap.ticks++
	if len(n.snap.sent) == 0 {
		n.snap.data, n.snap.dataIndex = nil, 0
		return
	}
	st := n.rn.Status()
	for id, at := range n.snap.sent {
		pr, ok := st.Progress[id]
		if !n.leader || !ok || pr.State != tracker.StateSnapshot {
			delete(n.snap.sent, id)
			continue
		}
		if n.snap.ticks-at > uint64(10*n.cfg.ElectionTick) {
			n.rn.ReportSnapshot(id, raft.SnapshotFailure)
			delete(n.snap.sent, id)
		}
	}
}

// SnapshotFailed reports that a snapshot sent to follower id did not
// arrive (the transport's stream broke off): raft sends it again.
func (n *Node) SnapshotFailed(id uint64) {
	if _, ok := n.snap.sent[id]; !ok || !n.leader {
		return
	}
	delete(n.snap.sent, id)
	n.rn.ReportSnapshot(id, raft.SnapshotFailure)
}

// noteSnapMessages remembers the snapshots sent, for snapTick.
func (n *Node) noteSnapMessages(msgs []raftpb.Message) {
	for i := range msgs {
		if msgs[i].Type == raftpb.MsgSnap {
			if n.snap.sent == nil {
				n.snap.sent = map[uint64]uint64{}
			}
			n.snap.sent[msgs[i].To] = n.snap.ticks
		}
	}
}

// confState is the membership raft applies now: at the applied index, as
// conf changes are applied with their entries.
func (n *Node) confState() raftpb.ConfState {
	c := n.rn.Status().Config
	cs := raftpb.ConfState{
		Voters:         c.Voters[0].Slice(),
		VotersOutgoing: c.Voters[1].Slice(),
		AutoLeave:      c.AutoLeave,
	}
	for id := range c.Learners {
		cs.Learners = append(cs.Learners, id)
	}
	for id := range c.LearnersNext {
		cs.LearnersNext = append(cs.LearnersNext, id)
	}
	sortIDs(cs.Learners)
	sortIDs(cs.LearnersNext)
	return cs
}

func sortIDs(ids []uint64) {
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
}

// snapWriter appends a snapshot's items to the log, committing every
// snapFlushBytes; durable is called with each item, decoded with its
// blobs located in the log, once it is on disk, and with the references
// its blobs were copied from (per record: payload, result; nil for a
// snapshot received from the leader).
type snapWriter struct {
	n       *Node
	index   uint64
	ck      *checkpoint
	pend    [][]byte // item frames appended since the last commit
	pendPos []wal.Position
	pendOld [][][2]engine.BlobRef
	pendLen int
	durable func(*engine.Entry, [][2]engine.BlobRef) error
}

// newSnapWriter writes items whose headers carry index: the index the
// snapshot's walk began at (its commit frame then names the index it
// covers, at least that one).
func (n *Node) newSnapWriter(index uint64, durable func(*engine.Entry, [][2]engine.BlobRef) error) *snapWriter {
	return &snapWriter{n: n, index: index, ck: &checkpoint{itemIndex: index}, durable: durable}
}

func (w *snapWriter) add(ent []byte, old [][2]engine.BlobRef) error {
	frame := make([]byte, 0, snapItemHeader+len(ent))
	frame = append(frame, snapItemKind)
	frame = binary.LittleEndian.AppendUint64(frame, w.n.cfg.Group)
	frame = binary.LittleEndian.AppendUint64(frame, w.index)
	frame = binary.LittleEndian.AppendUint32(frame, uint32(len(w.ck.items)))
	frame = append(frame, ent...)
	pos, err := w.n.log.Append(frame)
	if err != nil {
		return fmt.Errorf("append snapshot item: %w", err)
	}
	w.ck.items = append(w.ck.items, pos)
	w.ck.bytes += int64(len(ent))
	w.pend, w.pendPos = append(w.pend, frame), append(w.pendPos, pos)
	w.pendOld = append(w.pendOld, append([][2]engine.BlobRef(nil), old...))
	w.pendLen += len(frame)
	if w.pendLen >= snapFlushBytes {
		return w.flush()
	}
	return nil
}

func (w *snapWriter) flush() error {
	if err := w.n.log.Commit(); err != nil {
		return fmt.Errorf("write snapshot items: %w", err)
	}
	for i, frame := range w.pend {
		pos := w.pendPos[i]
		ent, err := engine.DecodeEntry(frame[snapItemHeader:], pos.Segment, pos.Offset+wal.FrameHeaderSize+snapItemHeader)
		if err != nil {
			return fmt.Errorf("snapshot item at %s: %w", pos, err)
		}
		if err := w.durable(ent, w.pendOld[i]); err != nil {
			return err
		}
	}
	clear(w.pend)
	clear(w.pendOld)
	w.pend, w.pendPos, w.pendOld, w.pendLen = w.pend[:0], w.pendPos[:0], w.pendOld[:0], 0
	return nil
}

// finish writes the commit frame and the hard state after it, durably,
// then hands the last items to durable.
func (w *snapWriter) finish(meta raftpb.SnapshotMetadata, t int64, installed bool, mem membership, hs raftpb.HardState) (*checkpoint, error) {
	cs, err := meta.ConfState.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode conf state: %w", err)
	}
	mb := mem.encode()
	le := binary.LittleEndian
	b := make([]byte, 0, snapCommitFixed+len(cs)+len(mb))
	b = append(b, snapCommitKind)
	b = le.AppendUint64(b, w.n.cfg.Group)
	b = le.AppendUint64(b, meta.Index)
	b = le.AppendUint64(b, meta.Term)
	b = le.AppendUint64(b, uint64(t))
	var flags byte
	if installed {
		flags |= snapFlagInstalled
	}
	b = append(b, flags)
	b = le.AppendUint32(b, uint32(len(w.ck.items)))
	b = le.AppendUint64(b, uint64(w.ck.bytes))
	b = le.AppendUint32(b, uint32(len(cs)))
	b = append(b, cs...)
	b = append(b, mb...)
	pos, err := w.n.log.Append(b)
	if err != nil {
		return nil, fmt.Errorf("append snapshot commit: %w", err)
	}
	if _, err := w.n.log.Append(wal.AppendRaftState(nil, &wal.RaftState{Group: w.n.cfg.Group, Term: hs.Term, Vote: hs.Vote, Commit: hs.Commit})); err != nil {
		return nil, fmt.Errorf("append hard state: %w", err)
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	w.ck.meta, w.ck.time, w.ck.installed, w.ck.commit, w.ck.mem = meta, t, installed, pos, mem.clone()
	w.ck.itemIndex = w.index
	return w.ck, nil
}

// snapRun is a snapshot being written, fuzzily (see the top of this
// file): the walk takes a bounded number of jobs per Process
// (snapTurnJobs) while the member goes on applying entries and, on the
// leader, running commands; the entries that commit meanwhile are written
// as further items as they commit, and the snapshot's index is the applied
// index once it covers everything the walk saw.
type snapRun struct {
	w        *snapWriter
	it       *engine.SnapshotIter // nil once the walk is over
	from     uint64               // I0: the entry the engine held when the walk began
	logged   uint64               // entries up to this one are written as items
	walked   bool                 // the walk is over ...
	end      uint64               // ... and the engine held entry end then
	itemTime int64                // the walked items' time: that of entry from
	time     int64                // time of the last engine entry up to logged
	start    time.Time
	buf      []byte
	old      [][2]engine.BlobRef
	maxItem  int
}

// DefaultSnapshotTurnJobs bounds the jobs a snapshot walks per Process
// (Config.SnapshotTurnJobs).
const DefaultSnapshotTurnJobs = 4096

// snapTurnJobs overrides Config.SnapshotTurnJobs when set, and then no
// time budget applies (the simulation: a run is a function of its seed).
var snapTurnJobs = 0

// snapTurnBudget bounds the time a walk takes per Process besides the
// jobs: the messages and answers of that Process wait for it (the broker
// sends and answers after Process), so a turn that took 4096 jobs of a
// loaded machine's time would delay every write by a few such turns.
const snapTurnBudget = 2 * time.Millisecond

func (n *Node) turnJobs() int {
	switch {
	case snapTurnJobs > 0:
		return snapTurnJobs
	case n.cfg.SnapshotTurnJobs > 0:
		return n.cfg.SnapshotTurnJobs
	}
	return DefaultSnapshotTurnJobs
}

// beginSnapshot starts a fuzzy snapshot from the entry the engine holds
// now: the applied one on a follower, on a leader the last one it decided
// (ahead), committed or not.
func (n *Node) beginSnapshot() {
	eng := n.eng
	r := &snapRun{
		from:     n.ahead,
		logged:   n.ahead,
		itemTime: n.lastTime,
		time:     n.lastTime,
		start:    time.Now(),
		it:       eng.Snapshot(),
		maxItem:  int(min(int64(1<<20), n.segmentSize()/4)),
	}
	r.w = n.newSnapWriter(r.from, func(ent *engine.Entry, old [][2]engine.BlobRef) error {
		n.rehome(eng, ent, old)
		return nil
	})
	n.snap.run = r
}

// rehome points the jobs of a durable item at the item's copies of their
// blobs, but only a job that still refers to the very bytes copied (old,
// per record: payload and result): an image in a fuzzy snapshot may be
// older than the job, and the job's blob may have changed since.
func (n *Node) rehome(eng *engine.Engine, ent *engine.Entry, old [][2]engine.BlobRef) {
	for i := range ent.Records {
		rec := &ent.Records[i]
		if rec.Kind != engine.KindJob || i >= len(old) {
			continue
		}
		if b := &rec.Job.Payload; b.Data != nil && old[i][0].Len > 0 {
			eng.Rehome(rec.Job.NS, rec.Job.Queue, rec.Job.ID, old[i][0], b.Ref)
		}
		if b := &rec.Job.Result; b.Data != nil && old[i][1].Len > 0 {
			eng.Rehome(rec.Job.NS, rec.Job.Queue, rec.Job.ID, old[i][1], b.Ref)
		}
	}
}

// stepSnapshot advances the running snapshot: the entries committed since
// the last step become items, then the next jobs of the walk; once the
// walk is over and everything it saw has committed, it is finished.
func (n *Node) stepSnapshot() error {
	r := n.snap.run
	// Entries first: the jobs walked next are at least as new as they.
	if err := n.logEntries(n.applied); err != nil {
		return err
	}
	if r.it != nil {
		if err := n.walkSnapshot(); err != nil {
			return err
		}
	}
	if r.it == nil && !r.walked {
		if n.eng.Now().UnixMilli() != n.lastTime {
			// The walk may have seen state of a time after the last entry
			// (reads advance a leader's clock): the snapshot's time must
			// cover it, and be one every member agrees on.
			if !n.leader {
				n.abortSnapshot("the engine's clock is not the log's")
				n.snap.retryAt = n.snap.ticks + uint64(5*n.cfg.ElectionTick)
				return nil
			}
			if n.CanExec() != nil {
				return nil // a transfer under way: try again next turn, or lose leadership
			}
			n.sink.term = n.leaderTerm
			if err := n.sink.Append(&engine.Entry{Time: n.eng.Now().UnixMilli()}); err != nil {
				return nil
			}
			if n.cfg.OnApplied != nil {
				n.cfg.OnApplied(n.ahead, n.leaderTerm)
			}
		}
		r.walked, r.end = true, n.ahead
	}
	if r.walked && n.applied >= r.end {
		if err := n.logEntries(n.applied); err != nil {
			return err
		}
		return n.finishSnapshot()
	}
	return nil
}

// walkSnapshot writes the next jobs of the walk as items.
func (n *Node) walkSnapshot() error {
	r := n.snap.run
	turn := n.turnJobs()
	// Payloads of a batch put share a frame, read whole to check it: a
	// reader for this turn checks each frame once (wal.FrameReader).
	fr := n.log.NewFrameReader()
	began := time.Now()
	for done := 0; done < turn; {
		if done > 0 && snapTurnJobs == 0 && time.Since(began) > snapTurnBudget {
			return nil
		}
		ent := r.it.Next(min(snapItemJobs, turn-done))
		if ent == nil {
			r.it = nil
			return nil
		}
		done += len(ent.Records)
		recs := ent.Records
		for len(recs) > 0 {
			size := 0
			k := 0
			r.old = r.old[:0]
			for k < len(recs) && (k == 0 || size < r.maxItem) {
				rec := &recs[k]
				var old [2]engine.BlobRef
				if rec.Kind == engine.KindJob {
					for i, b := range []*engine.Blob{&rec.Job.Payload, &rec.Job.Result} {
						if b.Ref.Len == 0 {
							continue // a zero reference is a null payload, another an empty one: keep it
						}
						data, err := n.readBlobWith(fr, b.Ref)
						if err != nil {
							return fmt.Errorf("read job %s's blob at %d:%d: %w", rec.Job.ID, b.Ref.Segment, b.Ref.Offset, err)
						}
						b.Data, old[i] = data, b.Ref
						size += len(data)
					}
				}
				r.old = append(r.old, old)
				size += 64
				k++
			}
			part := engine.Entry{Time: r.itemTime, Records: recs[:k]}
			r.buf = part.Encode(r.buf[:0])
			if err := r.w.add(r.buf, r.old); err != nil {
				return err
			}
			recs = recs[k:]
		}
	}
	return nil
}

// readBlobWith is ReadBlob through fr.
func (n *Node) readBlobWith(fr *wal.FrameReader, r engine.BlobRef) ([]byte, error) {
	if b, ok := n.ownBlob(r); ok {
		return b, nil
	}
	return fr.ReadAt(r.Segment, r.Offset, r.Len)
}

// logEntries writes the committed entries after the last one written, up
// to upto, as items: their bytes as the log holds them (an engine entry,
// payloads and results inline), so that loading applies them after the
// walked items. Their inline blobs re-home like the walked ones.
func (n *Node) logEntries(upto uint64) error {
	r := n.snap.run
	for r.logged < upto {
		hi := min(upto, r.logged+256)
		ents, err := n.store.Entries(r.logged+1, hi+1, 1<<62)
		if err != nil {
			return fmt.Errorf("read entries %d to %d: %w", r.logged+1, hi, err)
		}
		for i := range ents {
			e := &ents[i]
			if e.Type != raftpb.EntryNormal || len(e.Data) == 0 {
				continue // conf changes travel in the commit frame's membership
			}
			pos, err := n.store.Position(e.Index)
			if err != nil {
				return err
			}
			ent, err := engine.DecodeEntry(e.Data, pos.Segment, pos.Offset+wal.FrameHeaderSize+wal.RaftEntryHeader)
			if err != nil {
				return fmt.Errorf("committed entry %d at %s: %w", e.Index, pos, err)
			}
			r.old = r.old[:0]
			for k := range ent.Records {
				var old [2]engine.BlobRef
				if rec := &ent.Records[k]; rec.Kind == engine.KindJob {
					if rec.Job.Payload.Data != nil {
						old[0] = rec.Job.Payload.Ref
					}
					if rec.Job.Result.Data != nil {
						old[1] = rec.Job.Result.Ref
					}
				}
				r.old = append(r.old, old)
			}
			r.time = ent.Time
			if err := r.w.add(e.Data, r.old); err != nil {
				return err
			}
		}
		r.logged = hi
	}
	return nil
}

// finishSnapshot commits the snapshot at the applied index, compacts
// raft's storage and deletes the log segments nothing needs any more.
func (n *Node) finishSnapshot() error {
	r := n.snap.run
	index := n.applied
	term, err := n.store.Term(index)
	if err != nil {
		return fmt.Errorf("term of entry %d: %w", index, err)
	}
	meta := raftpb.SnapshotMetadata{Index: index, Term: term, ConfState: n.confState()}
	ck, err := r.w.finish(meta, r.time, false, n.mem, n.store.hs)
	if err != nil {
		return err
	}
	n.snap.run = nil
	if err := n.store.CreateSnapshot(meta, n.snapshotData(ck)); err != nil {
		return err
	}
	keep := n.cfg.SnapshotCatchUp
	if keep == 0 {
		keep = DefaultSnapshotCatchUp
	} else if keep == ^uint64(0) {
		keep = 0
	}
	if index > keep {
		if err := n.store.Compact(index - keep); err != nil {
			return err
		}
	}
	n.setCheckpoint(ck)
	n.snap.taken++
	n.snap.during += index - r.from
	n.snap.lastTook = time.Since(r.start)
	n.dropSegments()
	n.lg.Info("cluster: snapshot written", "id", n.cfg.ID, "index", index, "began", r.from, "jobs", n.eng.Jobs(), "bytes", ck.bytes, "took", n.snap.lastTook.Round(time.Millisecond).String())
	return nil
}

// abortSnapshot drops a snapshot being written: its items stay in the log
// without a commit frame, which replay ignores.
func (n *Node) abortSnapshot(why string) {
	if n.snap.run == nil {
		return
	}
	n.lg.Info("cluster: snapshot abandoned", "id", n.cfg.ID, "began", n.snap.run.from, "why", why)
	n.dropSnapRun()
	n.snap.aborted++
}

// dropSnapRun forgets the running snapshot, ending its walk of the engine.
func (n *Node) dropSnapRun() {
	if r := n.snap.run; r != nil && r.it != nil {
		r.it.Close()
	}
	n.snap.run = nil
}

// snapLeadershipLost: a leader's walk may have seen entries that will
// never commit (the engine is rebuilt without them), so its snapshot goes.
func (n *Node) snapLeadershipLost() {
	if n.snap.run != nil {
		n.snap.lostLead++
		n.abortSnapshot("leadership lost")
	}
}

// takeSnapshot writes a whole snapshot at once (tests and measurements):
// the engine must hold only committed entries.
func (n *Node) takeSnapshot() error {
	if n.ahead > n.applied {
		return fmt.Errorf("the engine holds uncommitted entries up to %d (applied %d)", n.ahead, n.applied)
	}
	n.beginSnapshot()
	for n.snap.run != nil {
		r := n.snap.run
		if err := n.stepSnapshot(); err != nil {
			n.dropSnapRun()
			return err
		}
		if n.snap.run != nil && r.walked && n.applied < r.end {
			if err := n.Process(); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropSegments deletes the log segments before the newest snapshot's
// first item and before the oldest entry raft holds, unless a live job
// still points into one (which re-homing should have made impossible; it
// is checked so a mistake costs disk, not data).
func (n *Node) dropSegments() {
	ck := n.snap.ckpt
	if ck == nil {
		return
	}
	upto := ck.commit.Segment
	if len(ck.items) > 0 {
		upto = min(upto, ck.items[0].Segment)
	}
	if p, ok := n.store.FirstPosition(); ok {
		upto = min(upto, p.Segment)
	}
	for _, o := range n.own {
		upto = min(upto, o.pos.Segment)
	}
	live := n.eng.LiveBytes()
	for _, s := range n.log.Segments() {
		if s.Number >= upto {
			break
		}
		if live[s.Number] > 0 {
			n.lg.Warn("cluster: a live job still points before the snapshot; keeping the segment", "id", n.cfg.ID, "segment", s.Number)
			n.snap.keptLive++
			upto = s.Number
			break
		}
	}
	if err := n.log.RemoveSegmentsBefore(upto); err != nil {
		n.lg.Warn("cluster: removing log segments before the snapshot failed", "id", n.cfg.ID, "err", err)
	}
}

var errSnapshotTooLarge = errors.New("snapshot too large to send")

// snapshotData builds raft.Snapshot.Data for ck from the log, once per
// snapshot while followers wait for it (snapTick drops it).
func (n *Node) snapshotData(ck *checkpoint) func() ([]byte, error) {
	return func() ([]byte, error) {
		if n.snap.data != nil && n.snap.dataIndex == ck.meta.Index {
			return n.snap.data, nil
		}
		if n.cfg.SnapshotStream {
			return appendSnapDesc(nil, snapDescVersion, snapDesc{time: ck.time, items: uint32(len(ck.items)), bytes: uint64(ck.bytes), mem: ck.mem.encode()}), nil
		}
		mb := ck.mem.encode()
		size := ck.bytes + int64(len(ck.items))*4 + 22 + int64(len(mb))
		if size > n.snapshotMaxSend() {
			if n.snap.refused == ck.meta.Index {
				return nil, errSnapshotTooLarge // said once per snapshot: raft asks on every heartbeat
			}
			n.snap.refused = ck.meta.Index
			n.lg.Error("cluster: a follower needs a snapshot larger than this member sends", "id", n.cfg.ID, "index", ck.meta.Index, "bytes", size, "limit", n.snapshotMaxSend())
			return nil, errSnapshotTooLarge
		}
		le := binary.LittleEndian
		data := make([]byte, 0, size)
		data = append(data, snapDataMagic, snapDataVersion)
		data = le.AppendUint64(data, uint64(ck.time))
		data = le.AppendUint32(data, uint32(len(mb)))
		data = append(data, mb...)
		data = le.AppendUint32(data, uint32(len(ck.items)))
		for _, pos := range ck.items {
			body, err := n.readItem(pos, ck.itemIndex)
			if err != nil {
				n.lg.Error("cluster: cannot read the snapshot to send it", "id", n.cfg.ID, "err", err)
				return nil, err
			}
			data = le.AppendUint32(data, uint32(len(body)))
			data = append(data, body...)
		}
		data = le.AppendUint32(data, crc32.Checksum(data, castagnoli))
		n.snap.data, n.snap.dataIndex = data, ck.meta.Index
		return data, nil
	}
}

// snapDesc is a streamed snapshot's descriptor (snapDescVersion) or its
// local form (snapLocalVersion, with crc and path).
type snapDesc struct {
	time  int64
	items uint32
	bytes uint64
	mem   []byte // membership, encoded
	crc   uint32
	path  string
}

func appendSnapDesc(b []byte, version byte, d snapDesc) []byte {
	le := binary.LittleEndian
	b = append(b, snapDataMagic, version)
	b = le.AppendUint64(b, uint64(d.time))
	b = le.AppendUint32(b, d.items)
	b = le.AppendUint64(b, d.bytes)
	b = le.AppendUint32(b, uint32(len(d.mem)))
	b = append(b, d.mem...)
	if version == snapLocalVersion {
		b = le.AppendUint32(b, d.crc)
		b = append(b, d.path...)
	}
	return b
}

// parseSnapDesc reads a descriptor of the given version.
func parseSnapDesc(data []byte, version byte) (snapDesc, error) {
	le := binary.LittleEndian
	var d snapDesc
	if len(data) < snapDescFixed {
		return d, fmt.Errorf("snapshot descriptor of %d bytes, shorter than %d", len(data), snapDescFixed)
	}
	if data[0] != snapDataMagic || data[1] != version {
		return d, fmt.Errorf("snapshot descriptor starts with %#02x %d, want %#02x %d", data[0], data[1], snapDataMagic, version)
	}
	d.time = int64(le.Uint64(data[2:]))
	d.items = le.Uint32(data[10:])
	d.bytes = le.Uint64(data[14:])
	ml := uint64(le.Uint32(data[22:]))
	rest := data[snapDescFixed:]
	if ml > uint64(len(rest)) {
		return d, fmt.Errorf("snapshot descriptor: membership of %d bytes, only %d left", ml, len(rest))
	}
	d.mem, rest = rest[:ml], rest[ml:]
	if _, err := decodeMembership(d.mem); err != nil {
		return d, fmt.Errorf("snapshot descriptor: %w", err)
	}
	if version == snapLocalVersion {
		if len(rest) < 5 {
			return d, errors.New("local snapshot descriptor without its checksum and file")
		}
		d.crc, d.path = le.Uint32(rest), string(rest[4:])
	} else if len(rest) != 0 {
		return d, fmt.Errorf("snapshot descriptor: %d bytes after the membership", len(rest))
	}
	if d.bytes > uint64(d.items)*uint64(maxPeerFrame) {
		return d, fmt.Errorf("snapshot descriptor: %d items cannot hold %d bytes (%d bytes an item at most)", d.items, d.bytes, maxPeerFrame)
	}
	return d, nil
}

// SnapshotItems calls fn with each item (an encoded engine entry) of this
// member's snapshot at index, read from its log one at a time; the
// transport streams them to a follower. Safe for use off the member's
// loop. It fails when the snapshot is no longer the member's newest (its
// segments may be gone): the follower then gets nothing, and raft sends
// the newer one.
func (n *Node) SnapshotItems(index uint64, fn func(item []byte) error) error {
	ck := n.sendable.Load()
	if ck == nil || ck.meta.Index != index {
		return fmt.Errorf("the snapshot at entry %d is no longer this member's newest", index)
	}
	for i, pos := range ck.items {
		if cur := n.sendable.Load(); cur != ck {
			return fmt.Errorf("the snapshot at entry %d was replaced by the one at entry %d after %d of its %d items", index, cur.meta.Index, i, len(ck.items))
		}
		body, err := n.readItem(pos, ck.itemIndex)
		if err != nil {
			return err
		}
		if err := fn(body); err != nil {
			return err
		}
	}
	return nil
}

// setCheckpoint makes ck the member's newest snapshot.
func (n *Node) setCheckpoint(ck *checkpoint) {
	n.snap.ckpt = ck
	n.sendable.Store(ck)
}

// readItem reads the engine entry of the snapshot item at pos, whose
// header carries index (checkpoint.itemIndex).
func (n *Node) readItem(pos wal.Position, index uint64) ([]byte, error) {
	body, err := n.log.ReadFrame(pos)
	if err != nil {
		return nil, fmt.Errorf("read snapshot item at %s: %w", pos, err)
	}
	if len(body) < snapItemHeader || body[0] != snapItemKind || binary.LittleEndian.Uint64(body[9:]) != index {
		return nil, fmt.Errorf("%w: the frame at %s is not an item of the snapshot begun at entry %d", wal.ErrCorrupt, pos, index)
	}
	return body[snapItemHeader:], nil
}

// parseSnapshotData checks raft.Snapshot.Data from a peer and returns its
// time, membership and items (aliasing data). Every item must decode as an
// engine entry: a bad snapshot is refused before raft sees it.
func parseSnapshotData(data []byte) (t int64, mem membership, items [][]byte, err error) {
	le := binary.LittleEndian
	if len(data) < 22 {
		return 0, mem, nil, fmt.Errorf("snapshot data of %d bytes, shorter than its 22-byte frame", len(data))
	}
	if data[0] != snapDataMagic || data[1] != snapDataVersion {
		return 0, mem, nil, fmt.Errorf("snapshot data starts with %#02x %d, want %#02x %d", data[0], data[1], snapDataMagic, snapDataVersion)
	}
	body := data[:len(data)-4]
	if got, want := crc32.Checksum(body, castagnoli), le.Uint32(data[len(data)-4:]); got != want {
		return 0, mem, nil, fmt.Errorf("snapshot data checksum %08x, want %08x", got, want)
	}
	t = int64(le.Uint64(body[2:]))
	ml := uint64(le.Uint32(body[10:]))
	rest := body[14:]
	if ml > uint64(len(rest))-4 {
		return 0, mem, nil, fmt.Errorf("snapshot data: membership of %d bytes, only %d left", ml, len(rest)-4)
	}
	if mem, err = decodeMembership(rest[:ml]); err != nil {
		return 0, mem, nil, fmt.Errorf("snapshot data: %w", err)
	}
	rest = rest[ml:]
	count := le.Uint32(rest)
	rest = rest[4:]
	if uint64(count)*4 > uint64(len(rest)) {
		return 0, mem, nil, fmt.Errorf("snapshot data claims %d items in %d bytes", count, len(rest))
	}
	items = make([][]byte, 0, count)
	for i := uint32(0); i < count; i++ {
		if len(rest) < 4 {
			return 0, mem, nil, fmt.Errorf("snapshot data: item %d of %d is missing", i, count)
		}
		l := le.Uint32(rest)
		if uint64(l) > uint64(len(rest)-4) {
			return 0, mem, nil, fmt.Errorf("snapshot data: item %d of %d bytes, only %d left", i, l, len(rest)-4)
		}
		item := rest[4 : 4+l]
		if _, err := engine.DecodeEntry(item, 0, 0); err != nil {
			return 0, mem, nil, fmt.Errorf("snapshot data: item %d: %w", i, err)
		}
		items = append(items, item)
		rest = rest[4+l:]
	}
	if len(rest) != 0 {
		return 0, mem, nil, fmt.Errorf("snapshot data: %d bytes after its %d items", len(rest), count)
	}
	return t, mem, items, nil
}

// checkSnapMessage refuses a MsgSnap whose data is not a valid snapshot,
// before raft accepts it (raft would otherwise restore its log from it).
func checkSnapMessage(m *raftpb.Message) error {
	if m.Type != raftpb.MsgSnap || m.Snapshot == nil {
		return nil
	}
	var err error
	switch d := m.Snapshot.Data; {
	case len(d) >= 2 && d[1] == snapDescVersion:
		err = errors.New("a snapshot descriptor arrived without its items (they come through the peer transport)")
	case len(d) >= 2 && d[1] == snapLocalVersion:
		var sd snapDesc
		if sd, err = parseSnapDesc(d, snapLocalVersion); err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(sd.path); err == nil && fi.Size() != int64(sd.bytes)+4*int64(sd.items) {
				err = fmt.Errorf("received snapshot file %s holds %d bytes, want %d", sd.path, fi.Size(), int64(sd.bytes)+4*int64(sd.items))
			}
		}
	default:
		_, _, _, err = parseSnapshotData(d)
	}
	if err != nil {
		return fmt.Errorf("snapshot at entry %d refused: %w", m.Snapshot.Metadata.Index, err)
	}
	return nil
}

// snapItems iterates a received snapshot's items: from Data itself, or
// from the file the transport wrote (checking its CRC as it reads; a
// corrupt file fails the install before the snapshot's commit frame is
// written, so the partial items count for nothing).
func snapItems(data []byte, fn func(item []byte) error) (t int64, mem membership, err error) {
	if len(data) < 2 || data[1] != snapLocalVersion {
		t, mem, items, err := parseSnapshotData(data)
		if err != nil {
			return 0, mem, err
		}
		for _, item := range items {
			if err := fn(item); err != nil {
				return 0, mem, err
			}
		}
		return t, mem, nil
	}
	d, err := parseSnapDesc(data, snapLocalVersion)
	if err != nil {
		return 0, mem, err
	}
	if mem, err = decodeMembership(d.mem); err != nil {
		return 0, mem, err
	}
	f, err := os.Open(d.path)
	if err != nil {
		return 0, mem, fmt.Errorf("open the received snapshot: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	crc := uint32(0)
	var n [4]byte
	var buf []byte
	var total uint64
	for i := uint32(0); i < d.items; i++ {
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return 0, mem, fmt.Errorf("received snapshot %s: item %d of %d: %w", d.path, i, d.items, err)
		}
		l := binary.LittleEndian.Uint32(n[:])
		total += uint64(l)
		if l > uint32(maxPeerFrame) || total > d.bytes {
			return 0, mem, fmt.Errorf("received snapshot %s: item %d of %d bytes exceeds its limits", d.path, i, l)
		}
		if cap(buf) < int(l) {
			buf = make([]byte, l)
		}
		buf = buf[:l]
		if _, err := io.ReadFull(r, buf); err != nil {
			return 0, mem, fmt.Errorf("received snapshot %s: item %d of %d: %w", d.path, i, d.items, err)
		}
		crc = crc32.Update(crc, castagnoli, n[:])
		crc = crc32.Update(crc, castagnoli, buf)
		if err := fn(buf); err != nil {
			return 0, mem, err
		}
	}
	if crc != d.crc || total != d.bytes {
		return 0, mem, fmt.Errorf("received snapshot %s: checksum %08x over %d bytes, want %08x over %d", d.path, crc, total, d.crc, d.bytes)
	}
	return d.time, mem, nil
}

// DiscardMessage releases what a message delivered by the Transport
// holds on disk (a received snapshot's file), for a caller that drops it.
func DiscardMessage(m raftpb.Message) {
	if m.Type == raftpb.MsgSnap && m.Snapshot != nil {
		removeReceived(m.Snapshot.Data)
	}
}

// noteReceived remembers the file of a received snapshot handed to raft:
// raft may drop the message (a stale snapshot), so the previous file is
// removed when a newer one comes, and installSnapshot removes the one it
// reads. At most one such file is left behind.
func (n *Node) noteReceived(m *raftpb.Message) {
	if m.Type != raftpb.MsgSnap || m.Snapshot == nil {
		return
	}
	d, err := parseSnapDesc(m.Snapshot.Data, snapLocalVersion)
	if err != nil {
		return
	}
	if n.snap.received != "" && n.snap.received != d.path {
		os.Remove(n.snap.received)
	}
	n.snap.received = d.path
}

// snapMembership is the membership a received snapshot carries.
func snapMembership(data []byte) (membership, error) {
	if len(data) >= 2 && data[1] == snapLocalVersion {
		d, err := parseSnapDesc(data, snapLocalVersion)
		if err != nil {
			return membership{}, err
		}
		return decodeMembership(d.mem)
	}
	_, mem, _, err := parseSnapshotData(data)
	return mem, err
}

// removeReceived deletes the file a received snapshot was read from.
func removeReceived(data []byte) {
	if d, err := parseSnapDesc(data, snapLocalVersion); err == nil {
		os.Remove(d.path)
	}
}

// installSnapshot writes a snapshot received from the leader into this
// member's log as its own and rebuilds the engine from it, before the
// Ready's entries (which follow it) are handled.
func (n *Node) installSnapshot(snap raftpb.Snapshot, hs raftpb.HardState) error {
	start := time.Now()
	if n.ahead > n.applied {
		return fmt.Errorf("snapshot at entry %d received while the engine holds uncommitted entries up to %d", snap.Metadata.Index, n.ahead)
	}
	defer removeReceived(snap.Data)
	n.snap.received = ""
	mem, err := snapMembership(snap.Data)
	if err != nil {
		return fmt.Errorf("install snapshot at entry %d: %w", snap.Metadata.Index, err)
	}
	if n.joining {
		// As in applyConf: a member that joined with an empty log must be
		// a learner in the membership it receives.
		if mb, ok := mem.members[n.cfg.ID]; ok && !mb.Learner {
			return fmt.Errorf("node %d started with --join and an empty data directory, but the leader's snapshot makes it a voter: "+
				"its id belonged to an earlier member; replace a member that lost its data under a new id (docs/cluster.md)", n.cfg.ID)
		}
	}
	n.abortSnapshot("the leader's snapshot replaces the state")
	n.newEngine()
	eng := n.eng
	w := n.newSnapWriter(snap.Metadata.Index, func(ent *engine.Entry, _ [][2]engine.BlobRef) error {
		eng.Apply(ent)
		return nil
	})
	t, _, err := snapItems(snap.Data, func(item []byte) error {
		if _, err := engine.DecodeEntry(item, 0, 0); err != nil {
			return fmt.Errorf("snapshot item: %w", err)
		}
		return w.add(item, nil)
	})
	if err != nil {
		return fmt.Errorf("install snapshot at entry %d: %w", snap.Metadata.Index, err)
	}
	if raft.IsEmptyHardState(hs) {
		hs = n.store.hs
	}
	hs.Commit = max(hs.Commit, snap.Metadata.Index)
	ck, err := w.finish(snap.Metadata, t, true, mem, hs)
	if err != nil {
		return err
	}
	if err := n.store.ApplySnapshot(snap.Metadata, n.snapshotData(ck)); err != nil {
		return err
	}
	n.store.SetHardState(hs)
	n.applied, n.ahead, n.lastTime, n.lastIndex = ck.meta.Index, ck.meta.Index, t, ck.meta.Index
	n.confApplied = max(n.confApplied, ck.meta.Index)
	n.mem, n.memChanged = mem.clone(), true
	if mb, ok := mem.members[n.cfg.ID]; ok && mb.Learner {
		n.joining = false
	}
	if _, ok := mem.members[n.cfg.ID]; !ok && mem.removed[n.cfg.ID] {
		n.MarkRemoved(fmt.Sprintf("the leader's snapshot at log index %d no longer holds it", ck.meta.Index))
	}
	n.setCheckpoint(ck)
	n.snap.installs++
	n.snap.lastTook = time.Since(start)
	n.dropSegments()
	n.lg.Info("cluster: snapshot from the leader installed", "id", n.cfg.ID, "index", ck.meta.Index, "jobs", eng.Jobs(), "bytes", ck.bytes, "took", n.snap.lastTook.Round(time.Millisecond).String())
	if n.cfg.OnApplied != nil {
		n.cfg.OnApplied(ck.meta.Index, ck.meta.Term)
	}
	return nil
}

// loadCheckpoint rebuilds a fresh engine from a snapshot in the log.
func (n *Node) loadCheckpoint(ck *checkpoint) error {
	for _, pos := range ck.items {
		body, err := n.readItem(pos, ck.itemIndex)
		if err != nil {
			return err
		}
		ent, err := engine.DecodeEntry(body, pos.Segment, pos.Offset+wal.FrameHeaderSize+snapItemHeader)
		if err != nil {
			return fmt.Errorf("snapshot item at %s: %w", pos, err)
		}
		n.eng.Apply(ent)
	}
	n.applied, n.ahead, n.lastTime = ck.meta.Index, ck.meta.Index, ck.time
	n.confApplied = max(n.confApplied, ck.meta.Index)
	return nil
}

// replayState collects a member's log on replay: raft entries and hard
// state (wal.RaftLog) and the newest complete snapshot, whose entries it
// drops from the raft log (all of them for a snapshot received from a
// leader, which replaced the log).
type replayState struct {
	rl       *wal.RaftLog
	firstSeg uint32 // the oldest segment replayed
	skipping bool   // the items being read lack their start
	partial  bool   // ... because they began in segments removed
	building uint64 // index of the snapshot whose items are being read
	items    []wal.Position
	bytes    int64
	ckpt     *checkpoint
}

func (r *replayState) add(pos wal.Position, body []byte) error {
	if len(body) == 0 || (body[0] != snapItemKind && body[0] != snapCommitKind) {
		return r.rl.Add(pos, body)
	}
	le := binary.LittleEndian
	if body[0] == snapItemKind {
		if len(body) < snapItemHeader {
			return fmt.Errorf("record at %s: %w: snapshot item of %d bytes, shorter than its header", pos, wal.ErrCorrupt, len(body))
		}
		if g := le.Uint64(body[1:]); g != r.rl.Group {
			return fmt.Errorf("record at %s: %w: snapshot item of raft group %d in the log of group %d", pos, wal.ErrCorrupt, g, r.rl.Group)
		}
		idx, seq := le.Uint64(body[9:]), le.Uint32(body[17:])
		switch {
		case seq == 0:
			r.building, r.items, r.bytes, r.skipping, r.partial = idx, r.items[:0], 0, false, false
		case r.skipping && idx == r.building:
			return nil
		case idx != r.building || seq != uint32(len(r.items)):
			// The rest of a snapshot whose first items are gone (in
			// segments a newer snapshot let go).
			r.building, r.items, r.bytes, r.skipping = idx, r.items[:0], 0, true
			r.partial = pos.Segment == r.firstSeg
			return nil
		}
		r.items = append(r.items, pos)
		r.bytes += int64(len(body) - snapItemHeader)
		return nil
	}
	if len(body) < snapCommitFixed {
		return fmt.Errorf("record at %s: %w: snapshot commit of %d bytes, shorter than %d", pos, wal.ErrCorrupt, len(body), snapCommitFixed)
	}
	if g := le.Uint64(body[1:]); g != r.rl.Group {
		return fmt.Errorf("record at %s: %w: snapshot commit of raft group %d in the log of group %d", pos, wal.ErrCorrupt, g, r.rl.Group)
	}
	ck := &checkpoint{
		meta:      raftpb.SnapshotMetadata{Index: le.Uint64(body[9:]), Term: le.Uint64(body[17:])},
		time:      int64(le.Uint64(body[25:])),
		installed: body[33]&snapFlagInstalled != 0,
		commit:    pos,
	}
	count, size := le.Uint32(body[34:]), int64(le.Uint64(body[38:]))
	csLen := uint64(le.Uint32(body[46:]))
	if csLen > uint64(len(body)-snapCommitFixed) {
		return fmt.Errorf("record at %s: %w: snapshot commit's conf state of %d bytes, only %d left", pos, wal.ErrCorrupt, csLen, len(body)-snapCommitFixed)
	}
	if err := ck.meta.ConfState.Unmarshal(body[snapCommitFixed : snapCommitFixed+csLen]); err != nil {
		return fmt.Errorf("record at %s: %w: snapshot commit's conf state: %v", pos, wal.ErrCorrupt, err)
	}
	mem, err := decodeMembership(body[snapCommitFixed+csLen:])
	if err != nil {
		return fmt.Errorf("record at %s: %w: snapshot commit's %v", pos, wal.ErrCorrupt, err)
	}
	ck.mem = mem
	// The items' index is where the snapshot's walk began: the commit's
	// index is that one or a later one (a fuzzy snapshot, see the top of
	// this file; before it, always that one).
	same := r.building != 0 && r.building <= ck.meta.Index
	if !same || r.skipping || uint32(len(r.items)) != count || r.bytes != size {
		if (same && r.skipping && r.partial) || (!same && pos.Segment == r.firstSeg) {
			// An older snapshot whose first items were in segments a newer
			// one let go: ignore it (if no newer one follows, the raft
			// entries do not continue any snapshot and LoadStorageAt
			// refuses the log).
			r.items, r.building, r.bytes, r.skipping, r.partial = r.items[:0], 0, 0, false, false
			return nil
		}
		return fmt.Errorf("record at %s: %w: snapshot commit for entry %d with %d items of %d bytes follows %d items of %d bytes of the snapshot at entry %d",
			pos, wal.ErrCorrupt, ck.meta.Index, count, size, len(r.items), r.bytes, r.building)
	}
	ck.items, ck.bytes, ck.itemIndex = append([]wal.Position(nil), r.items...), size, r.building
	r.items, r.building, r.bytes, r.skipping, r.partial = r.items[:0], 0, 0, false, false
	r.ckpt = ck
	if ck.installed {
		r.rl.Entries, r.rl.Pos = r.rl.Entries[:0], r.rl.Pos[:0]
	} else {
		r.trim()
	}
	return nil
}

// trim drops the raft entries the snapshot covers.
func (r *replayState) trim() {
	if r.ckpt == nil {
		return
	}
	k := 0
	for k < len(r.rl.Entries) && r.rl.Entries[k].Index <= r.ckpt.meta.Index {
		k++
	}
	if k > 0 {
		r.rl.Entries = append(r.rl.Entries[:0], r.rl.Entries[k:]...)
		r.rl.Pos = append(r.rl.Pos[:0], r.rl.Pos[k:]...)
	}
}

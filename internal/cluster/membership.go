package cluster

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// Membership changes (docs/cluster.md, "Add, remove or replace a member").
// The membership lives in the raft log: the bootstrap entries and every
// ConfChangeV2 the leader proposes carry the peer address of the member
// they add in their Context, so every member's transport learns it and the
// addresses survive restarts with the log. One change at a time: a member
// is added as a learner and the leader promotes it to voter once its log
// is within PromoteLag entries of the commit index.

// Error codes of membership changes (they travel like the engine's).
const (
	// CodeChangeInFlight: another membership change has not finished.
	CodeChangeInFlight engine.Code = "change_in_flight"
	// CodeRemoved: this member was removed from the cluster.
	CodeRemoved engine.Code = "removed"
	// CodeWouldLoseQuorum: the remaining voters that answer the leader
	// would not be a majority of the new configuration.
	CodeWouldLoseQuorum engine.Code = "would_lose_quorum"
)

// PromoteLag is how far (in entries) a learner's log may trail the
// commit index for the leader to promote it: small enough that the new
// voter does not slow the quorum while it catches up, large enough that a
// learner receiving a steady stream of writes gets there (entries in
// flight to it count as lag).
const PromoteLag = 64

// Member is one member of the group, as the applied conf changes say.
type Member struct {
	ID      uint64 `json:"id"`
	Addr    string `json:"peer_addr,omitempty"`
	Learner bool   `json:"learner,omitempty"`
}

// confContext is the Context of a conf change that adds a member.
type confContext struct {
	PeerAddr string `json:"peer_addr"`
}

func encodeConfContext(addr string) []byte {
	b, _ := json.Marshal(confContext{PeerAddr: addr})
	return b
}

func decodeConfContext(b []byte) string {
	var c confContext
	if len(b) == 0 || json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.PeerAddr
}

// membership is what the applied conf changes built: the members with
// their peer addresses and the ids removed for good (never reused).
type membership struct {
	members map[uint64]Member
	removed map[uint64]bool
}

func newMembership() membership {
	return membership{members: map[uint64]Member{}, removed: map[uint64]bool{}}
}

// apply records one conf change; it answers whether anything changed.
func (m *membership) apply(cc raftpb.ConfChangeV2) bool {
	addr := decodeConfContext(cc.Context)
	changed := false
	for _, c := range cc.Changes {
		old, had := m.members[c.NodeID]
		switch c.Type {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
			nm := Member{ID: c.NodeID, Addr: old.Addr, Learner: c.Type == raftpb.ConfChangeAddLearnerNode}
			if addr != "" && len(cc.Changes) == 1 {
				nm.Addr = addr
			}
			if !had || nm != old {
				m.members[c.NodeID] = nm
				changed = true
			}
		case raftpb.ConfChangeRemoveNode:
			if had {
				delete(m.members, c.NodeID)
				changed = true
			}
			m.removed[c.NodeID] = true
		}
	}
	return changed
}

func (m *membership) clone() membership {
	c := newMembership()
	for id, mb := range m.members {
		c.members[id] = mb
	}
	for id := range m.removed {
		c.removed[id] = true
	}
	return c
}

func (m *membership) list() []Member {
	out := make([]Member, 0, len(m.members))
	for _, mb := range m.members {
		out = append(out, mb)
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (m *membership) voters() int {
	n := 0
	for _, mb := range m.members {
		if !mb.Learner {
			n++
		}
	}
	return n
}

// decodeConf decodes a conf-change entry of either version.
func decodeConf(typ raftpb.EntryType, data []byte) (raftpb.ConfChangeV2, error) {
	switch typ {
	case raftpb.EntryConfChange:
		var cc raftpb.ConfChange
		if err := cc.Unmarshal(data); err != nil {
			return raftpb.ConfChangeV2{}, err
		}
		return cc.AsV2(), nil
	default:
		var cc raftpb.ConfChangeV2
		if err := cc.Unmarshal(data); err != nil {
			return raftpb.ConfChangeV2{}, err
		}
		return cc, nil
	}
}

// membershipImage is the membership as a snapshot carries it: raft's
// ConfState has the ids but neither the peer addresses nor the removed
// ids, which the conf-change entries a snapshot replaces held.
type membershipImage struct {
	Members []Member `json:"members"`
	Removed []uint64 `json:"removed,omitempty"`
}

func (m *membership) encode() []byte {
	img := membershipImage{Members: m.list()}
	for id := range m.removed {
		img.Removed = append(img.Removed, id)
	}
	slices.Sort(img.Removed)
	b, _ := json.Marshal(img)
	return b
}

func decodeMembership(b []byte) (membership, error) {
	m := newMembership()
	var img membershipImage
	if err := json.Unmarshal(b, &img); err != nil {
		return m, fmt.Errorf("membership: %w", err)
	}
	for _, mb := range img.Members {
		if mb.ID == 0 {
			return m, fmt.Errorf("membership: a member with id 0")
		}
		m.members[mb.ID] = mb
	}
	for _, id := range img.Removed {
		m.removed[id] = true
	}
	return m, nil
}

// loadMembership replays the committed conf changes of a recovered log
// on top of the membership of its snapshot, if any.
func loadMembership(rl *wal.RaftLog, ck *checkpoint) (membership, error) {
	m := newMembership()
	after := uint64(0)
	if ck != nil {
		m, after = ck.mem.clone(), ck.meta.Index
	}
	if !rl.HasState {
		return m, nil
	}
	for i := range rl.Entries {
		e := &rl.Entries[i]
		if e.Index > rl.State.Commit {
			break
		}
		if e.Index <= after {
			continue
		}
		t := raftpb.EntryType(e.Type)
		if t != raftpb.EntryConfChange && t != raftpb.EntryConfChangeV2 {
			continue
		}
		cc, err := decodeConf(t, e.Data)
		if err != nil {
			return m, fmt.Errorf("cluster: entry %d: decode conf change: %w", e.Index, err)
		}
		m.apply(cc)
	}
	return m, nil
}

// Members is the membership as this member applied it, by id.
func (n *Node) Members() []Member { return n.mem.list() }

// WasRemoved says whether id was removed from the group (ids are not
// reused).
func (n *Node) WasRemoved(id uint64) bool { return n.mem.removed[id] }

// RemovedIDs are the ids removed from the group.
func (n *Node) RemovedIDs() []uint64 {
	out := make([]uint64, 0, len(n.mem.removed))
	for id := range n.mem.removed {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Removed is why this member stopped taking part ("" while it does).
func (n *Node) Removed() string { return n.removedWhy }

// MarkRemoved stops this member: a member that applied its own removal
// never learns it from raft when the leader stops sending to it first, so
// a peer that refuses it as removed tells it (transport.go).
func (n *Node) MarkRemoved(why string) {
	if n.removedWhy != "" {
		return
	}
	n.removedWhy = why
	n.lg.Warn("cluster: this node was removed from the cluster and no longer takes part in it; give it a new id and an empty data directory to add it again", "id", n.cfg.ID, "why", why)
	n.finishPending(&engine.Error{Code: CodeRemoved, Message: "this node was removed from the cluster"})
}

// ChangeInFlight is the index of a proposed membership change that is not
// applied yet, or the id of a learner waiting for its promotion (both 0
// when none).
func (n *Node) ChangeInFlight() (index, learner uint64) {
	if n.confIndex > n.applied {
		index = n.confIndex
	}
	for _, mb := range n.mem.members {
		if mb.Learner {
			learner = mb.ID
		}
	}
	return index, learner
}

func changeErr(format string, args ...any) error {
	return &engine.Error{Code: CodeChangeInFlight, Message: fmt.Sprintf(format, args...)}
}

func badChange(field, format string, args ...any) error {
	return &engine.Error{Code: engine.CodeBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// AddLearner proposes member id, at peer address addr, as a learner. It
// answers the index of the conf-change entry: the change is done when
// Applied reaches it (check Members: a leader change may drop it).
func (n *Node) AddLearner(id uint64, addr string) (uint64, error) {
	if err := n.canChange(); err != nil {
		return 0, err
	}
	if id == 0 {
		return 0, badChange("id", "node id must be 1 or more")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil || addr == "" {
		return 0, badChange("peer_addr", "peer address %q is not host:port", addr)
	}
	if len(addr) > 512 {
		return 0, badChange("peer_addr", "peer address of %d bytes, more than 512", len(addr))
	}
	if mb, ok := n.mem.members[id]; ok {
		return 0, badChange("id", "node %d is already a member (peer address %s)", id, mb.Addr)
	}
	if n.mem.removed[id] {
		return 0, badChange("id", "node %d was removed from this cluster and ids are not reused: give the new member another id", id)
	}
	for _, mb := range n.mem.members {
		if mb.Addr == addr {
			return 0, badChange("peer_addr", "peer address %s is already node %d's", addr, mb.ID)
		}
	}
	if _, l := n.ChangeInFlight(); l != 0 {
		return 0, changeErr("node %d was added as a learner and is not promoted yet: wait until it is a voter (chronoq cluster status) or remove it", l)
	}
	return n.proposeConf(raftpb.ConfChangeV2{
		Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: id}},
		Context: encodeConfContext(addr),
	})
}

// RemoveMember proposes removing member id; warning is set when the
// remaining voters are an even number (a 4-node group tolerates no more
// failures than a 3-node one). The leader itself cannot be removed: hand
// leadership over first (TransferLeadership).
func (n *Node) RemoveMember(id uint64) (index uint64, warning string, err error) {
	if err := n.canChange(); err != nil {
		return 0, "", err
	}
	mb, ok := n.mem.members[id]
	if !ok {
		if n.mem.removed[id] {
			return 0, "", badChange("id", "node %d was already removed", id)
		}
		return 0, "", badChange("id", "node %d is not a member of this cluster", id)
	}
	if id == n.cfg.ID {
		return 0, "", badChange("id", "node %d leads: hand leadership to another member first", id)
	}
	if _, l := n.ChangeInFlight(); l != 0 && l != id {
		return 0, "", changeErr("node %d was added as a learner and is not promoted yet: wait until it is a voter or remove it first", l)
	}
	voters := n.mem.voters()
	if !mb.Learner {
		if voters <= 1 {
			return 0, "", badChange("id", "node %d is the last voter", id)
		}
		if err := n.quorumWithout(id); err != nil {
			return 0, "", err
		}
		voters--
		if voters%2 == 0 {
			warning = fmt.Sprintf("%d voters remain: an even number tolerates no more failures than %d", voters, voters-1)
		}
	}
	idx, err := n.proposeConf(raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode, NodeID: id}}})
	return idx, warning, err
}

// quorumWithout refuses removing voter id when the voters left that
// answered the leader within the last election timeout (raft's
// RecentActive, kept by CheckQuorum) are not a majority of the voters
// left: the cluster would stop committing as soon as the change applied.
func (n *Node) quorumWithout(id uint64) error {
	st := n.rn.Status()
	left, active := 0, 0
	var down []uint64
	for vid := range st.Config.Voters.IDs() {
		if vid == id {
			continue
		}
		left++
		if pr, ok := st.Progress[vid]; vid == n.cfg.ID || ok && pr.RecentActive {
			active++
		} else {
			down = append(down, vid)
		}
	}
	if active < left/2+1 {
		slices.Sort(down)
		return &engine.Error{Code: CodeWouldLoseQuorum, Message: fmt.Sprintf(
			"removing node %d would leave %d voters of which only %d answer the leader (not answering: %v): the cluster would lose its quorum; bring them back first", id, left, active, down)}
	}
	return nil
}

// Promote, on the leader, proposes the learner whose log has caught up
// (within PromoteLag entries of the commit index) as a voter. It answers
// the learner's id, 0 when nothing was proposed.
func (n *Node) Promote() uint64 {
	if n.CanExec() != nil || n.confIndex > n.applied {
		return 0
	}
	var learner Member
	for _, mb := range n.mem.members {
		if mb.Learner {
			learner = mb
		}
	}
	if learner.ID == 0 {
		return 0
	}
	st := n.rn.Status()
	pr, ok := st.Progress[learner.ID]
	if !ok || !pr.IsLearner || pr.State != tracker.StateReplicate || pr.Match == 0 || pr.Match+PromoteLag < st.Commit {
		return 0
	}
	if _, err := n.proposeConf(raftpb.ConfChangeV2{
		Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode, NodeID: learner.ID}},
		Context: encodeConfContext(learner.Addr),
	}); err != nil {
		return 0
	}
	n.lg.Info("cluster: promoting a learner that caught up to voter", "node", learner.ID, "match", pr.Match, "commit", st.Commit)
	return learner.ID
}

func (n *Node) canChange() error {
	if err := n.CanExec(); err != nil {
		return err
	}
	if n.confIndex > n.applied {
		return changeErr("the membership change at log index %d is not applied yet: one change at a time", n.confIndex)
	}
	return nil
}

// proposeConf proposes a conf change and writes it to the log at once:
// the entries the engine decides next take the indexes after it, and the
// log must hold them in index order.
func (n *Node) proposeConf(cc raftpb.ConfChangeV2) (uint64, error) {
	// Every Ready handled first: lastIndex is then raft's last index.
	if err := n.Process(); err != nil {
		return 0, unavailable("this cluster member stopped: %v", err)
	}
	if err := n.CanExec(); err != nil {
		return 0, err
	}
	if err := n.rn.ProposeConfChange(cc); err != nil {
		return 0, notLeader(n.rn.BasicStatus().Lead)
	}
	n.lastIndex++
	n.confIndex = n.lastIndex
	if err := n.Process(); err != nil {
		return 0, unavailable("this cluster member stopped: %v", err)
	}
	return n.confIndex, nil
}

// applyConf applies a committed conf change to raft (once per entry: a
// rebuild applies entries again) and to the membership. Raft panics on a
// change its tracker refuses; that is turned into an error.
func (n *Node) applyConf(e *raftpb.Entry) (err error) {
	cc, err := decodeConf(e.Type, e.Data)
	if err != nil {
		return fmt.Errorf("entry %d: decode conf change: %w", e.Index, err)
	}
	if n.joining {
		// A member that joins with an empty log must enter as a learner:
		// finding itself a voter already means its id belonged to a member
		// that lost its data, which must not vote without the log it
		// promised to keep.
		for _, c := range cc.Changes {
			if c.NodeID != n.cfg.ID {
				continue
			}
			if c.Type == raftpb.ConfChangeAddLearnerNode {
				n.joining = false
			} else if c.Type == raftpb.ConfChangeAddNode {
				return fmt.Errorf("node %d started with --join and an empty data directory, but the log makes it a voter without adding it as a learner first: "+
					"its id belonged to an earlier member; replace a member that lost its data under a new id (docs/cluster.md)", n.cfg.ID)
			}
		}
	}
	if e.Index > n.confApplied {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("entry %d: raft refused the conf change %s: %v", e.Index, raftpb.ConfChangesToString(cc.Changes), r)
			}
		}()
		n.rn.ApplyConfChange(cc)
		n.confApplied = e.Index
	}
	if n.snap.ckpt != nil {
		for _, c := range cc.Changes {
			if _, had := n.mem.members[c.NodeID]; !had && (c.Type == raftpb.ConfChangeAddLearnerNode || c.Type == raftpb.ConfChangeAddNode) {
				n.snap.forceAt = max(n.snap.forceAt, e.Index)
			}
		}
	}
	if n.mem.apply(cc) {
		n.lg.Info("cluster: membership changed", "id", n.cfg.ID, "index", e.Index, "change", raftpb.ConfChangesToString(cc.Changes), "members", n.mem.list())
		n.memChanged = true
	}
	if _, ok := n.mem.members[n.cfg.ID]; !ok && n.mem.removed[n.cfg.ID] {
		n.MarkRemoved(fmt.Sprintf("the membership change at log index %d removed it", e.Index))
	}
	return nil
}

// publishMembership tells OnMembership the membership once per Ready
// that changed it: a joining member applies the bootstrap entries one by
// one, and its transport must not follow each intermediate membership.
func (n *Node) publishMembership() {
	if n.memChanged && n.cfg.OnMembership != nil {
		n.cfg.OnMembership(n.mem.list(), n.RemovedIDs())
	}
	n.memChanged = false
}

// isVoter says whether id is a voter in raft's configuration.
func (n *Node) isVoter(id uint64) bool {
	st := n.rn.Status()
	_, ok := st.Config.Voters.IDs()[id]
	return ok
}

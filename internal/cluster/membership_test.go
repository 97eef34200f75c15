package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// group is members whose messages the test delivers by hand; members
// come and go.
type group struct {
	t     *testing.T
	dir   string
	nodes map[uint64]*Node
	now   time.Time
	down  map[uint64]bool // neither ticks nor sends nor receives
}

func addrOf(id uint64) string { return fmt.Sprintf("127.0.0.1:%d", 7790+id) }

func newGroup(t *testing.T, ids ...uint64) *group {
	g := &group{t: t, dir: t.TempDir(), nodes: map[uint64]*Node{}, down: map[uint64]bool{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	addrs := map[uint64]string{}
	for _, id := range ids {
		addrs[id] = addrOf(id)
	}
	for _, id := range ids {
		g.open(Config{ID: id, Peers: ids, Addrs: addrs})
	}
	return g
}

func (g *group) open(cfg Config) *Node {
	cfg.Dir = filepath.Join(g.dir, fmt.Sprint(cfg.ID))
	cfg.WAL = wal.Options{Sync: wal.SyncNever, Logger: quiet}
	cfg.Logger = quiet
	n, err := Open(cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { n.Close() })
	g.nodes[cfg.ID] = n
	return n
}

func (g *group) ids() []uint64 {
	var ids []uint64
	for id := range g.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// round ticks every member, processes it (the leader promotes a learner
// that caught up, as the broker's loop does) and delivers what it sent.
func (g *group) round() {
	var msgs []raftpb.Message
	for _, id := range g.ids() {
		if g.down[id] {
			continue
		}
		n := g.nodes[id]
		n.Tick()
		if err := n.Process(); err != nil {
			g.t.Fatal(err)
		}
		n.Promote()
		msgs = append(msgs, n.Outbox()...)
	}
	for _, m := range msgs {
		if n := g.nodes[m.To]; n != nil && !g.down[m.To] {
			n.Step(m)
		}
	}
}

func (g *group) leader() *Node {
	for i := 0; i < 500; i++ {
		for _, id := range g.ids() {
			if g.nodes[id].CanExec() == nil {
				return g.nodes[id]
			}
		}
		g.round()
	}
	g.t.Fatal("no leader")
	return nil
}

func (g *group) until(what string, cond func() bool) {
	g.t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		g.round()
	}
	g.t.Fatalf("%s: never happened", what)
}

func (g *group) put(n *Node, id string) {
	g.t.Helper()
	g.now = g.now.Add(time.Millisecond)
	p := n.Exec(g.now, false, func(e *engine.Engine, now time.Time) (any, error) {
		return e.Put(now, "default", "q", engine.PutRequest{Payload: []byte("payload of " + id), ID: id})
	})
	for i := 0; i < 100 && !p.Done; i++ {
		g.round()
	}
	if !p.Done || p.Err != nil {
		g.t.Fatalf("put %s: done %v err %v", id, p.Done, p.Err)
	}
}

func roles(ms []Member) string {
	var parts []string
	for _, m := range ms {
		role := "voter"
		if m.Learner {
			role = "learner"
		}
		parts = append(parts, fmt.Sprintf("%d=%s@%s", m.ID, role, m.Addr))
	}
	return strings.Join(parts, ",")
}

func codeOf(err error) engine.Code { return engine.CodeOf(err) }

// The conf-change apply path end to end: a joining member is added as a
// learner, catches up from entry 1, is promoted, holds the leader's state
// and every member's address; a removed member is refused for good; the
// membership and the addresses survive a restart.
func TestMembershipAddPromoteRemove(t *testing.T) {
	g := newGroup(t, 1, 2, 3)
	lead := g.leader()
	for i := 0; i < 20; i++ {
		g.put(lead, fmt.Sprintf("job-%d", i))
	}
	three := "1=voter@127.0.0.1:7791,2=voter@127.0.0.1:7792,3=voter@127.0.0.1:7793"
	if got := roles(lead.Members()); got != three {
		t.Fatalf("bootstrap membership %s, want %s", got, three)
	}
	// A joining member bootstraps nothing: it waits for the leader.
	n4 := g.open(Config{ID: 4, Join: true})
	if last, _ := n4.store.LastIndex(); last != 0 || len(n4.Members()) != 0 {
		t.Fatalf("a joining member bootstrapped: last index %d, members %v", last, n4.Members())
	}
	var seen [][]Member
	lead.cfg.OnMembership = func(ms []Member, _ []uint64) { seen = append(seen, ms) }
	idx, err := lead.AddLearner(4, addrOf(4))
	if err != nil {
		t.Fatal(err)
	}
	g.until("learner added", func() bool { _, a, _ := lead.Status(); return a >= idx })
	g.until("learner promoted", func() bool {
		return roles(lead.Members()) == three+",4=voter@127.0.0.1:7794"
	})
	if len(seen) < 2 || roles(seen[0]) != three+",4=learner@127.0.0.1:7794" {
		t.Fatalf("OnMembership saw %v, want the learner first, then the voter", seen)
	}
	g.put(lead, "after-promotion")
	g.until("node 4 applied everything", func() bool {
		_, a, _ := n4.Status()
		_, la, _ := lead.Status()
		return a == la
	})
	if got := roles(n4.Members()); got != three+",4=voter@127.0.0.1:7794" {
		t.Fatalf("node 4's membership %s: the addresses did not travel with the log", got)
	}
	h4, err4 := n4.Engine().StateHash(n4.ReadBlob)
	hl, errl := lead.Engine().StateHash(lead.ReadBlob)
	if err4 != nil || errl != nil || h4 != hl {
		t.Fatalf("node 4's state differs from the leader's after catching up (%v, %v)", err4, errl)
	}

	// Remove a follower; ids are not reused.
	var gone uint64
	for _, id := range []uint64{1, 2, 3} {
		if id != lead.ID() {
			gone = id
			break
		}
	}
	idx, warn, err := lead.RemoveMember(gone)
	if err != nil {
		t.Fatal(err)
	}
	if warn != "" {
		t.Fatalf("removing one of four voters warned %q", warn)
	}
	g.until("removal applied", func() bool { _, a, _ := lead.Status(); return a >= idx })
	for _, id := range g.ids() {
		if id == gone {
			continue
		}
		g.until(fmt.Sprintf("node %d applies the removal", id), func() bool {
			return g.nodes[id].WasRemoved(gone) && len(g.nodes[id].Members()) == 3
		})
	}
	if _, err := lead.AddLearner(gone, "127.0.0.1:9999"); err == nil || !strings.Contains(err.Error(), "ids are not reused") {
		t.Fatalf("re-adding removed node %d: %v", gone, err)
	}
	// The removed member stops taking part once it knows.
	rm := g.nodes[gone]
	rm.MarkRemoved("test")
	if err := rm.Step(raftpb.Message{Type: raftpb.MsgHeartbeat, From: lead.ID(), To: gone}); err == nil {
		t.Fatal("a removed member accepted a raft message")
	}
	if codeOf(rm.CanExec()) != CodeRemoved {
		t.Fatalf("removed member CanExec: %v", rm.CanExec())
	}
	delete(g.nodes, gone)
	g.put(g.leader(), "after-removal")

	// Restart node 4 without --peers and without --join: the log holds
	// the membership and the addresses.
	want := roles(n4.Members())
	n4.Close()
	delete(g.nodes, 4)
	n4 = g.open(Config{ID: 4})
	if got := roles(n4.Members()); got != want {
		t.Fatalf("node 4's membership after a restart: %s, want %s", got, want)
	}
}

// Bad membership requests are refused with a clear error and change
// nothing; one change at a time.
func TestMembershipChangeRefusals(t *testing.T) {
	g := newGroup(t, 1, 2, 3)
	lead := g.leader()
	before := roles(lead.Members())
	var follower *Node
	for _, id := range g.ids() {
		if id != lead.ID() {
			follower = g.nodes[id]
			break
		}
	}
	cases := []struct {
		name string
		do   func() error
		code engine.Code
		msg  string
	}{
		{"remove unknown", func() error { _, _, err := lead.RemoveMember(9); return err }, engine.CodeBadRequest, "node 9 is not a member"},
		{"add duplicate id", func() error { _, err := lead.AddLearner(2, "127.0.0.1:1"); return err }, engine.CodeBadRequest, "node 2 is already a member"},
		{"add duplicate address", func() error { _, err := lead.AddLearner(5, addrOf(2)); return err }, engine.CodeBadRequest, "is already node 2's"},
		{"add bad address", func() error { _, err := lead.AddLearner(5, "nowhere"); return err }, engine.CodeBadRequest, "not host:port"},
		{"add id 0", func() error { _, err := lead.AddLearner(0, "127.0.0.1:1"); return err }, engine.CodeBadRequest, "1 or more"},
		{"remove the leader", func() error { _, _, err := lead.RemoveMember(lead.ID()); return err }, engine.CodeBadRequest, "hand leadership"},
		{"change on a follower", func() error { _, err := follower.AddLearner(5, "127.0.0.1:1"); return err }, CodeNotLeader, "not the leader"},
	}
	for _, c := range cases {
		err := c.do()
		if err == nil || codeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v (code %s), want %s containing %q", c.name, err, codeOf(err), c.code, c.msg)
		}
		g.round()
		if got := roles(lead.Members()); got != before {
			t.Fatalf("%s changed the membership to %s", c.name, got)
		}
	}
	// A learner that never catches up (node 4 is not running) blocks
	// other changes until it is promoted or removed.
	idx, err := lead.AddLearner(4, addrOf(4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lead.AddLearner(5, addrOf(5)); codeOf(err) != CodeChangeInFlight {
		t.Fatalf("add while the previous change is not applied: %v", err)
	}
	g.until("learner added", func() bool { _, a, _ := lead.Status(); return a >= idx })
	if _, err := lead.AddLearner(5, addrOf(5)); codeOf(err) != CodeChangeInFlight || !strings.Contains(err.Error(), "node 4") {
		t.Fatalf("add while node 4 is a learner: %v", err)
	}
	if _, _, err := lead.RemoveMember(follower.ID()); codeOf(err) != CodeChangeInFlight {
		t.Fatalf("remove while node 4 is a learner: %v", err)
	}
	idx, _, err = lead.RemoveMember(4)
	if err != nil {
		t.Fatalf("removing the learner that never caught up: %v", err)
	}
	g.until("learner removed", func() bool { _, a, _ := lead.Status(); return a >= idx })
	if got := roles(lead.Members()); got != before {
		t.Fatalf("after removing the learner: %s, want %s", got, before)
	}
	// Down to two voters: an even count warns; the last voter stays.
	idx, warn, err := lead.RemoveMember(follower.ID())
	if err != nil || !strings.Contains(warn, "2 voters remain") {
		t.Fatalf("removing a voter of three: warning %q, err %v", warn, err)
	}
	g.until("follower removed", func() bool { _, a, _ := lead.Status(); return a >= idx })
	delete(g.nodes, follower.ID())
	for _, id := range g.ids() {
		if id != lead.ID() {
			idx, _, err = lead.RemoveMember(id)
			if err != nil {
				t.Fatal(err)
			}
			g.until("second follower removed", func() bool { _, a, _ := lead.Status(); return a >= idx })
			delete(g.nodes, id)
		}
	}
	lead = g.leader()
	if _, _, err := lead.RemoveMember(lead.ID()); err == nil {
		t.Fatal("the last voter was removed")
	}
	g.put(lead, "single-voter")
}

// loadMembership rebuilds the membership from the committed conf changes
// of a log only, addresses included.
func TestLoadMembershipFromLog(t *testing.T) {
	v1 := func(id uint64, addr string) []byte {
		cc := raftpb.ConfChange{Type: raftpb.ConfChangeAddNode, NodeID: id, Context: encodeConfContext(addr)}
		b, _ := cc.Marshal()
		return b
	}
	v2 := func(typ raftpb.ConfChangeType, id uint64, addr string) []byte {
		cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: id}}}
		if addr != "" {
			cc.Context = encodeConfContext(addr)
		}
		b, _ := cc.Marshal()
		return b
	}
	rl := &wal.RaftLog{Group: 1, HasState: true, State: wal.RaftState{Term: 2, Commit: 6}}
	add := func(typ raftpb.EntryType, data []byte) {
		rl.Entries = append(rl.Entries, wal.RaftEntry{Group: 1, Term: 2, Index: uint64(len(rl.Entries) + 1), Type: uint8(typ), Data: data})
	}
	add(raftpb.EntryConfChange, v1(1, "a:1"))
	add(raftpb.EntryConfChange, v1(2, "b:2"))
	add(raftpb.EntryNormal, nil)
	add(raftpb.EntryConfChangeV2, v2(raftpb.ConfChangeAddLearnerNode, 3, "c:3"))
	add(raftpb.EntryConfChangeV2, v2(raftpb.ConfChangeAddNode, 3, "")) // promotion keeps the address
	add(raftpb.EntryConfChangeV2, v2(raftpb.ConfChangeRemoveNode, 1, ""))
	add(raftpb.EntryConfChangeV2, v2(raftpb.ConfChangeRemoveNode, 2, "")) // not committed
	m, err := loadMembership(rl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(m.list()); got != "2=voter@b:2,3=voter@c:3" {
		t.Fatalf("membership %s", got)
	}
	if !m.removed[1] || m.removed[2] {
		t.Fatalf("removed %v", m.removed)
	}
	rl.Entries[3].Data = []byte{0xff, 0xff}
	if _, err := loadMembership(rl, nil); err == nil {
		t.Fatal("an undecodable conf change was accepted")
	}
}

// A member that lost its data must not come back under its old id: one
// started with --join and an empty log that finds itself a voter (never
// added as a learner) stops with a clear error instead of voting.
func TestJoinUnderAnOldIDIsRefused(t *testing.T) {
	g := newGroup(t, 1, 2, 3)
	lead := g.leader()
	g.put(lead, "before")
	var old uint64
	for _, id := range g.ids() {
		if id != lead.ID() {
			old = id
		}
	}
	g.nodes[old].Close()
	delete(g.nodes, old)
	if err := os.RemoveAll(filepath.Join(g.dir, fmt.Sprint(old))); err != nil {
		t.Fatal(err)
	}
	fresh := g.open(Config{ID: old, Join: true})
	g.nodes[old] = fresh
	var err error
	for i := 0; i < 500 && err == nil; i++ {
		var msgs []raftpb.Message
		for _, id := range g.ids() {
			n := g.nodes[id]
			n.Tick()
			if e := n.Process(); e != nil {
				if id != old {
					t.Fatalf("node %d: %v", id, e)
				}
				err = e
			}
			msgs = append(msgs, n.Outbox()...)
		}
		for _, m := range msgs {
			g.nodes[m.To].Step(m)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "belonged to an earlier member") {
		t.Fatalf("a fresh --join member under an old voter's id: %v", err)
	}
	if _, e := lead.AddLearner(old, addrOf(old)); e == nil {
		t.Fatal("the old id was accepted as a new learner")
	}
}

// Removing a voter is refused while the voters left that answer the
// leader would not be a majority of the new configuration.
func TestRemoveRefusedWhenQuorumWouldBeLost(t *testing.T) {
	g := newGroup(t, 1, 2, 3)
	lead := g.leader()
	var f []uint64
	for _, id := range g.ids() {
		if id != lead.ID() {
			f = append(f, id)
		}
	}
	g.down[f[0]] = true
	for i := 0; i < 3*10; i++ { // three election timeouts: CheckQuorum ran
		g.round()
	}
	before := roles(lead.Members())
	_, _, err := lead.RemoveMember(f[1])
	if codeOf(err) != CodeWouldLoseQuorum || !strings.Contains(err.Error(), fmt.Sprintf("not answering: [%d]", f[0])) {
		t.Fatalf("removing the only other live voter: %v", err)
	}
	g.round()
	if got := roles(lead.Members()); got != before {
		t.Fatalf("the refused removal changed the membership: %s", got)
	}
	// Removing the voter that is down keeps a live majority.
	idx, _, err := lead.RemoveMember(f[0])
	if err != nil {
		t.Fatalf("removing the down voter: %v", err)
	}
	g.until("down voter removed", func() bool { _, a, _ := lead.Status(); return a >= idx })
}

// Snapshots replace the conf-change entries that carried the members'
// addresses: the snapshot carries the membership, so a member that joins
// after the log was compacted learns every address from the snapshot it
// installs, and members restarted from a snapshot keep theirs.
func TestMembershipSurvivesSnapshots(t *testing.T) {
	snap := func(cfg Config) Config {
		cfg.SnapshotEntries, cfg.SnapshotCatchUp = 10, ^uint64(0)
		return cfg
	}
	g := &group{t: t, dir: t.TempDir(), nodes: map[uint64]*Node{}, down: map[uint64]bool{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	addrs := map[uint64]string{1: addrOf(1), 2: addrOf(2), 3: addrOf(3)}
	for _, id := range []uint64{1, 2, 3} {
		g.open(snap(Config{ID: id, Peers: []uint64{1, 2, 3}, Addrs: addrs}))
	}
	lead := g.leader()
	for i := 0; i < 40; i++ {
		g.put(g.leader(), fmt.Sprintf("job-%d", i))
	}
	lead = g.leader()
	g.until("the leader compacted its raft log past the bootstrap entries", func() bool {
		first, _ := lead.store.FirstIndex()
		return lead.SnapshotStats().Taken > 0 && first > 4
	})
	n4 := g.open(snap(Config{ID: 4, Join: true}))
	idx, err := lead.AddLearner(4, addrOf(4))
	if err != nil {
		t.Fatal(err)
	}
	g.until("learner added", func() bool { _, a, _ := lead.Status(); return a >= idx })
	four := "1=voter@127.0.0.1:7791,2=voter@127.0.0.1:7792,3=voter@127.0.0.1:7793,4=voter@127.0.0.1:7794"
	// Without a snapshot taken after the learner was added (forceAt), raft
	// keeps offering node 4 one whose configuration lacks it.
	g.until("node 4 promoted and caught up", func() bool {
		_, a, _ := n4.Status()
		_, la, _ := lead.Status()
		return roles(lead.Members()) == four && a == la
	})
	if n4.SnapshotStats().Installed == 0 {
		t.Fatal("node 4 caught up without a snapshot: the test does not cover what it claims")
	}
	if got := roles(n4.Members()); got != four {
		t.Fatalf("node 4's membership after installing a snapshot: %s, want %s", got, four)
	}
	for i := 0; i < 30; i++ {
		g.put(g.leader(), fmt.Sprintf("more-%d", i))
	}
	for _, id := range []uint64{2, 4} {
		n := g.nodes[id]
		g.until(fmt.Sprintf("node %d snapshotted", id), func() bool { return n.SnapshotStats().Taken > 0 || id == 4 })
		n.Close()
		delete(g.nodes, id)
		n = g.open(snap(Config{ID: id}))
		if got := roles(n.Members()); got != four {
			t.Fatalf("node %d's membership after a restart from its snapshot: %s, want %s", id, got, four)
		}
	}
}

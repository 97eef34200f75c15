package broker

import (
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// Real-time channels on a cluster member (docs/cluster.md, "Real-time
// channels"). Every member's hub follows the log: durable publications
// committed under another leader reach it as the member applies their
// entries, and the namespaces' channel policies as they change, so a new
// leader serves the same epochs, offsets and history. Memory-only
// publications and job events are made by the leader alone, after its
// entries commit; when a member takes over, its memory-only channels take
// new epochs (it never heard what the previous leader published on them),
// and the real-time sessions it served are closed when it stops leading
// (the server watches ChannelsGeneration and ChannelsLive).

// memberChannels is the hub's side of a member. Loop-owned except the
// atomics.
type memberChannels struct {
	applied   uint64         // newest log index whose publications reached the hub
	pending   []outPub       // durable publications of entries applied from the log
	nsChanged bool           // an applied entry changed a namespace's policy
	resync    bool           // an applied entry held a bare channel position
	hubEng    *engine.Engine // the engine the hub follows
	eventEng  *engine.Engine // the engine whose job events this leader publishes
	term      uint64         // the term in which this member took over its hub
	live      atomic.Bool    // the hub is the leader's: taken over, not stepped down
	gen       atomic.Uint64  // counts step-downs
}

// onEntry sees a committed entry the member applies from the log. A
// rebuild applies entries again: the hub has those already.
func (b *Broker) onEntry(index uint64, ent *engine.Entry) {
	m := &b.chans.member
	if index <= m.applied {
		return
	}
	m.applied = index
	for i := range ent.Records {
		r := &ent.Records[i]
		switch r.Kind {
		case engine.KindNamespace:
			m.nsChanged = true
		case engine.KindPublication:
			p := &r.Pub
			if !p.HasData {
				m.resync = true
				continue
			}
			// The entry's bytes belong to raft's storage; the hub keeps
			// what it is given.
			m.pending = append(m.pending, outPub{ns: r.NS, ch: p.Channel, data: append([]byte(nil), p.Data...), durable: true,
				epoch: p.Epoch, offset: p.Offset, at: time.UnixMilli(p.Time).UTC()})
		}
	}
}

// memberChannelsStep runs after each Process: the hub catches up with
// what was applied, and a member that stopped leading stops publishing
// job events.
func (b *Broker) memberChannelsStep(self bool) {
	m := &b.chans.member
	eng := b.cl.node.Engine()
	fresh := m.hubEng != eng // a rebuilt (or first) engine
	if m.nsChanged || fresh {
		b.configureHub(eng)
		m.nsChanged = false
	}
	if m.resync || fresh {
		b.syncHub(eng)
		m.resync, m.hubEng = false, eng
	}
	// Not counted as publications: the leader that made them counted
	// them.
	for _, p := range m.pending {
		if _, err := b.chans.hub.PublishAt(p.ns, p.ch, p.epoch, p.offset, p.at, p.data); err != nil {
			b.lg.Warn("cluster: replicated publication not delivered", "channel", p.ns+"/"+p.ch, "err", err)
		}
	}
	clear(m.pending)
	m.pending = m.pending[:0]
	if !self && m.live.Load() {
		if m.eventEng == eng {
			eng.SetEvents(false)
		}
		m.eventEng, m.term = nil, 0
		m.live.Store(false)
		m.gen.Add(1)
	}
}

// memberTakeOver runs on the leader before it serves a batch: the first
// time in a term it brings the hub in line with the committed state and
// renews memory-only epochs; and it publishes the job events of the engine
// it decides with.
func (b *Broker) memberTakeOver(term uint64) {
	m := &b.chans.member
	if m.term != term {
		if m.live.Load() {
			// Leadership ended and came back between two looks: the
			// sessions of the earlier term are stale all the same.
			m.gen.Add(1)
		}
		b.configureHub(b.eng)
		b.syncHub(b.eng)
		if n := b.chans.hub.RenewMemoryEpochs(); n > 0 {
			b.lg.Info("cluster: memory-only channels start new epochs under this leader", "channels", n)
		}
		m.term, m.hubEng = term, b.eng
		m.live.Store(true)
	}
	if m.eventEng != b.eng {
		b.eng.SetEvents(true)
		m.eventEng = b.eng
	}
}

// delivered notes that a leader's committed turn reached the hub.
func (b *Broker) delivered(index uint64) {
	b.chans.member.applied = max(b.chans.member.applied, index)
}

func (b *Broker) configureHub(eng *engine.Engine) {
	for _, ns := range eng.Namespaces() {
		b.chans.hub.Configure(ns.Name, hubConfig(ns.Config.Channels))
	}
}

// syncHub sets every durable channel whose hub position differs from the
// engine's to the engine's position and history.
func (b *Broker) syncHub(eng *engine.Engine) {
	eng.DurableChannels(func(ns, ch string, pos engine.ChannelPosition, pubs []engine.Publication) {
		cur, err := b.chans.hub.Position(ns, ch)
		if err != nil || cur.Epoch == pos.Epoch && cur.Offset == pos.Offset {
			return
		}
		held := make([]*pubsub.Publication, len(pubs))
		for i, p := range pubs {
			held[i] = &pubsub.Publication{Namespace: ns, Channel: ch, Offset: p.Offset, Epoch: p.Epoch, Data: p.Data, Time: time.UnixMilli(p.Time).UTC()}
		}
		if err := b.chans.hub.Restore(ns, ch, pubsub.Position{Epoch: pos.Epoch, Offset: pos.Offset}, held); err != nil {
			b.lg.Warn("cluster: channel history not restored", "channel", ns+"/"+ch, "err", err)
		}
	})
}

// ChannelsLive says whether this member's hub serves real-time sessions:
// it leads and has taken over. Always true outside a cluster.
func (b *Broker) ChannelsLive() bool {
	return b.cl == nil || b.chans.member.live.Load()
}

// ChannelsGeneration changes whenever a member steps down: sessions
// opened before are stale, even if it leads again by the time the server
// looks. (No session opens before a take-over: ChannelsLive is false.)
func (b *Broker) ChannelsGeneration() uint64 { return b.chans.member.gen.Load() }

// ClusterLeaderLost is when this member last stopped knowing a leader
// (zero outside a cluster or if it never did): the server waits for an
// election that started a moment ago instead of failing a request.
func (b *Broker) ClusterLeaderLost() time.Time {
	if b.cl == nil {
		return time.Time{}
	}
	if ns := b.cl.leaderLost.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

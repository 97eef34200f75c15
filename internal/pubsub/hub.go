// Package pubsub is chronoq's real-time channels: per channel a bounded
// history ring with offsets and an epoch, and a fan-out to subscribers that
// never waits for any of them (docs/architecture.md).
//
// The contract a subscriber relies on: publications reach it in offset
// order; a subscribe that asks to recover from {since, epoch} either gets
// every publication after since, in order and before any live one, or is
// told recovered=false. A gap is never silent: whenever history that a
// position could point into is lost (process restart, a channel forgotten
// after idling), the channel gets a new epoch, so old positions stop
// matching instead of matching the wrong publications.
package pubsub

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Config is the history policy of the channels of one namespace.
type Config struct {
	// HistorySize is how many publications a channel keeps for recovery
	// and history reads. 0 picks DefaultHistorySize; negative keeps none
	// (recovery then works only when nothing was missed).
	HistorySize int
	// HistoryTTL is how long a publication stays in history. 0 picks
	// DefaultHistoryTTL; negative keeps publications until the ring
	// pushes them out.
	HistoryTTL time.Duration
	// Durable says the broker logs this namespace's publications and
	// numbers them (PublishAt): the hub then never forgets a channel that
	// has had publications, because a forgotten channel would come back
	// with a new epoch that the log does not know.
	Durable bool
}

// Defaults are the engine's (a namespace's channel history policy is
// engine state).
const (
	DefaultHistorySize = engine.DefaultHistorySize
	DefaultHistoryTTL  = engine.DefaultHistoryTTL
	// MaxHistorySize bounds what one channel can pin in memory.
	MaxHistorySize = engine.MaxChannelHistory
)

func (c Config) normalized() Config {
	if c.HistorySize == 0 {
		c.HistorySize = DefaultHistorySize
	}
	if c.HistorySize < 0 {
		c.HistorySize = 0
	}
	if c.HistorySize > MaxHistorySize {
		c.HistorySize = MaxHistorySize
	}
	if c.HistoryTTL == 0 {
		c.HistoryTTL = DefaultHistoryTTL
	}
	return c
}

// Options configure a Hub.
type Options struct {
	// Default applies to namespaces without their own Configure call.
	Default Config
	// Clock returns the current time (tests use a fake one). History
	// expiry is computed from publication times, never from timers, so a
	// fake clock is all a test needs.
	Clock func() time.Time
	// SweepInterval is how often idle channels are looked for and
	// forgotten. Default one minute.
	SweepInterval time.Duration
}

// Publication is one message of a channel. It is shared, read-only, by the
// history ring and every subscriber queue that holds it.
type Publication struct {
	Namespace string
	Channel   string // name inside the namespace
	Offset    uint64
	Epoch     string
	Data      []byte // JSON text
	Time      time.Time

	memoOnce sync.Once
	memo     any
}

// Memo returns fn's value, computed once per publication. Transports keep
// their encoded form of the publication here, so a publication fanned out
// to 10k sockets is encoded once, not 10k times.
func (p *Publication) Memo(fn func(*Publication) any) any {
	p.memoOnce.Do(func() { p.memo = fn(p) })
	return p.memo
}

// Subscriber receives live publications.
type Subscriber interface {
	// Deliver hands over one publication. It is called with the channel
	// locked, so it must not block: queue the publication and return.
	// Returning false means the subscriber cannot take it (its queue is
	// full or it is closing); the hub then drops the subscription, and
	// the subscriber is expected to disconnect its client with a code that
	// says so, because the client now has a gap it must recover.
	Deliver(p *Publication) bool
}

// ErrBadName is returned for an invalid namespace or channel name.
var ErrBadName = errors.New("pubsub: invalid name")

// Hub holds every channel of the process.
type Hub struct {
	clock func() time.Time
	sweep time.Duration

	mu       sync.RWMutex
	chans    map[chanKey]*channel
	def      Config
	nsConf   map[string]Config
	timer    *time.Timer
	closed   bool
	sweeping bool
}

type chanKey struct{ ns, ch string }

// New makes an empty hub.
func New(opts Options) *Hub {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = time.Minute
	}
	return &Hub{
		clock:  opts.Clock,
		sweep:  opts.SweepInterval,
		chans:  map[chanKey]*channel{},
		def:    opts.Default.normalized(),
		nsConf: map[string]Config{},
	}
}

// Configure sets the history policy of one namespace. Existing channels
// apply it from their next publication on.
func (h *Hub) Configure(ns string, c Config) {
	h.mu.Lock()
	h.nsConf[ns] = c.normalized()
	h.mu.Unlock()
}

// SetDefault sets the policy of namespaces without their own.
func (h *Hub) SetDefault(c Config) {
	h.mu.Lock()
	h.def = c.normalized()
	h.mu.Unlock()
}

func (h *Hub) config(ns string) Config {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if c, ok := h.nsConf[ns]; ok {
		return c
	}
	return h.def
}

// Close stops the background sweep. Channels keep working.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
}

// ValidNamespace reports whether s is a namespace name (the engine's rule).
func ValidNamespace(s string) bool { return engine.ValidNamespaceName(s) }

// ValidChannel reports whether s is a channel name (the engine's rule).
func ValidChannel(s string) bool { return engine.ValidChannel(s) }

// ChannelUsers returns the users a channel is limited to, and whether it
// is limited at all.
func ChannelUsers(ch string) ([]string, bool) {
	_, users, ok := cut(ch, '#')
	if !ok {
		return nil, false
	}
	var out []string
	start := 0
	for i := 0; i <= len(users); i++ {
		if i == len(users) || users[i] == ',' {
			out = append(out, users[start:i])
			start = i + 1
		}
	}
	return out, true
}

func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// open checks the names and returns the channel, created if need be and
// locked, with its namespace's config and the time now.
func (h *Hub) open(ns, ch string) (*channel, Config, time.Time, error) {
	if err := checkNames(ns, ch); err != nil {
		return nil, Config{}, time.Time{}, err
	}
	conf := h.config(ns)
	now := h.clock()
	return h.get(ns, ch, true), conf, now, nil
}

func checkNames(ns, ch string) error {
	if !ValidNamespace(ns) {
		return fmt.Errorf("%w: namespace %q", ErrBadName, ns)
	}
	if !ValidChannel(ch) {
		return fmt.Errorf("%w: channel %q", ErrBadName, ch)
	}
	return nil
}

// newEpoch is random rather than a counter so that it also changes across
// restarts, where a counter would start over and repeat old epochs.
func newEpoch() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; a clock-based
		// fallback still differs between processes.
		return fmt.Sprintf("t%x", time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}

// get returns the live channel for (ns, ch), creating it when create is
// set. The channel comes back locked; it is never one the sweep has
// retired.
func (h *Hub) get(ns, ch string, create bool) *channel {
	k := chanKey{ns, ch}
	for {
		h.mu.RLock()
		c := h.chans[k]
		h.mu.RUnlock()
		if c == nil {
			if !create {
				return nil
			}
			h.mu.Lock()
			if c = h.chans[k]; c == nil {
				c = &channel{ns: ns, name: ch, epoch: newEpoch(), touched: h.clock()}
				h.chans[k] = c
				h.armSweepLocked()
			}
			h.mu.Unlock()
		}
		c.mu.Lock()
		if !c.retired {
			return c
		}
		// The sweep retired it between the map read and the lock: look
		// again, which finds (or makes) its successor.
		c.mu.Unlock()
	}
}

// Publish appends data to a channel's history and hands it to every
// subscriber. It never waits for a subscriber.
func (h *Hub) Publish(ns, ch string, data []byte) (*Publication, error) {
	c, conf, now, err := h.open(ns, ch)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	c.offset++
	p := &Publication{Namespace: ns, Channel: ch, Offset: c.offset, Epoch: c.epoch, Data: data, Time: now}
	c.touched = now
	c.ring.push(p, conf.HistorySize)
	c.prune(now, conf)
	c.fanout(p)
	return p, nil
}

// Durable reports whether ns has durable history (Config.Durable).
func (h *Hub) Durable(ns string) bool { return h.config(ns).Durable }

// Position returns a channel's epoch and newest offset, making the
// channel (and so fixing its epoch) if it does not exist yet.
func (h *Hub) Position(ns, ch string) (Position, error) {
	if err := checkNames(ns, ch); err != nil {
		return Position{}, err
	}
	c := h.get(ns, ch, true)
	defer c.mu.Unlock()
	c.touched = h.clock()
	return Position{Offset: c.offset, Epoch: c.epoch}, nil
}

// PublishAt adds a publication numbered by the caller (durable history:
// the log decided its epoch and offset) and fans it out. Calls for one
// channel come in offset order; an offset the channel has seen already is
// ignored. A different epoch, or a gap, drops the held history: positions
// in it no longer lead to this publication without a loss.
func (h *Hub) PublishAt(ns, ch, epoch string, offset uint64, at time.Time, data []byte) (*Publication, error) {
	if err := checkNames(ns, ch); err != nil {
		return nil, err
	}
	if epoch == "" || offset == 0 {
		return nil, fmt.Errorf("pubsub: publication %s/%s needs an epoch and an offset", ns, ch)
	}
	conf := h.config(ns)
	c := h.get(ns, ch, true)
	defer c.mu.Unlock()
	if c.epoch != epoch {
		c.epoch, c.offset = epoch, offset-1
		c.ring.clear()
	}
	if offset <= c.offset {
		return nil, nil
	}
	if offset != c.offset+1 {
		c.ring.clear()
	}
	c.offset = offset
	p := &Publication{Namespace: ns, Channel: ch, Offset: offset, Epoch: epoch, Data: data, Time: at}
	c.touched = h.clock()
	c.ring.push(p, conf.HistorySize)
	c.prune(c.touched, conf)
	c.fanout(p)
	return p, nil
}

// Restore sets a channel's position and history, as the log recovered
// them at start (before anyone subscribes). pubs are oldest first, with
// consecutive offsets ending at pos.Offset.
func (h *Hub) Restore(ns, ch string, pos Position, pubs []*Publication) error {
	if err := checkNames(ns, ch); err != nil {
		return err
	}
	conf := h.config(ns)
	c := h.get(ns, ch, true)
	defer c.mu.Unlock()
	c.epoch, c.offset = pos.Epoch, pos.Offset
	c.ring.clear()
	for _, p := range pubs {
		c.ring.push(p, conf.HistorySize)
	}
	c.prune(h.clock(), conf)
	return nil
}

// SubscribeOptions say where a subscription starts.
type SubscribeOptions struct {
	// Recover asks for every publication after Since in epoch Epoch. An
	// empty Epoch matches only with Since 0 (an offset means nothing
	// without its epoch).
	Recover bool
	Since   uint64
	Epoch   string
}

// Position is where a channel stands.
type Position struct {
	Offset uint64 // offset of the newest publication (0: none yet)
	Epoch  string
}

// SubscribeResult is what a subscriber learns when it joins.
type SubscribeResult struct {
	Position
	// Recovered is true when Recover was asked and Publications hold
	// everything after Since.
	Recovered    bool
	Publications []*Publication
}

// Subscription is one subscriber's place in one channel.
type Subscription struct {
	h   *Hub
	c   *channel
	s   Subscriber
	idx int // position in c.subs, -1 once removed
}

// Subscribe adds s to a channel. start runs with the channel locked, after
// s is registered and before any live publication can reach it, so that
// whatever start queues (the subscribe answer, recovered publications)
// comes out ahead of live publications, with nothing missed or doubled in
// between.
func (h *Hub) Subscribe(ns, ch string, s Subscriber, o SubscribeOptions, start func(SubscribeResult)) (*Subscription, error) {
	c, conf, now, err := h.open(ns, ch)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	c.prune(now, conf)
	c.touched = now
	res := SubscribeResult{Position: Position{Offset: c.offset, Epoch: c.epoch}}
	if o.Recover {
		res.Publications, res.Recovered = c.since(o.Since, o.Epoch, 0)
	}
	sub := &Subscription{h: h, c: c, s: s, idx: len(c.subs)}
	c.subs = append(c.subs, sub)
	if start != nil {
		start(res)
	}
	return sub, nil
}

// Unsubscribe removes the subscription; calling it again does nothing.
func (s *Subscription) Unsubscribe() {
	c := s.c
	c.mu.Lock()
	c.remove(s)
	c.touched = s.h.clock()
	c.mu.Unlock()
}

// HistoryResult is the answer to a history read.
type HistoryResult struct {
	Position
	Recovered    bool
	Publications []*Publication
}

// History returns up to limit (0: all) publications after since, oldest
// first, if epoch matches and nothing after since was lost.
func (h *Hub) History(ns, ch string, since uint64, epoch string, limit int) (HistoryResult, error) {
	// A read creates the channel so that the epoch it reports is the one
	// later publications carry; otherwise a reader's first position would
	// never match.
	c, conf, now, err := h.open(ns, ch)
	if err != nil {
		return HistoryResult{}, err
	}
	defer c.mu.Unlock()
	c.prune(now, conf)
	c.touched = now
	res := HistoryResult{Position: Position{Offset: c.offset, Epoch: c.epoch}}
	res.Publications, res.Recovered = c.since(since, epoch, limit)
	return res, nil
}

// Stats counts what the hub holds.
type Stats struct {
	Channels      int
	Subscriptions int
	Publications  int // held in history
}

// Stats walks every channel; it is for metrics and tests, not hot paths.
func (h *Hub) Stats() Stats {
	h.mu.RLock()
	chans := make([]*channel, 0, len(h.chans))
	for _, c := range h.chans {
		chans = append(chans, c)
	}
	h.mu.RUnlock()
	st := Stats{Channels: len(chans)}
	for _, c := range chans {
		c.mu.Lock()
		st.Subscriptions += len(c.subs)
		st.Publications += c.ring.len()
		c.mu.Unlock()
	}
	return st
}

// armSweepLocked makes sure a sweep is pending while channels exist. The
// sweep is a timer, not a goroutine, so a hub with no channels holds
// nothing running. h.mu must be held.
func (h *Hub) armSweepLocked() {
	if h.closed || h.sweeping || len(h.chans) == 0 {
		return
	}
	h.sweeping = true
	if h.timer == nil {
		h.timer = time.AfterFunc(h.sweep, h.Sweep)
	} else {
		h.timer.Reset(h.sweep)
	}
}

// Sweep prunes expired history and forgets channels that have no
// subscribers, no history left and have been idle for a TTL. A forgotten
// channel comes back with a new epoch and offsets from 1, which is right:
// its history is gone. It runs by itself; tests call it directly.
func (h *Hub) Sweep() {
	now := h.clock()
	h.mu.Lock()
	h.sweeping = false
	chans := make([]*channel, 0, len(h.chans))
	for _, c := range h.chans {
		chans = append(chans, c)
	}
	h.mu.Unlock()
	for _, c := range chans {
		conf := h.config(c.ns)
		c.mu.Lock()
		c.prune(now, conf)
		idle := conf.HistoryTTL
		if idle < 0 {
			idle = DefaultHistoryTTL
		}
		forget := len(c.subs) == 0 && c.ring.len() == 0 && now.Sub(c.touched) >= idle
		if forget && (!conf.Durable || c.offset == 0) {
			h.mu.Lock()
			if h.chans[chanKey{c.ns, c.name}] == c {
				delete(h.chans, chanKey{c.ns, c.name})
			}
			h.mu.Unlock()
			c.retired = true
		}
		c.mu.Unlock()
	}
	h.mu.Lock()
	h.armSweepLocked()
	h.mu.Unlock()
}

type channel struct {
	mu      sync.Mutex
	ns      string
	name    string
	offset  uint64
	epoch   string
	ring    ring
	subs    []*Subscription
	touched time.Time // last publish, subscribe or read
	retired bool      // forgotten by the sweep; holders must look again
}

// fanout hands p to every subscriber. Those that refuse are dropped here,
// under the lock, so a publication after this one can never reach them
// (which would hide the gap from them).
func (c *channel) fanout(p *Publication) {
	for i := 0; i < len(c.subs); {
		s := c.subs[i]
		if s.s.Deliver(p) {
			i++
			continue
		}
		c.remove(s) // moves the last subscriber into slot i
	}
}

func (c *channel) remove(s *Subscription) {
	i := s.idx
	if i < 0 || i >= len(c.subs) || c.subs[i] != s {
		return
	}
	last := len(c.subs) - 1
	c.subs[i] = c.subs[last]
	c.subs[i].idx = i
	c.subs[last] = nil
	c.subs = c.subs[:last]
	s.idx = -1
	// Give memory back after a crowd leaves a busy channel.
	if cap(c.subs) > 64 && len(c.subs) < cap(c.subs)/4 {
		c.subs = append([]*Subscription(nil), c.subs...)
	}
}

// prune drops publications older than the TTL.
func (c *channel) prune(now time.Time, conf Config) {
	if conf.HistoryTTL < 0 {
		return
	}
	for c.ring.len() > 0 && now.Sub(c.ring.at(0).Time) >= conf.HistoryTTL {
		c.ring.popFront()
	}
	// A smaller size configured since the last push applies now too.
	for c.ring.len() > conf.HistorySize {
		c.ring.popFront()
	}
}

// since returns the publications after `since`, and whether that is all
// of them. The first held offset is offset-len+1, because offsets are
// consecutive and the ring only ever loses its oldest entries.
func (c *channel) since(since uint64, epoch string, limit int) ([]*Publication, bool) {
	if epoch != c.epoch && (epoch != "" || since != 0) {
		return nil, false
	}
	if since > c.offset {
		return nil, false
	}
	first := c.offset - uint64(c.ring.len()) + 1
	if since+1 < first {
		return nil, false
	}
	n := int(c.offset - since)
	if limit > 0 && n > limit {
		n = limit
	}
	out := make([]*Publication, 0, n)
	start := c.ring.len() - int(c.offset-since)
	for i := start; i < start+n; i++ {
		out = append(out, c.ring.at(i))
	}
	return out, true
}

// ChannelInfo describes one live channel (the dashboard's channel list).
type ChannelInfo struct {
	Namespace, Channel string
	Offset             uint64
	Epoch              string
	Subscribers        int
	History            int // publications held
}

// List answers up to limit live channels of namespace ns in name order,
// starting after the name after ("" from the first); more says whether
// others follow. It walks every channel, like Stats: for the admin
// listener, not hot paths.
func (h *Hub) List(ns, after string, limit int) (list []ChannelInfo, more bool) {
	h.mu.RLock()
	chans := make([]*channel, 0)
	for k, c := range h.chans {
		if k.ns == ns && k.ch > after {
			chans = append(chans, c)
		}
	}
	h.mu.RUnlock()
	slices.SortFunc(chans, func(a, b *channel) int { return strings.Compare(a.name, b.name) })
	if len(chans) > limit {
		chans, more = chans[:limit], true
	}
	for _, c := range chans {
		c.mu.Lock()
		list = append(list, ChannelInfo{Namespace: c.ns, Channel: c.name, Offset: c.offset, Epoch: c.epoch,
			Subscribers: len(c.subs), History: c.ring.len()})
		c.mu.Unlock()
	}
	return list, more
}

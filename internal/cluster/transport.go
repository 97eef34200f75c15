package cluster

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/engine"
)

// The peer protocol. Each member dials every other member and only sends
// on the connections it dialled, so a connection carries messages one
// way. A connection starts with a mutual challenge-response on the
// cluster secret (HMAC-SHA256), so a peer that does not know the secret
// can neither send raft messages nor pose as a member. Without TLS the
// traffic itself is not encrypted (run it on a private network); with
// TransportConfig.TLS every connection is mutual TLS first and the
// challenge-response runs inside it, so a member needs both a certificate
// from the peer CA and the secret.
//
//	server → client: magic "CHRONOQP1\n", nonceS (32 bytes)
//	client → server: magic, group u64, from u64, to u64, nonceC (32),
//	                 advertise (u16 length, bytes: the client's HTTP URL),
//	                 macC = HMAC(secret, "client" ‖ nonceS ‖ nonceC ‖ group ‖ from ‖ to ‖ advertise)
//	server → client: status byte (0 ok, 1 refused, 2 refused: the client
//	                 was removed from the cluster) then
//	                 macS = HMAC(secret, "server" ‖ nonceC ‖ nonceS ‖ group ‖ from ‖ to)
//	                 or, when refused, u16 length and the reason
//	then client → server: frames of u32 length ‖ raftpb.Message
//
// A MsgSnap whose Data is a snapshot descriptor (snapshot.go, "Sending a
// snapshot") is followed by the snapshot's items, each u32 length ‖
// engine entry (at most maxPeerFrame bytes; a leader writes items of about
// 1 MiB, or a quarter of its segment size if smaller, or one job if larger),
// then u32 CRC-32C of the descriptor and those item frames. The receiver writes them to a file
// in TransportConfig.SnapshotDir and delivers the message only once count,
// bytes and CRC match.
//
// Integers are little endian.

const (
	peerMagic        = "CHRONOQP1\n"
	handshakeTimeout = 5 * time.Second
	peerQueue        = 4096
)

// maxPeerFrame bounds one message or snapshot item by default: raft
// batches entries up to MaxSizePerMsg (1 MiB), but a single entry (a
// large batch put) may be bigger.
const maxPeerFrame = 256 << 20

func (t *Transport) maxFrame() uint64 {
	if t.cfg.MaxMessage > 0 {
		return uint64(t.cfg.MaxMessage)
	}
	return maxPeerFrame
}

// TransportConfig configures the peer transport of member ID.
type TransportConfig struct {
	ID    uint64
	Group uint64
	// Listen is the address to accept peers on ("" uses Peers[ID]).
	Listen string
	// Peers maps every member id (this one included) to its peer address.
	Peers map[uint64]string
	// Secret authenticates members to each other.
	Secret []byte
	// Advertise is this member's client (HTTP) URL, told to peers so a
	// follower can forward to the leader.
	Advertise string
	Deliver   func(raftpb.Message)
	// OnPeerDown, when set, is told when the connection a peer sends on
	// ends (a killed process closes it at once): a failure detector
	// faster than raft's election timeout.
	OnPeerDown func(id uint64)
	// OnRemoved, when set, is told (once) that a peer refused this member
	// because the cluster removed it (membership.go).
	OnRemoved func(reason string)
	Logger    *slog.Logger
	// TLS, when set, turns on mutual TLS for every peer connection. It is
	// called for each new connection (so a reloaded certificate applies
	// to the next connection) and gives the accepting side's config:
	// Certificates[0] is this member's certificate, ClientCAs the peer CA
	// and ClientAuth must require and verify a certificate. The dialling
	// side presents the same certificate and verifies the peer's against
	// RootCAs, or ClientCAs when RootCAs is nil, and its peer address.
	TLS func() *tls.Config
	// SnapshotItems, when set, streams the items of this member's
	// snapshot at an index after a MsgSnap carrying its descriptor
	// (Node.SnapshotItems; the node runs with Config.SnapshotStream).
	SnapshotItems func(index uint64, fn func(item []byte) error) error
	// SnapshotDir is where snapshots received from a leader are written
	// before raft sees them (os.TempDir() when empty).
	SnapshotDir string
	// OnSnapshotFailed, when set, is told that streaming a snapshot to
	// peer to broke off (Node.SnapshotFailed: raft sends it again).
	OnSnapshotFailed func(to uint64)
	// MaxMessage bounds one received message or snapshot item (0:
	// maxPeerFrame, 256 MiB).
	MaxMessage int
}

// Transport sends raft messages to peers over TCP and delivers what they
// send. Send never blocks: a peer that cannot keep up loses messages,
// which raft retransmits.
type Transport struct {
	cfg  TransportConfig
	ln   net.Listener
	lg   *slog.Logger
	stop chan struct{}
	wg   sync.WaitGroup

	// The peer table changes with the membership (UpdatePeers).
	pmu     sync.RWMutex
	peers   map[uint64]*peerOut
	removed map[uint64]bool // ids the cluster removed: refused as such
	retired string          // set once this member was removed
	told    atomic.Bool     // OnRemoved was called

	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	inbound   map[net.Conn]uint64 // accepted connections by sending peer
	advertise map[uint64]string
	refused   map[string]time.Time // remote host and reason → last refusal logged
}

type peerOut struct {
	id   uint64
	addr string
	q    chan raftpb.Message
	quit chan struct{} // closed when the peer leaves the table
}

// NewTransport starts listening.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	if cfg.Group == 0 {
		cfg.Group = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if _, ok := cfg.Peers[cfg.ID]; !ok {
		return nil, fmt.Errorf("cluster: node id %d is not among the peers", cfg.ID)
	}
	listen := cfg.Listen
	if listen == "" {
		listen = cfg.Peers[cfg.ID]
	}
	if cfg.SnapshotDir != "" {
		// Left by a receive or an install a crash cut short: nothing reads
		// them any more (raft asks for the snapshot again).
		old, _ := filepath.Glob(filepath.Join(cfg.SnapshotDir, "raft-snapshot-*.recv"))
		for _, f := range old {
			os.Remove(f)
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: listen for peers on %s: %w", listen, err)
	}
	t := &Transport{cfg: cfg, ln: ln, lg: cfg.Logger, peers: map[uint64]*peerOut{}, removed: map[uint64]bool{}, stop: make(chan struct{}),
		conns: map[net.Conn]struct{}{}, inbound: map[net.Conn]uint64{}, advertise: map[uint64]string{}, refused: map[string]time.Time{}}
	for id, addr := range cfg.Peers {
		if id != cfg.ID {
			t.addPeer(id, addr)
		}
	}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Addr is the address peers connect to.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// Advertised is the client URL member id announced, if it connected.
func (t *Transport) Advertised(id uint64) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.advertise[id]
}

// Send queues messages for their peers.
func (t *Transport) Send(msgs []raftpb.Message) {
	t.pmu.RLock()
	defer t.pmu.RUnlock()
	for _, m := range msgs {
		p := t.peers[m.To]
		if p == nil {
			continue
		}
		select {
		case p.q <- m:
		default: // full: dropped, raft retransmits
		}
	}
}

// Close stops listening, closes every connection and waits for the
// transport's goroutines.
func (t *Transport) Close() error {
	// Under pmu: UpdatePeers starts no sender once stop is closed.
	t.pmu.Lock()
	select {
	case <-t.stop:
		t.pmu.Unlock()
		return nil
	default:
	}
	close(t.stop)
	t.pmu.Unlock()
	err := t.ln.Close()
	t.mu.Lock()
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.stop:
		return false
	default:
	}
	t.conns[c] = struct{}{}
	return true
}

// retrack replaces a tracked connection by its TLS wrapper, so that
// Close shuts the TLS session down.
func (t *Transport) retrack(old, c net.Conn) {
	t.mu.Lock()
	delete(t.conns, old)
	t.conns[c] = struct{}{}
	t.mu.Unlock()
}

// clientTLS is the dialling side's config: the certificate of the
// accepting side's config, the peer CA as roots and the peer address as
// the name to verify.
func (t *Transport) clientTLS(addr string) *tls.Config {
	base := t.cfg.TLS()
	host, _, _ := net.SplitHostPort(addr)
	roots := base.RootCAs
	if roots == nil {
		roots = base.ClientCAs
	}
	certs := base.Certificates
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: base.CipherSuites,
		RootCAs:      roots,
		ServerName:   host,
		// Present the certificate whatever CA names the peer asks for:
		// it is this member's identity, and the peer decides.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if len(certs) == 0 {
				return &tls.Certificate{}, nil
			}
			return &certs[0], nil
		},
	}
}

// tlsHandshake runs the TLS handshake within the handshake timeout.
func (t *Transport) tlsHandshake(c *tls.Conn) error {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	return c.Handshake()
}

func (t *Transport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	delete(t.inbound, c)
	t.mu.Unlock()
	c.Close()
}

func (t *Transport) mac(side string, a, b []byte, group, from, to uint64, extra []byte) []byte {
	h := hmac.New(sha256.New, t.cfg.Secret)
	h.Write([]byte(side))
	h.Write(a)
	h.Write(b)
	var n [24]byte
	binary.LittleEndian.PutUint64(n[0:], group)
	binary.LittleEndian.PutUint64(n[8:], from)
	binary.LittleEndian.PutUint64(n[16:], to)
	h.Write(n[:])
	h.Write(extra)
	return h.Sum(nil)
}

func (t *Transport) sender(p *peerOut) {
	defer t.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		c, err := t.dial(p)
		if err != nil {
			t.lg.Debug("cluster: cannot reach peer", "peer", p.id, "addr", p.addr, "err", err)
			var rm *removedErr
			if errors.As(err, &rm) {
				if t.told.CompareAndSwap(false, true) && t.cfg.OnRemoved != nil {
					t.cfg.OnRemoved(rm.reason)
				}
			}
			var rf *refusal
			if errors.As(err, &rf) {
				// A refusal is a configuration problem (a node started
				// with --join that no one added, say): say so, once a
				// minute.
				t.warnLimited(fmt.Sprintf("peer %d %s", p.id, rf.reason), "cluster: a peer refuses this node", "peer", p.id, "addr", p.addr, "reason", rf.reason)
			}
			select {
			case <-t.stop:
				return
			case <-p.quit:
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Second)
			// Messages queued meanwhile are stale; raft sends afresh.
			for len(p.q) > 0 {
				<-p.q
			}
			continue
		}
		backoff = 50 * time.Millisecond
		err = t.pump(c, p)
		t.untrack(c)
		if err == nil {
			return // stopping, or the peer left the table
		}
		t.lg.Debug("cluster: peer connection lost", "peer", p.id, "err", err)
	}
}

func (t *Transport) dial(p *peerOut) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", p.addr, handshakeTimeout)
	if err != nil {
		return nil, err
	}
	if !t.track(c) {
		c.Close()
		return nil, errors.New("transport closed")
	}
	if t.cfg.TLS != nil {
		tc := tls.Client(c, t.clientTLS(p.addr))
		t.retrack(c, tc)
		c = tc
		if err := t.tlsHandshake(tc); err != nil {
			t.untrack(c)
			return nil, fmt.Errorf("TLS with peer %d at %s: %w", p.id, p.addr, err)
		}
	}
	if err := t.clientHandshake(c, p.id); err != nil {
		t.untrack(c)
		return nil, err
	}
	return c, nil
}

func (t *Transport) clientHandshake(c net.Conn, to uint64) error {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	hello := make([]byte, len(peerMagic)+32)
	if _, err := io.ReadFull(c, hello); err != nil {
		return fmt.Errorf("read peer hello: %w", err)
	}
	if string(hello[:len(peerMagic)]) != peerMagic {
		return errors.New("the peer address does not speak chronoq's peer protocol")
	}
	nonceS := hello[len(peerMagic):]
	nonceC := make([]byte, 32)
	rand.Read(nonceC)
	adv := []byte(t.cfg.Advertise)
	if len(adv) > 1024 {
		adv = adv[:1024]
	}
	msg := append([]byte(peerMagic), make([]byte, 24)...)
	binary.LittleEndian.PutUint64(msg[len(peerMagic):], t.cfg.Group)
	binary.LittleEndian.PutUint64(msg[len(peerMagic)+8:], t.cfg.ID)
	binary.LittleEndian.PutUint64(msg[len(peerMagic)+16:], to)
	msg = append(msg, nonceC...)
	msg = binary.LittleEndian.AppendUint16(msg, uint16(len(adv)))
	msg = append(msg, adv...)
	msg = append(msg, t.mac("client", nonceS, nonceC, t.cfg.Group, t.cfg.ID, to, adv)...)
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("send handshake: %w", err)
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil {
		return fmt.Errorf("read handshake answer: %w", err)
	}
	if st[0] != 0 {
		var n [2]byte
		io.ReadFull(c, n[:])
		reason := make([]byte, min(binary.LittleEndian.Uint16(n[:]), 512))
		io.ReadFull(c, reason)
		if st[0] == 2 {
			return &removedErr{fmt.Sprintf("peer %d: %s", to, reason)}
		}
		return &refusal{fmt.Sprintf("refused this node: %s", reason)}
	}
	macS := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, macS); err != nil {
		return fmt.Errorf("read handshake answer: %w", err)
	}
	if !hmac.Equal(macS, t.mac("server", nonceC, nonceS, t.cfg.Group, t.cfg.ID, to, nil)) {
		return fmt.Errorf("peer %d at %s does not know the cluster secret", to, c.RemoteAddr())
	}
	return nil
}

func (t *Transport) pump(c net.Conn, p *peerOut) error {
	w := bufio.NewWriterSize(c, 64<<10)
	var buf []byte
	for {
		var m raftpb.Message
		select {
		case <-t.stop:
			return nil
		case <-p.quit:
			return nil
		case m = <-p.q:
		}
		for {
			size := m.Size()
			buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(size))
			buf = append(buf, make([]byte, size)...)
			if _, err := m.MarshalTo(buf[4:]); err != nil {
				return fmt.Errorf("encode %s: %w", m.Type, err)
			}
			c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
			if _, err := w.Write(buf); err != nil {
				return err
			}
			if isSnapDesc(&m) {
				if err := t.sendSnapshot(c, w, &m); err != nil {
					if t.cfg.OnSnapshotFailed != nil {
						t.cfg.OnSnapshotFailed(m.To)
					}
					return err
				}
			}
			select {
			case m = <-p.q:
				continue
			default:
			}
			break
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

func (t *Transport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.stop:
				return
			default:
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !t.track(c) {
			c.Close()
			return
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if t.cfg.TLS != nil {
				tc := tls.Server(c, t.cfg.TLS())
				t.retrack(c, tc)
				c = tc
				if err := t.tlsHandshake(tc); err != nil {
					t.untrack(c)
					t.refuse(c, fmt.Errorf("TLS handshake: %w", err))
					return
				}
			}
			defer t.untrack(c)
			from, err := t.serverHandshake(c)
			if err != nil {
				t.refuse(c, err)
				return
			}
			if !t.inboundFrom(c, from) {
				return // removed meanwhile
			}
			err = t.receive(c, from)
			select {
			case <-t.stop:
				return
			default:
			}
			t.pmu.RLock()
			_, member := t.peers[from]
			t.pmu.RUnlock()
			if err != nil && member {
				// (A connection of a peer that left the table was closed
				// here on purpose.)
				t.lg.Warn("cluster: dropped a peer connection", "peer", from, "remote", c.RemoteAddr().String(), "err", err)
			}
			if t.cfg.OnPeerDown != nil {
				t.cfg.OnPeerDown(from)
			}
		}()
	}
}

// refuse logs a refused connection (at most once a minute per address
// and reason: a misconfigured peer retries all the time).
func (t *Transport) refuse(c net.Conn, err error) {
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	t.warnLimited(host+" "+err.Error(), "cluster: refused a peer connection", "remote", c.RemoteAddr().String(), "err", err)
}

// warnLimited logs msg at most once a minute per key.
func (t *Transport) warnLimited(key, msg string, args ...any) {
	t.mu.Lock()
	last := t.refused[key]
	log := time.Since(last) > time.Minute
	if log {
		if len(t.refused) > 1000 {
			clear(t.refused)
		}
		t.refused[key] = time.Now()
	}
	t.mu.Unlock()
	if log {
		t.lg.Warn(msg, args...)
	}
}

type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

// removedErr is a peer's answer that the cluster removed this member.
type removedErr struct{ reason string }

func (r *removedErr) Error() string { return r.reason }

func (t *Transport) serverHandshake(c net.Conn) (uint64, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	nonceS := make([]byte, 32)
	rand.Read(nonceS)
	if _, err := c.Write(append([]byte(peerMagic), nonceS...)); err != nil {
		return 0, err
	}
	head := make([]byte, len(peerMagic)+24+32+2)
	if _, err := io.ReadFull(c, head); err != nil {
		return 0, fmt.Errorf("read handshake: %w", err)
	}
	if string(head[:len(peerMagic)]) != peerMagic {
		return 0, errors.New("not chronoq's peer protocol")
	}
	o := len(peerMagic)
	group := binary.LittleEndian.Uint64(head[o:])
	from := binary.LittleEndian.Uint64(head[o+8:])
	to := binary.LittleEndian.Uint64(head[o+16:])
	nonceC := head[o+24 : o+56]
	advLen := int(binary.LittleEndian.Uint16(head[o+56:]))
	if advLen > 1024 {
		return 0, fmt.Errorf("advertised address of %d bytes, more than 1024", advLen)
	}
	rest := make([]byte, advLen+sha256.Size)
	if _, err := io.ReadFull(c, rest); err != nil {
		return 0, fmt.Errorf("read handshake: %w", err)
	}
	adv, macC := rest[:advLen], rest[advLen:]
	answer := func(reason string) error { return t.answerRefusal(c, 1, reason) }
	if !hmac.Equal(macC, t.mac("client", nonceS, nonceC, group, from, to, adv)) {
		return 0, answer("wrong cluster secret")
	}
	if group != t.cfg.Group {
		return 0, answer(fmt.Sprintf("raft group %d, this node serves group %d", group, t.cfg.Group))
	}
	if to != t.cfg.ID {
		return 0, answer(fmt.Sprintf("dialled node %d, this is node %d: check --peers", to, t.cfg.ID))
	}
	t.pmu.RLock()
	_, known := t.peers[from]
	removed, retired := t.removed[from], t.retired
	t.pmu.RUnlock()
	switch {
	case retired != "":
		return 0, answer(fmt.Sprintf("node %d was removed from the cluster and takes no part in it", t.cfg.ID))
	case removed:
		return 0, t.answerRefusal(c, 2, fmt.Sprintf("node %d was removed from the cluster", from))
	case !known:
		return 0, answer(fmt.Sprintf("node %d is not a member of this cluster as node %d knows it (its membership, or its --peers while it joins): "+
			"add it with chronoq cluster add %d PEER_ADDR, and give a joining node every current member in --peers", from, t.cfg.ID, from))
	}
	if _, err := c.Write(append([]byte{0}, t.mac("server", nonceC, nonceS, group, from, to, nil)...)); err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.advertise[from] = string(adv)
	t.mu.Unlock()
	return from, nil
}

// answerRefusal tells a dialling peer why it is refused (status 1, or 2:
// it was removed from the cluster).
func (t *Transport) answerRefusal(c net.Conn, status byte, reason string) error {
	b := append([]byte{status}, 0, 0)
	binary.LittleEndian.PutUint16(b[1:], uint16(len(reason)))
	c.Write(append(b, reason...))
	return &refusal{reason}
}

// inboundFrom records that accepted connection c carries peer from's
// messages, unless from left the table meanwhile.
func (t *Transport) inboundFrom(c net.Conn, from uint64) bool {
	t.pmu.RLock()
	_, ok := t.peers[from]
	t.pmu.RUnlock()
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inbound[c] = from
	return true
}

// addPeer starts sending to member id at addr; pmu held or not yet shared.
func (t *Transport) addPeer(id uint64, addr string) {
	p := &peerOut{id: id, addr: addr, q: make(chan raftpb.Message, peerQueue), quit: make(chan struct{})}
	t.peers[id] = p
	t.wg.Add(1)
	go t.sender(p)
}

// dropPeer stops sending to member id and closes the connections it sends
// on; pmu held.
func (t *Transport) dropPeer(id uint64) {
	if p := t.peers[id]; p != nil {
		close(p.quit)
		delete(t.peers, id)
	}
	t.mu.Lock()
	for c, from := range t.inbound {
		if from == id {
			c.Close()
			delete(t.inbound, c)
		}
	}
	t.mu.Unlock()
}

// UpdatePeers makes the peer table the membership: members (id → peer
// address, this member included or not) are sent to, the others are
// dropped, and removed ids are refused as removed when they dial. An
// empty members leaves the table as it is (a joining member knows only
// its --peers until the log tells it the membership).
func (t *Transport) UpdatePeers(members map[uint64]string, removed []uint64) {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	select {
	case <-t.stop:
		return
	default:
	}
	for _, id := range removed {
		t.removed[id] = true
	}
	if len(members) == 0 || t.retired != "" {
		return
	}
	for id, p := range t.peers {
		if addr, ok := members[id]; !ok || (addr != "" && addr != p.addr) {
			t.dropPeer(id)
		}
	}
	for id, addr := range members {
		if id == t.cfg.ID || addr == "" {
			continue
		}
		if _, ok := t.peers[id]; !ok {
			t.addPeer(id, addr)
		}
	}
}

// Peers is the peer table: member id → the address sent to.
func (t *Transport) Peers() map[uint64]string {
	t.pmu.RLock()
	defer t.pmu.RUnlock()
	out := make(map[uint64]string, len(t.peers))
	for id, p := range t.peers {
		out[id] = p.addr
	}
	return out
}

// Retire stops all raft traffic of a member the cluster removed: nothing
// is sent any more, open peer connections close, and peers that dial are
// told this member was removed.
func (t *Transport) Retire(why string) {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if t.retired != "" {
		return
	}
	t.retired = why
	for id := range t.peers {
		t.dropPeer(id)
	}
	t.mu.Lock()
	for c := range t.inbound {
		c.Close()
	}
	clear(t.inbound)
	t.mu.Unlock()
}

func (t *Transport) receive(c net.Conn, from uint64) error {
	r := bufio.NewReaderSize(c, 64<<10)
	var n [4]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, n[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		size := binary.LittleEndian.Uint32(n[:])
		if uint64(size) > t.maxFrame() {
			return fmt.Errorf("message of %d bytes, more than %d", size, t.maxFrame())
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		var m raftpb.Message
		if err := m.Unmarshal(buf); err != nil {
			return fmt.Errorf("undecodable message: %w", err)
		}
		if m.From != from || m.To != t.cfg.ID {
			return fmt.Errorf("message from %d to %d on the connection of node %d to node %d", m.From, m.To, from, t.cfg.ID)
		}
		// Entries alias buf, which is reused.
		buf = nil
		if m.Type == raftpb.MsgSnap && m.Snapshot != nil && len(m.Snapshot.Data) >= 2 && m.Snapshot.Data[1] == snapLocalVersion {
			return errors.New("a peer sent a local snapshot descriptor")
		}
		if isSnapDesc(&m) {
			if err := t.receiveSnapshot(c, r, &m); err != nil {
				return fmt.Errorf("snapshot at entry %d from node %d: %w", m.Snapshot.Metadata.Index, from, err)
			}
		}
		t.cfg.Deliver(m)
	}
}

func isSnapDesc(m *raftpb.Message) bool {
	return m.Type == raftpb.MsgSnap && m.Snapshot != nil && len(m.Snapshot.Data) >= 2 &&
		m.Snapshot.Data[0] == snapDataMagic && m.Snapshot.Data[1] == snapDescVersion
}

// snapItemTimeout bounds the wait for one snapshot item on either side.
const snapItemTimeout = 30 * time.Second

// sendSnapshot streams the items of the snapshot m describes, then the
// CRC of its descriptor and them. An error ends the connection: the follower drops what it received.
func (t *Transport) sendSnapshot(c net.Conn, w *bufio.Writer, m *raftpb.Message) error {
	if t.cfg.SnapshotItems == nil {
		return errors.New("snapshot descriptor without a snapshot source")
	}
	d, err := parseSnapDesc(m.Snapshot.Data, snapDescVersion)
	if err != nil {
		return fmt.Errorf("send snapshot at entry %d: %w", m.Snapshot.Metadata.Index, err)
	}
	crc := crc32.Checksum(m.Snapshot.Data, castagnoli)
	var count uint32
	var n [4]byte
	err = t.cfg.SnapshotItems(m.Snapshot.Metadata.Index, func(item []byte) error {
		if count == d.items {
			return fmt.Errorf("more than its %d items", d.items)
		}
		count++
		binary.LittleEndian.PutUint32(n[:], uint32(len(item)))
		crc = crc32.Update(crc, castagnoli, n[:])
		crc = crc32.Update(crc, castagnoli, item)
		c.SetWriteDeadline(time.Now().Add(snapItemTimeout))
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		_, err := w.Write(item)
		return err
	})
	if err == nil && count != d.items {
		err = fmt.Errorf("%d items, its descriptor says %d", count, d.items)
	}
	if err != nil {
		t.lg.Warn("cluster: sending a snapshot failed", "peer", m.To, "index", m.Snapshot.Metadata.Index, "err", err)
		return fmt.Errorf("send snapshot at entry %d: %w", m.Snapshot.Metadata.Index, err)
	}
	binary.LittleEndian.PutUint32(n[:], crc)
	_, err = w.Write(n[:])
	return err
}

// receiveSnapshot reads the items following the snapshot descriptor in m
// into a file, one item in memory at a time, checks them, and makes m's
// Data the local descriptor naming the file. On any error the file is
// removed and m is not to be delivered.
func (t *Transport) receiveSnapshot(c net.Conn, r *bufio.Reader, m *raftpb.Message) (err error) {
	d, err := parseSnapDesc(m.Snapshot.Data, snapDescVersion)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(t.cfg.SnapshotDir, "raft-snapshot-*.recv")
	if err != nil {
		return fmt.Errorf("create the file to receive it: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("write %s: %w", f.Name(), cerr)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	fw := bufio.NewWriterSize(f, 64<<10)
	crc := uint32(0) // of the item frames, kept for the install
	wire := crc32.Checksum(m.Snapshot.Data, castagnoli)
	var total uint64
	var n [4]byte
	var buf []byte
	for i := uint32(0); i < d.items; i++ {
		c.SetReadDeadline(time.Now().Add(snapItemTimeout))
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return fmt.Errorf("item %d of %d: %w", i, d.items, err)
		}
		l := binary.LittleEndian.Uint32(n[:])
		if uint64(l) > t.maxFrame() {
			return fmt.Errorf("item %d of %d bytes, more than %d", i, l, t.maxFrame())
		}
		if total += uint64(l); total > d.bytes {
			return fmt.Errorf("items beyond the %d bytes the descriptor says", d.bytes)
		}
		if cap(buf) < int(l) {
			buf = make([]byte, l)
		}
		buf = buf[:l]
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("item %d of %d: %w", i, d.items, err)
		}
		if _, err := engine.DecodeEntry(buf, 0, 0); err != nil {
			return fmt.Errorf("item %d of %d: %w", i, d.items, err)
		}
		crc = crc32.Update(crc, castagnoli, n[:])
		crc = crc32.Update(crc, castagnoli, buf)
		wire = crc32.Update(wire, castagnoli, n[:])
		wire = crc32.Update(wire, castagnoli, buf)
		fw.Write(n[:])
		if _, err := fw.Write(buf); err != nil {
			return fmt.Errorf("write %s: %w", f.Name(), err)
		}
	}
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	c.SetReadDeadline(time.Time{})
	if got := binary.LittleEndian.Uint32(n[:]); got != wire || total != d.bytes {
		return fmt.Errorf("items of %d bytes with checksum %08x, the leader says %d bytes with %08x", total, wire, d.bytes, got)
	}
	if err := fw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	d.crc, d.path = crc, f.Name()
	snap := *m.Snapshot
	snap.Data = appendSnapDesc(nil, snapLocalVersion, d)
	m.Snapshot = &snap
	return nil
}

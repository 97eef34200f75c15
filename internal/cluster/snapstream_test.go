package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/engine"
)

// streamItems are valid snapshot items (encoded engine entries).
func streamItems(n int) [][]byte {
	var items [][]byte
	for i := 0; i < n; i++ {
		ent := engine.Entry{Time: int64(100 + i)}
		items = append(items, ent.Encode(nil))
	}
	return items
}

// snapStream is what a leader writes after the MsgSnap: items × (length,
// item); receiveFrom appends the CRC-32C of the descriptor and those.
func snapStream(items [][]byte) (stream []byte, bytes uint64) {
	for _, it := range items {
		stream = binary.LittleEndian.AppendUint32(stream, uint32(len(it)))
		stream = append(stream, it...)
		bytes += uint64(len(it))
	}
	return stream, bytes
}

// receiveFrom runs receiveSnapshot on a descriptor and the item frames
// that follow it with their CRC, passed through damage (if set).
func receiveFrom(t *testing.T, dir string, d snapDesc, frames []byte, damage func([]byte) []byte) (raftpb.Message, error) {
	t.Helper()
	tr := &Transport{cfg: TransportConfig{SnapshotDir: dir, MaxMessage: 1 << 10}}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	mem := newMembership()
	d.mem = mem.encode()
	m := raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Snapshot: &raftpb.Snapshot{
		Metadata: raftpb.SnapshotMetadata{Index: 50, Term: 2}, Data: appendSnapDesc(nil, snapDescVersion, d)}}
	crc := crc32.Update(crc32.Checksum(m.Snapshot.Data, castagnoli), castagnoli, frames)
	stream := binary.LittleEndian.AppendUint32(bytes.Clone(frames), crc)
	if damage != nil {
		stream = damage(stream)
	}
	go func() {
		a.Write(stream)
		a.Close()
	}()
	err := tr.receiveSnapshot(b, bufio.NewReader(b), &m)
	return m, err
}

func recvFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "raft-snapshot-*.recv"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A streamed snapshot lands in a file that reads back item for item; a
// file damaged afterwards fails its checksum when read.
func TestReceiveSnapshotWritesCheckedFile(t *testing.T) {
	dir := t.TempDir()
	items := streamItems(20)
	stream, size := snapStream(items)
	m, err := receiveFrom(t, dir, snapDesc{time: 77, items: uint32(len(items)), bytes: size}, stream, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSnapMessage(&m); err != nil {
		t.Fatalf("the received snapshot is refused: %v", err)
	}
	var got [][]byte
	tm, _, err := snapItems(m.Snapshot.Data, func(it []byte) error {
		got = append(got, bytes.Clone(it))
		return nil
	})
	if err != nil || tm != 77 || len(got) != len(items) {
		t.Fatalf("read back %d items at time %d (%v), want %d at 77", len(got), tm, err, len(items))
	}
	for i := range items {
		if !bytes.Equal(got[i], items[i]) {
			t.Fatalf("item %d differs", i)
		}
	}
	files := recvFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("files %v, want one", files)
	}
	raw, _ := os.ReadFile(files[0])
	raw[len(raw)-1] ^= 0xFF
	os.WriteFile(files[0], raw, 0o600)
	if _, _, err := snapItems(m.Snapshot.Data, func([]byte) error { return nil }); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("a damaged received file reads back with %v, want a checksum error", err)
	}
	removeReceived(m.Snapshot.Data)
	if files := recvFiles(t, dir); len(files) != 0 {
		t.Fatalf("files %v left after removal", files)
	}
}

// A stream that is corrupt, garbage, too large, longer or shorter than its
// descriptor is refused and leaves no file behind.
func TestReceiveSnapshotRefusesBadStreams(t *testing.T) {
	items := streamItems(10)
	good, size := snapStream(items)
	desc := snapDesc{time: 1, items: uint32(len(items)), bytes: size}
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte {
			if at < 0 {
				at += len(b)
			}
			b[at] ^= 0x40
			return b
		}
	}
	cut := func(b []byte) []byte { return b[:len(b)/2] }
	garbage, gsize := snapStream(append(streamItems(3), []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF}))
	huge, hsize := snapStream([][]byte{append(items[0], make([]byte, 2<<10)...)})
	cases := []struct {
		name   string
		d      snapDesc
		stream []byte
		damage func([]byte) []byte
		want   string
	}{
		{"bad checksum", desc, good, flip(-1), "checksum"},
		{"flipped byte in an item", desc, good, flip(5), "checksum"}, // its time: still decodes
		{"garbage item", snapDesc{items: 4, bytes: gsize}, garbage, nil, "item 3"},
		{"item over the message limit", snapDesc{items: 1, bytes: hsize}, huge, nil, "more than"},
		{"more bytes than the descriptor", snapDesc{items: desc.items, bytes: size - 1}, good, nil, "beyond"},
		{"cut off", desc, good, cut, "item"},
		{"fewer items than the descriptor", snapDesc{items: desc.items + 1, bytes: size + 100}, good, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := receiveFrom(t, dir, c.d, c.stream, c.damage)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if files := recvFiles(t, dir); len(files) != 0 {
				t.Fatalf("refused stream left %v", files)
			}
		})
	}
}

// A descriptor without its items, or a local descriptor from a peer, never
// reaches raft.
func TestSnapshotDescriptorsFromPeersRefused(t *testing.T) {
	mem := newMembership()
	desc := appendSnapDesc(nil, snapDescVersion, snapDesc{items: 1, bytes: 10, mem: mem.encode()})
	m := raftpb.Message{Type: raftpb.MsgSnap, Snapshot: &raftpb.Snapshot{Data: desc}}
	if err := checkSnapMessage(&m); err == nil {
		t.Fatal("a descriptor without items was accepted")
	}
	local := appendSnapDesc(nil, snapLocalVersion, snapDesc{items: 1, bytes: 10, mem: mem.encode(), path: filepath.Join(t.TempDir(), "none")})
	m.Snapshot.Data = local
	if err := checkSnapMessage(&m); err == nil {
		t.Fatal("a local descriptor naming a missing file was accepted")
	}

	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t)}
	var in1, in2 inbox
	t1 := startTransport(t, 1, peers, "s3cret-s3cret", &in1, nil)
	startTransport(t, 2, peers, "s3cret-s3cret", &in2, nil)
	t1.Send([]raftpb.Message{{Type: raftpb.MsgSnap, From: 1, To: 2, Term: 3, Snapshot: &raftpb.Snapshot{Data: local}}})
	t1.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 3}})
	// The connection carrying the local descriptor is dropped; the
	// sender redials and later messages arrive.
	waitFor(t, "a later message", func() bool {
		t1.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 3}})
		return in2.count() > 0
	})
	in2.mu.Lock()
	defer in2.mu.Unlock()
	for _, m := range in2.msgs {
		if m.Type == raftpb.MsgSnap {
			t.Fatal("a local snapshot descriptor from a peer was delivered")
		}
	}
}

// Received snapshot files a crash left behind are removed when the
// transport starts.
func TestTransportRemovesLeftoverSnapshotFiles(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, "raft-snapshot-123.recv")
	other := filepath.Join(dir, "keep.txt")
	for _, f := range []string{left, other} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := NewTransport(TransportConfig{ID: 1, Peers: map[uint64]string{1: "127.0.0.1:0"}, Secret: []byte("s3cret-s3cret"), Deliver: func(raftpb.Message) {}, SnapshotDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("leftover snapshot file: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another file was removed: %v", err)
	}
}

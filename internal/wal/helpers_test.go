package wal

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

type rec struct {
	pos  Position
	body []byte
}

// body returns a deterministic record whose content identifies i, so a
// record delivered at the wrong position or with wrong bytes is caught.
func body(i, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(i), uint64(size)))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	copy(b, fmt.Sprintf("rec-%d-", i))
	return b
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func replayAll(t testing.TB, l *Log, from Position) ([]rec, RecoveryReport, error) {
	t.Helper()
	var got []rec
	rep, err := l.Replay(from, func(pos Position, b []byte) error {
		got = append(got, rec{pos, bytes.Clone(b)})
		return nil
	})
	return got, rep, err
}

// openReplay opens dir, replays everything and fails the test on error.
func openReplay(t testing.TB, dir string, opts Options) (*Log, []rec, RecoveryReport) {
	t.Helper()
	l := mustOpen(t, dir, opts)
	got, rep, err := replayAll(t, l, Position{})
	if err != nil {
		l.Close()
		t.Fatalf("Replay: %v", err)
	}
	return l, got, rep
}

func mustAppend(t testing.TB, l *Log, b []byte) Position {
	t.Helper()
	pos, err := l.Append(b)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return pos
}

func mustCommit(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func sameRecs(t testing.TB, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].pos != want[i].pos || !bytes.Equal(got[i].body, want[i].body) {
			t.Fatalf("record %d: got pos %v (%d bytes), want pos %v (%d bytes)", i, got[i].pos, len(got[i].body), want[i].pos, len(want[i].body))
		}
	}
}

// copyDir copies the segment files of src into a fresh directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func segPath(dir string, n uint32) string { return filepath.Join(dir, segmentName(n)) }

// writeLog creates a log in dir with the given record sizes, committing
// after every `per` records, and returns what it wrote.
func writeLog(t testing.TB, dir string, opts Options, sizes []int, per int) []rec {
	t.Helper()
	l, _, _ := openReplay(t, dir, opts)
	var want []rec
	for i, n := range sizes {
		b := body(i, n)
		want = append(want, rec{mustAppend(t, l, b), b})
		if (i+1)%per == 0 {
			mustCommit(t, l)
		}
	}
	mustCommit(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

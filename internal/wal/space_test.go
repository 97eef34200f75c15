package wal

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// lockedBuffer collects log output from any goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A disk with room for a small segment but not a full-size one: writes go
// on in a segment sized for what fits, not refused until a whole segment
// would fit.
func TestNoSpaceForFullSegmentStillWrites(t *testing.T) {
	dir := t.TempDir()
	limit := int64(4096)
	opts := Options{SegmentSize: 1 << 20, Preallocate: func(f *os.File, size int64) error {
		if size > limit {
			return syscall.ENOSPC
		}
		return fallocateFile(f, size)
	}}
	l, _, _ := openReplay(t, dir, opts)
	l.noPrepare = true
	b := body(1, 1000)
	pos, err := l.Append(b)
	if err != nil {
		t.Fatalf("Append with room for the record but not a full segment: %v", err)
	}
	mustCommit(t, l)
	if got, err := l.ReadFrame(pos); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("ReadFrame: %v", err)
	}
	if err := l.NoSpace(); err != nil {
		t.Fatalf("NoSpace: %v", err)
	}
	l.Close()
}

// Writes refused for a full disk: NoSpace reports it, one log line when
// writes stop (however many appends are refused), one when they resume,
// which NoSpace notices from the free space alone.
func TestNoSpaceReportedAndResumes(t *testing.T) {
	dir := t.TempDir()
	var logs lockedBuffer
	full := true
	var free int64
	opts := Options{SegmentSize: 1024, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Preallocate: func(f *os.File, size int64) error {
			if full {
				return syscall.ENOSPC
			}
			return fallocateFile(f, size)
		},
		FreeSpace: func(string) (int64, error) { return free, nil },
	}
	l := mustOpen(t, dir, opts)
	if _, _, err := replayAll(t, l, Position{}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.noPrepare = true
	l.spaceProbeEvery = 0
	for i := 0; i < 3; i++ {
		if _, err := l.Append(body(i, 300)); !errors.Is(err, ErrNoSpace) {
			t.Fatalf("append %d on a full disk: %v", i, err)
		}
	}
	err := l.NoSpace()
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "3 so far") {
		t.Fatalf("NoSpace: %v", err)
	}
	if n := strings.Count(logs.String(), "disk full"); n != 1 {
		t.Fatalf("%d 'disk full' lines:\n%s", n, logs.String())
	}
	free = 100 // not enough for the next segment
	if l.NoSpace() == nil {
		t.Fatal("NoSpace cleared with too little free space")
	}
	full, free = false, 1<<20
	if err := l.NoSpace(); err != nil {
		t.Fatalf("NoSpace after space came back: %v", err)
	}
	if _, err := l.Append(body(9, 300)); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, l)
	if n := strings.Count(logs.String(), "writes resume"); n != 1 {
		t.Fatalf("%d 'writes resume' lines:\n%s", n, logs.String())
	}
}

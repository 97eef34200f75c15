package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"
)

// Under SyncInterval a background goroutine bounds how much acknowledged
// data a power failure can take: every interval it fdatasyncs what the loop
// wrote since the last round. It never touches the batch buffers, only
// descriptors, and holds syncMu so a segment roll cannot close the
// descriptor under it.

func (l *Log) startSyncer() {
	if l.opts.Sync != SyncInterval {
		return
	}
	l.syncStop = make(chan struct{})
	l.syncDone = make(chan struct{})
	go func() {
		defer close(l.syncDone)
		t := time.NewTicker(l.opts.SyncInterval)
		defer t.Stop()
		for {
			select {
			case <-l.syncStop:
				return
			case <-t.C:
				l.backgroundSync()
			}
		}
	}()
}

func (l *Log) stopSyncer() {
	if l.syncStop == nil {
		return
	}
	close(l.syncStop)
	<-l.syncDone
	l.syncStop = nil
}

func (l *Log) backgroundSync() {
	if l.Failed() != nil {
		return
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.syncUnsyncedLocked(); err != nil {
		l.fail(err)
		return
	}
	if l.syncFile == nil || !l.dirty.Swap(false) {
		return
	}
	if err := fdatasync(l.syncFile); err != nil {
		l.fail(fmt.Errorf("background fdatasync %s: %w", l.syncFile.Name(), err))
	}
}

// syncUnsyncedLocked flushes sealed segments, oldest first (they precede
// the active one in the log). l.syncMu must be held.
func (l *Log) syncUnsyncedLocked() error {
	for len(l.unsynced) > 0 {
		path := filepath.Join(l.dir, segmentName(l.unsynced[0]))
		if err := syncPath(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("fdatasync sealed segment %s: %w", path, err)
		}
		l.unsynced = l.unsynced[1:]
	}
	return nil
}

package wal

import "fmt"

// Pipelined group commit: the loop goroutine writes each batch with Flush
// and goes on deciding the next batch, while another goroutine calls
// SyncWritten; whoever waits for a batch is answered after the first
// SyncWritten that started after the batch's Flush returned. The disk's
// sync latency then overlaps the loop's work instead of stalling it.

// Flush writes everything buffered since the last Flush or Commit without
// syncing it, whatever the policy. Owned by the loop goroutine, like Append.
func (l *Log) Flush() error {
	if err := l.writable(); err != nil {
		return err
	}
	return l.flush(false)
}

// SyncWritten makes durable everything a completed Flush or Commit wrote:
// sealed segments first, then the active one. It is safe to call from any
// goroutine, concurrently with Append and Flush. A failure fails the log
// for good; it is never retried.
func (l *Log) SyncWritten() error {
	if err := l.Failed(); err != nil {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.syncUnsyncedLocked(); err != nil {
		return l.fail(err)
	}
	// Clear the mark before syncing: a write landing during the sync sets
	// it again and the next call covers it.
	if l.syncFile == nil || !l.dirty.Swap(false) {
		return nil
	}
	if err := fdatasync(l.syncFile); err != nil {
		return l.fail(fmt.Errorf("fdatasync %s: %w", l.syncFile.Name(), err))
	}
	return nil
}

package wal

import (
	"errors"
	"fmt"
	"time"
)

// A full disk refuses only segment creation: frames go into preallocated
// space, so while the active segment has room, appends go on. When a new
// segment of the configured size does not fit, the log asks for smaller
// ones, halving down to exactly what the next frame needs, so writes go on
// (in smaller segments) as long as the next record fits at all, and resume
// as soon as it does again. The state is reported by NoSpace (readiness)
// and logged once when writes stop and once when they resume.

// noSpaceProbeEvery bounds how often NoSpace asks the filesystem whether
// space came back.
const noSpaceProbeEvery = time.Second

// createFitting creates the next segment, as large as the configured size
// if the disk allows, else the largest halving of it that still holds a
// frame of need bytes.
func (l *Log) createFitting(need int64) (*writeSeg, error) {
	minCap := HeaderSize + need
	capacity := max(l.opts.SegmentSize, minCap)
	for {
		seg, err := l.createSegment(l.nextNum, capacity, false)
		if err == nil || !isNoSpaceErr(err) || capacity == minCap {
			return seg, err
		}
		capacity = max(capacity/2, minCap)
	}
}

func isNoSpaceErr(err error) bool { return err != nil && errors.Is(err, ErrNoSpace) }

// noteNoSpace records that an append was refused for space.
func (l *Log) noteNoSpace(need int64, err error) {
	l.spaceMu.Lock()
	defer l.spaceMu.Unlock()
	l.noSpaceCount++
	l.noSpaceNeed = need
	l.noSpaceErr = err
	if !l.noSpaceSince.IsZero() {
		return
	}
	l.noSpaceSince = time.Now()
	l.noSpaceProbe = l.noSpaceSince
	l.log.Error("wal: disk full: writes are refused until a segment holding the next record fits (no restart needed: they go on once space is freed)",
		"dir", l.dir, "need_bytes", need, "err", err)
}

// noteSpace records that a segment could be created.
func (l *Log) noteSpace() {
	l.spaceMu.Lock()
	defer l.spaceMu.Unlock()
	l.resumeLocked("a new segment was created")
}

func (l *Log) resumeLocked(why string) {
	if l.noSpaceSince.IsZero() {
		return
	}
	l.log.Info("wal: disk space available again: writes resume", "dir", l.dir, "why", why,
		"refused_for", time.Since(l.noSpaceSince).Round(time.Millisecond).String(), "refused_appends", l.noSpaceCount)
	l.noSpaceSince, l.noSpaceCount, l.noSpaceErr = time.Time{}, 0, nil
}

// NoSpace returns nil, or an error saying that writes are being refused
// because the disk is full, since when and how much the next segment
// needs. While refused, it checks the free space at most once a second and
// reports the end of the condition as soon as the next record would fit,
// so a readiness probe recovers without waiting for a write to try. Safe
// for concurrent use.
func (l *Log) NoSpace() error {
	l.spaceMu.Lock()
	defer l.spaceMu.Unlock()
	if l.noSpaceSince.IsZero() {
		return nil
	}
	if now := time.Now(); now.Sub(l.noSpaceProbe) >= l.spaceProbeEvery {
		l.noSpaceProbe = now
		if free, err := l.free(); err == nil && free >= l.noSpaceNeed {
			l.resumeLocked(fmt.Sprintf("%d bytes free, the next segment needs %d", free, l.noSpaceNeed))
			return nil
		}
	}
	return fmt.Errorf("disk full since %s: writes refused (%d so far); the next segment needs %d bytes in %s: %w",
		l.noSpaceSince.UTC().Format(time.RFC3339), l.noSpaceCount, l.noSpaceNeed, l.dir, ErrNoSpace)
}

package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// StateHash is a digest of everything the engine holds that replication
// must reproduce: counters, namespaces and their configurations, tokens,
// queues with their configurations and pause state, idempotency keys,
// durable channel histories and positions, and every job's whole image
// with its payload and result bytes (read through read, since the engine
// holds only references into the log, and two replicas' logs place the
// same bytes at different offsets).
//
// It is the hash of the sorted encodings of the records a snapshot would
// write, with blobs inlined and the only clock-dependent field (the time
// stamped on a channel's position record) cleared, so two engines that
// applied the same entries hash equal whatever order their maps iterate
// in. It covers the state as of the engine's time: a reservation that
// expired by itself shows, so replicas are compared at the same applied
// entry (whose time they share), not at whatever time each reached.
func (e *Engine) StateHash(read func(BlobRef) ([]byte, error)) ([32]byte, error) {
	var recs [][]byte
	it := e.Snapshot()
	for ent := it.Next(1024); ent != nil; ent = it.Next(1024) {
		for i := range ent.Records {
			r := ent.Records[i]
			switch r.Kind {
			case KindLoadHints:
				continue // table sizes for a loader (loadhints.go), not state
			case KindJob:
				for _, b := range []*Blob{&r.Job.Payload, &r.Job.Result} {
					if !b.has {
						continue
					}
					data := b.Data
					if data == nil && b.Ref.Len > 0 {
						var err error
						if data, err = read(b.Ref); err != nil {
							return [32]byte{}, fmt.Errorf("engine: state hash: job %s: read blob %d:%d+%d: %w", r.Job.ID, b.Ref.Segment, b.Ref.Offset, b.Ref.Len, err)
						}
					}
					*b = inlineBlob(append([]byte{}, data...))
				}
			case KindPublication:
				if !r.Pub.HasData {
					r.Pub.Time = 0
				}
			}
			recs = append(recs, encodeRecord(nil, 0, &r))
		}
	}
	slices.SortFunc(recs, bytes.Compare)
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, b := range recs {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}

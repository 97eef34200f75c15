package broker

import (
	"context"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// The methods below serve the lmstfy-compatible API (internal/api/lmstfy).
// Each is a compound operation that must see one engine state, so it runs
// as a single function on the loop; like every broker method, it is durable
// before it returns.

// RemoveJob deletes a job whatever its state, as lmstfy's DELETE does: a
// reservation is acked by id alone, any other job is cancelled. A job, queue
// or namespace that does not exist is not an error, because lmstfy's delete
// is idempotent and clients retry it.
func (b *Broker) RemoveJob(ctx context.Context, ns, q, id string) error {
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) {
		if err := b.far.bring(now, ns, q, id); err != nil {
			return struct{}{}, err
		}
		_, err := b.eng.Ack(now, ns, q, id, engine.AckRequest{AnyReceipt: true})
		if engine.CodeOf(err) == engine.CodeConflict {
			err = b.eng.Cancel(now, ns, q, id, "")
		}
		if isGone(err) {
			err = nil
		}
		return struct{}{}, err
	})
	return err
}

// ReplaceJob puts req into q and deletes the job old (lmstfy's republish),
// answering the new job's id. A reserved old job is acked with the new job
// as its next, so both happen or neither. Otherwise the new job goes in
// first and the old one is cancelled after: a rejected put then leaves the
// old job where it was instead of losing it.
func (b *Broker) ReplaceJob(ctx context.Context, ns, q, old string, req engine.PutRequest) (string, error) {
	return call(b, ctx, func(now time.Time) (string, error) {
		if err := b.far.bring(now, ns, q, old); err != nil {
			return "", err
		}
		res, err := b.eng.Ack(now, ns, q, old, engine.AckRequest{AnyReceipt: true, Next: &engine.NextPut{Queue: q, Put: req}})
		if err == nil {
			return res.NextID, nil
		}
		if c := engine.CodeOf(err); c != engine.CodeConflict && c != engine.CodeJobNotFound && c != engine.CodeQueueNotFound {
			return "", err
		}
		put, err := b.eng.Put(now, ns, q, req)
		if err != nil {
			return "", err
		}
		if err := b.eng.Cancel(now, ns, q, old, ""); err != nil && !isGone(err) {
			// The old job was reserved by someone else in between; the
			// new job stays, as lmstfy would leave both.
			b.lg.Debug("lmstfy republish: old job not deleted", "ns", ns, "queue", q, "id", old, "err", err)
		}
		return put.ID, nil
	})
}

// PurgeDeadOldest deletes up to n (at most engine.MaxListLimit) of the
// oldest dead jobs of a queue and answers how many it deleted.
func (b *Broker) PurgeDeadOldest(ctx context.Context, ns, q string, n int) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) {
		res, err := b.eng.List(now, ns, q, engine.ListRequest{Filter: engine.Filter{States: []engine.State{engine.StateDead}}, Limit: n})
		if err != nil {
			return 0, err
		}
		for i, j := range res.Jobs {
			if err := b.eng.Cancel(now, ns, q, j.ID, ""); err != nil {
				return i, err
			}
		}
		return len(res.Jobs), nil
	})
}

// CreateTokenWithValue stores a namespace token the caller chose (lmstfy
// lets the admin pick one); only its hash is kept. A token that exists
// already, in any namespace, is refused with a conflict: the hash alone
// names the namespace, so one value cannot serve two.
func (b *Broker) CreateTokenWithValue(ctx context.Context, ns, tok, desc string) error {
	h := hashToken(tok)
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) {
		if _, ok := b.eng.TokenNamespace(h); ok {
			return struct{}{}, &engine.Error{Code: engine.CodeConflict, Message: "token already exists"}
		}
		err := b.eng.AddToken(now, ns, h, desc)
		b.refreshTokens()
		return struct{}{}, err
	})
	return err
}

// TokenHashes lists the tokens of ns as SHA-256 hex hash → description.
// Plaintext tokens are never stored, so the hash is all there is to show.
func (b *Broker) TokenHashes(ctx context.Context, ns string) (map[string]string, error) {
	return call(b, ctx, func(time.Time) (map[string]string, error) {
		out := map[string]string{}
		// The engine hands out descriptions only through the snapshot walk,
		// whose first chunk is all the metadata and no job.
		it := b.eng.Snapshot()
		defer it.Close()
		if ent := it.Next(1); ent != nil {
			for i := range ent.Records {
				if r := &ent.Records[i]; r.Kind == engine.KindToken && r.NS == ns {
					out[r.TokenHash] = r.TokenDesc
				}
			}
		}
		return out, nil
	})
}

// RevokeTokenHash forgets the token of ns whose hash TokenHashes listed, so
// an admin can revoke a token nobody wrote down.
func (b *Broker) RevokeTokenHash(ctx context.Context, ns, hash string) error {
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) {
		err := b.eng.RevokeToken(now, ns, hash)
		b.refreshTokens()
		return struct{}{}, err
	})
	return err
}

func isGone(err error) bool {
	switch engine.CodeOf(err) {
	case engine.CodeJobNotFound, engine.CodeQueueNotFound, engine.CodeNamespaceNotFound:
		return true
	}
	return false
}

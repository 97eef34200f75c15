package httpkit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/chronoq/chronoq/internal/engine"
)

// DefaultBodyBudget is the least memory all request bodies being read at
// once may hold, across the listeners that share a budget.
const DefaultBodyBudget = 256 << 20

// BodyBudgetFor is the default budget for listeners whose largest body is
// maxBody: DefaultBodyBudget, or room for four such bodies when that is
// more, so one large body never waits for small ones to finish.
func BodyBudgetFor(maxBody int64) int64 { return max(DefaultBodyBudget, 4*maxBody) }

// bodyChunk is how much a body of unknown length reserves at a time.
const bodyChunk = 64 << 10

// BodyBudget bounds the bytes of request bodies held in memory at once.
// Each listener caps one body; without a global cap, many concurrent large
// bodies still add up to gigabytes. A request over the budget fails with an
// engine.CodeUnavailable error (503 with Retry-After in every protocol).
type BodyBudget struct {
	limit int64

	mu   sync.Mutex
	used int64
}

// NewBodyBudget allows limit bytes of bodies in flight (≤ 0: the default).
func NewBodyBudget(limit int64) *BodyBudget {
	if limit <= 0 {
		limit = DefaultBodyBudget
	}
	return &BodyBudget{limit: limit}
}

// InUse is the number of bytes reserved right now.
func (b *BodyBudget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *BodyBudget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *BodyBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// ErrBodyBudget is the error of a body read refused for lack of budget.
var ErrBodyBudget = &engine.Error{Code: engine.CodeUnavailable,
	Message: "the server is reading too many request bodies at once; retry shortly"}

// Wrap makes next's request bodies draw on the budget as they are read:
// the declared Content-Length (up to maxBody+1, what a size check reads)
// at the first read, or 64 KiB at a time for a body of unknown length. The
// bytes stay reserved until next returns, since a handler keeps what it
// read until then.
func (b *BodyBudget) Wrap(maxBody int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		br := &budgetReader{b: b, rc: r.Body, declared: r.ContentLength, max: maxBody + 1}
		defer br.done()
		r.Body = br
		next.ServeHTTP(w, r)
	})
}

type budgetReader struct {
	b        *BodyBudget
	rc       io.ReadCloser
	declared int64 // Content-Length, -1 unknown
	max      int64
	mu       sync.Mutex
	held     int64 // reserved
	read     int64
	err      error
}

func (br *budgetReader) Read(p []byte) (int, error) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if br.err != nil {
		return 0, br.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if br.read >= br.held && br.declared > 0 && br.held >= br.declared {
		// All declared bytes are in: the next read normally only sees EOF,
		// so it gets no reservation ahead of what it returns.
		n, err := br.rc.Read(p[:1])
		if n > 0 {
			if !br.b.acquire(1) {
				br.err = fmt.Errorf("request body: %w", ErrBodyBudget)
				return 0, br.err
			}
			br.held++
			br.read++
		}
		return n, err
	}
	if br.read >= br.held {
		want := int64(bodyChunk)
		if br.held == 0 && br.declared > 0 {
			want = br.declared
		}
		want = min(want, max(br.max-br.held, 1))
		if !br.b.acquire(want) {
			br.err = fmt.Errorf("request body: %w", ErrBodyBudget)
			return 0, br.err
		}
		br.held += want
	}
	if room := br.held - br.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := br.rc.Read(p)
	br.read += int64(n)
	return n, err
}

func (br *budgetReader) Close() error { return br.rc.Close() }

func (br *budgetReader) done() {
	br.mu.Lock()
	defer br.mu.Unlock()
	br.b.release(br.held)
	br.held = 0
	br.err = errReadAfterHandler
}

// errReadAfterHandler is made once: done runs on every request with a body.
var errReadAfterHandler = errors.New("request body: read after the handler returned")

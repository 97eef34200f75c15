package httpapi

import (
	"context"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// Backend is everything the HTTP API needs from the server. The broker
// implements it; every method returns engine errors (*engine.Error) for
// rejected input, or errors wrapping ErrUnavailable (or an engine error with
// CodeUnavailable) when the server cannot accept writes (answered 503 with Retry-After).
//
// Jobs come back with Data (and ResultData) filled with their bytes.
type Backend interface {
	// Namespaces and tokens (admin listener).
	CreateNamespace(ctx context.Context, name string, cfg engine.NamespaceConfig) (info engine.NamespaceInfo, created bool, err error)
	ListNamespaces(ctx context.Context) ([]engine.NamespaceInfo, error)
	// ConfigureNamespace creates or reconfigures a namespace atomically:
	// update gets the current configuration (the defaults when it does
	// not exist) and answers the new one.
	ConfigureNamespace(ctx context.Context, name string, update func(cur engine.NamespaceConfig) (engine.NamespaceConfig, error)) (info engine.NamespaceInfo, created bool, err error)
	CreateToken(ctx context.Context, ns, description string) (token string, err error)
	RevokeToken(ctx context.Context, ns, token string) error
	// TokenNamespace returns the namespace a token belongs to, ok=false for
	// an unknown token. HasTokens says whether any namespace token exists.
	TokenNamespace(token string) (ns string, ok bool)
	HasTokens() bool

	// Queues.
	PutQueue(ctx context.Context, ns, q string, patch engine.QueuePatch) (info engine.QueueInfo, created bool, err error)
	GetQueue(ctx context.Context, ns, q string) (engine.QueueInfo, error)
	// QueuePage answers one page of a namespace's queues in name order.
	QueuePage(ctx context.Context, ns string, req engine.QueueListRequest) (engine.QueueList, error)
	SetPaused(ctx context.Context, ns, q string, paused bool) (engine.QueueInfo, error)
	PurgeQueue(ctx context.Context, ns, q string) (deleted int, err error)
	DeleteQueue(ctx context.Context, ns, q string) error

	// Jobs.
	Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error)
	PutBatch(ctx context.Context, ns, q string, reqs []engine.PutRequest) ([]engine.PutResult, error)
	// Take waits up to wait for at least one job (0 = answer at once); a
	// cancelled ctx or server shutdown ends the wait with no jobs and no error.
	Take(ctx context.Context, ns string, req engine.TakeRequest, wait time.Duration) ([]engine.Job, error)
	Ack(ctx context.Context, ns, q, id string, req engine.AckRequest) (engine.AckResult, error)
	// AckAndTake acks, then takes like Take (waiting up to wait); the ack
	// stands whatever the take finds.
	AckAndTake(ctx context.Context, ns, q, id string, req engine.AckRequest, take engine.TakeRequest, wait time.Duration) (engine.AckResult, []engine.Job, error)
	// AckBatch acks many reservations of one queue, all or none.
	AckBatch(ctx context.Context, ns, q string, items []engine.AckItem) ([]engine.AckResult, error)
	Nack(ctx context.Context, ns, q, id string, req engine.NackRequest) (engine.State, error)
	Touch(ctx context.Context, ns, q, id string, req engine.TouchRequest) (reservedUntil time.Time, err error)
	Bury(ctx context.Context, ns, q, id string, req engine.BuryRequest) error
	Peek(ctx context.Context, ns, q, id string) (engine.Job, error)
	List(ctx context.Context, ns, q string, req engine.ListRequest) (engine.ListResult, error)
	Update(ctx context.Context, ns, q, id string, req engine.UpdateRequest) (engine.Job, error)
	Cancel(ctx context.Context, ns, q, id, receipt string) error
	// CancelByFilter cancels in one queue, or in every queue of ns when q is "".
	CancelByFilter(ctx context.Context, ns, q string, f engine.Filter) (deleted int, err error)
	Respawn(ctx context.Context, ns, q string, req engine.RespawnRequest) (respawned int, err error)
	PurgeDead(ctx context.Context, ns, q string) (deleted int, err error)
	// Result waits up to wait for the job to complete; done is false when
	// the wait ended first (info.State is then the current state).
	Result(ctx context.Context, ns, q, id string, wait time.Duration) (info engine.ResultInfo, done bool, err error)
	// Call puts a job and waits for its result like Result does.
	Call(ctx context.Context, ns, q string, req engine.PutRequest, wait time.Duration) (info engine.ResultInfo, done bool, err error)

	// Channels.
	Publish(ctx context.Context, ns, ch string, data []byte) (offset uint64, epoch string, err error)
	// History with wait > 0 long-polls: when nothing after since is there
	// yet (and the position is valid), it waits up to wait for the next
	// publication.
	History(ctx context.Context, ns, ch string, since uint64, epoch string, limit int, wait time.Duration) (pubsub.HistoryResult, error)

	// Health.
	Ready() error // nil once recovery is done and the log is writable
}

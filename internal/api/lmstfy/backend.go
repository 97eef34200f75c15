package lmstfy

import (
	"context"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Backend is what the lmstfy API needs from the server; *broker.Broker
// implements it. Rejected input comes back as *engine.Error, an unwritable
// log as an engine error with CodeUnavailable. Jobs come back with Data
// filled.
type Backend interface {
	// Namespaces and tokens.
	CreateNamespace(ctx context.Context, name string, cfg engine.NamespaceConfig) (info engine.NamespaceInfo, created bool, err error)
	ListNamespaces(ctx context.Context) ([]engine.NamespaceInfo, error)
	CreateToken(ctx context.Context, ns, description string) (token string, err error)
	CreateTokenWithValue(ctx context.Context, ns, token, description string) error
	RevokeToken(ctx context.Context, ns, token string) error
	RevokeTokenHash(ctx context.Context, ns, hash string) error
	TokenHashes(ctx context.Context, ns string) (map[string]string, error)
	TokenNamespace(token string) (ns string, ok bool)
	HasTokens() bool

	// Queues.
	GetQueue(ctx context.Context, ns, q string) (engine.QueueInfo, error)
	ListQueues(ctx context.Context, ns string) ([]engine.QueueInfo, error)
	DeleteQueue(ctx context.Context, ns, q string) error

	// Jobs.
	Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error)
	PutBatch(ctx context.Context, ns, q string, reqs []engine.PutRequest) ([]engine.PutResult, error)
	ReplaceJob(ctx context.Context, ns, q, old string, req engine.PutRequest) (newID string, err error)
	Take(ctx context.Context, ns string, req engine.TakeRequest, wait time.Duration) ([]engine.Job, error)
	RemoveJob(ctx context.Context, ns, q, id string) error
	Peek(ctx context.Context, ns, q, id string) (engine.Job, error)
	List(ctx context.Context, ns, q string, req engine.ListRequest) (engine.ListResult, error)
	Respawn(ctx context.Context, ns, q string, req engine.RespawnRequest) (respawned int, err error)
	PurgeDead(ctx context.Context, ns, q string) (deleted int, err error)
	PurgeDeadOldest(ctx context.Context, ns, q string, n int) (deleted int, err error)
}

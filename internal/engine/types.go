package engine

import "time"

// State is the state of one job. Exactly one applies at any moment; the
// time-derived ones (delayed→ready, reservation expiry) are computed from
// timestamps when a call arrives, never by a timer.
type State uint8

const (
	StateNone State = iota
	StateDelayed
	StateReady
	StateBlocked
	StateReserved
	StateDead
	StateCompleted
	// StateGone is not a job state: it answers a duplicate put whose
	// original job no longer exists.
	StateGone
)

var stateNames = [...]string{"", "delayed", "ready", "blocked", "reserved", "dead", "completed", "deleted"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// ParseState maps an API state name to a State; ok is false for unknown names.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames[:StateGone] {
		if i > 0 && n == s {
			return State(i), true
		}
	}
	return StateNone, false
}

// KeyMode selects the per-key ordering discipline of a queue (docs/api.md, key_mode; place.go).
type KeyMode uint8

const (
	KeyStrict    KeyMode = iota // only the oldest job of a key may go, a failing head holds the key
	KeyExclusive                // at most one job per key in flight, any ripe one may go next
)

func (m KeyMode) String() string {
	if m == KeyExclusive {
		return "exclusive"
	}
	return "strict"
}

// BlobRef says where a blob (payload or result) lives in the log: the
// segment, the byte offset of its first byte in that segment file, and its
// length. The engine never holds payload bytes, only these references.
type BlobRef struct {
	Segment uint32
	Offset  uint32
	Len     uint32
}

// Backoff is the retry delay policy of a queue for nacks without a delay:
// initial × multiplier^(attempt−1), capped at Max, times a random factor in
// [1−Jitter, 1+Jitter].
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	Jitter     float64
}

// QueueConfig is a queue's configuration, as in docs/api.md's PUT queue body.
type QueueConfig struct {
	DefaultTTR      time.Duration
	DefaultTries    uint32
	DefaultTTL      time.Duration
	DefaultPriority uint32
	MaxJobs         uint64
	MaxPayload      uint32
	DedupWindow     time.Duration
	RetainResults   time.Duration
	Backoff         Backoff
	KeyMode         KeyMode
}

// DefaultQueueConfig is what an auto-created queue gets (docs/api.md, PUT queue: the defaults).
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{
		DefaultTTR:      30 * time.Second,
		DefaultTries:    25,
		DefaultPriority: 1024,
		MaxPayload:      1 << 20,
		DedupWindow:     15 * time.Minute,
		Backoff:         Backoff{Initial: time.Second, Max: 10 * time.Minute, Multiplier: 2, Jitter: 0.1},
	}
}

// QueuePatch is a partial queue configuration: nil fields keep their value.
type QueuePatch struct {
	DefaultTTR      *time.Duration
	DefaultTries    *uint32
	DefaultTTL      *time.Duration
	DefaultPriority *uint32
	MaxJobs         *uint64
	MaxPayload      *uint32
	DedupWindow     *time.Duration
	RetainResults   *time.Duration
	BackoffInitial  *time.Duration
	BackoffMax      *time.Duration
	BackoffMult     *float64
	BackoffJitter   *float64
	KeyMode         *KeyMode
}

// Counts holds the number of jobs of a queue per state.
type Counts struct {
	Delayed, Ready, Blocked, Reserved, Dead, Completed uint64
}

// Total is the number of jobs the queue holds in any state.
func (c Counts) Total() uint64 {
	return c.Delayed + c.Ready + c.Blocked + c.Reserved + c.Dead + c.Completed
}

// QueueStats counts what happened in a queue since the process started.
type QueueStats struct {
	Put, Taken, Acked, Nacked, Dead, Expired, Cancelled uint64
}

// QueueInfo is the queue object of the API.
type QueueInfo struct {
	Stats          QueueStats
	Namespace      string
	Name           string
	Config         QueueConfig
	Paused         bool
	PausedUntil    time.Time // zero: paused until resumed (or not paused)
	Counts         Counts
	OldestReadyAge time.Duration
	CreatedAt      time.Time
}

// NamespaceConfig is a namespace's configuration.
type NamespaceConfig struct {
	AutoCreateQueues bool
	Channels         ChannelHistory
}

// ChannelHistory is the history policy of a namespace's channels. Zero
// values mean the server's defaults (the hub's: 1000 publications, 10
// minutes). Durable history goes through the log like jobs do, so it
// survives a restart with the same epoch; memory-only history gets a new
// epoch on restart, which tells subscribers to reload.
type ChannelHistory struct {
	Size    int           // publications kept per channel; negative: none
	TTL     time.Duration // how long one is kept; negative: until pushed out
	Durable bool
}

// Channel history bounds a namespace may ask for, and the defaults of a
// namespace that sets none: enough to bridge a deploy's reconnect storm or
// a phone switching networks, small enough that an idle channel costs
// little.
const (
	MaxChannelHistory  = 100_000
	MaxChannelNameLen  = 256
	DefaultHistorySize = 1000
	DefaultHistoryTTL  = 10 * time.Minute
)

// NamespaceInfo describes one namespace.
type NamespaceInfo struct {
	Name   string
	Config NamespaceConfig
}

// PutRequest is one job to enqueue. Optional fields are nil when absent; the
// queue's defaults fill them.
type PutRequest struct {
	Payload        []byte // the bytes to store (JSON text when PayloadJSON)
	PayloadJSON    bool   // answered as "payload" (JSON) instead of "payload_base64"
	ID             string // client-chosen id; empty = server ULID
	Delay          *time.Duration
	At             *time.Time
	Priority       *uint32
	TTL            *time.Duration
	TTR            *time.Duration
	Tries          *uint32
	Key            string
	Tags           map[string]string
	ReplyTo        string
	Cron           string
	IdempotencyKey string
	// Notify names a channel of the job's namespace that gets the job's
	// lifecycle events (JobEvent).
	Notify string
	// RetainResult keeps the job as completed with its result for at least
	// this long after ack, even in a non-retaining queue (used by call).
	RetainResult time.Duration
}

// PutResult is the answer to one put.
type PutResult struct {
	ID         string
	Seq        uint64
	State      State
	ActivateAt time.Time
	Duplicate  bool
}

// TakeRequest reserves up to Max ready jobs from Queues, tried in order.
type TakeRequest struct {
	Queues []string
	Max    int            // 1..1000; 0 means 1
	TTR    *time.Duration // overrides the job's TTR for this reservation
}

// Job is a consistent copy of one job, as peek, list and take answer it.
type Job struct {
	ID            string
	Seq           uint64
	Namespace     string
	Queue         string
	State         State
	Payload       BlobRef
	PayloadJSON   bool
	Priority      uint32
	Key           string
	Tags          map[string]string
	CreatedAt     time.Time
	ActivateAt    time.Time
	ExpireAt      time.Time // zero: no TTL
	TTR           time.Duration
	Tries         uint32
	Attempt       uint32
	Receipt       string    // only in take answers
	ReservedUntil time.Time // only while reserved
	LastError     string
	ReplyTo       string
	Cron          string
	Notify        string
	HasResult     bool // completed with a retained result (which may be JSON null)
	Result        BlobRef
	ResultJSON    bool
	// Buried is true for a dead job that got there by bury rather than by
	// running out of tries (beanstalkd distinguishes the two).
	Buried bool
	// beanstalkd's stats-job counters (reserves is Attempt)
	Timeouts, Releases, Buries, Kicks uint32

	// Data and ResultData are the payload and result bytes. The engine
	// leaves them nil (it only holds references); the broker fills them
	// from the log before a job leaves the server.
	Data       []byte
	ResultData []byte
}

// NextPut is the job put atomically with an ack.
type NextPut struct {
	Queue string
	Put   PutRequest
}

// Reschedule moves an acked job back to delayed instead of deleting it.
type Reschedule struct {
	Delay *time.Duration
	At    *time.Time
}

// AckRequest acknowledges a reservation.
type AckRequest struct {
	Receipt    string
	AnyReceipt bool // compatibility protocols: act on the id alone
	HasResult  bool
	Result     []byte
	ResultJSON bool
	Next       *NextPut
	Reschedule *Reschedule
}

// AckResult is the answer to an ack.
type AckResult struct {
	ID     string
	State  string // "completed", "deleted" or "delayed"
	NextID string
}

// NackRequest gives a reservation back.
type NackRequest struct {
	Receipt    string
	AnyReceipt bool
	Delay      *time.Duration // nil: the queue's backoff decides
	Error      string
	// Priority, when set, replaces the job's priority (beanstalkd release).
	Priority *uint32
}

// TouchRequest extends a reservation.
type TouchRequest struct {
	Receipt    string
	AnyReceipt bool
	TTR        *time.Duration // nil: the reservation's effective TTR
}

// BuryRequest moves a reserved job to dead.
type BuryRequest struct {
	Receipt    string
	AnyReceipt bool
	Reason     string
	Priority   *uint32
}

// Filter selects jobs for list and cancel. A zero State means "all states"
// for listing and "all but reserved" for cancel.
type Filter struct {
	States []State
	Key    string
	HasKey bool
	Tags   map[string]string
}

// ListRequest pages through the jobs of a queue matching a filter.
type ListRequest struct {
	Filter Filter
	Limit  int    // 1..1000; 0 means 100
	Cursor string // from the previous page's NextCursor
}

// ListResult is one page of a listing.
type ListResult struct {
	Jobs       []Job
	NextCursor string // empty on the last page
}

// UpdateRequest patches a job in place (docs/api.md, PATCH of a job).
type UpdateRequest struct {
	Receipt     string
	Payload     []byte
	HasPayload  bool
	PayloadJSON bool
	Delay       *time.Duration
	At          *time.Time
	Priority    *uint32
	Tags        map[string]string
	HasTags     bool
}

// RespawnRequest brings dead jobs back: either the first Limit (oldest
// first) or exactly the listed Ids.
type RespawnRequest struct {
	Limit int
	IDs   []string
}

// ResultInfo is what a result lookup sees.
type ResultInfo struct {
	ID         string
	State      State
	HasResult  bool
	Result     BlobRef
	ResultJSON bool
	ResultData []byte // filled by the broker
}

// Package wire holds the JSON shapes of chronoq's native API (docs/api.md):
// the job object, the queue object and its counts, the put body and its
// answer, results, namespaces and channel history. The server encodes its
// answers into these types and the Go client (package client) reads them
// with the same types, so a field added on one side is there on the other.
//
// The package is a leaf: it imports only the standard library, so the
// client does not pull the server in with it. Times are strings in
// TimeLayout and durations are Go duration strings, exactly as they travel.
package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// TimeLayout is docs/api.md's answer format: UTC, always three fraction
// digits, so answers have a fixed width and sort as strings.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Duration is a duration in an answer: the server writes Go's duration
// string ("1m30s"); reading also takes a number of seconds, the other form
// docs/api.md allows for durations.
type Duration string

// UnmarshalJSON reads a duration string or a number of seconds; a number is
// kept as the equivalent duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = Duration(s)
		return nil
	}
	if string(b) == "null" {
		*d = ""
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"30s\" or a number of seconds", b)
	}
	*d = Duration(time.Duration(f * float64(time.Second)).String())
	return nil
}

// Job is the job object. Exactly one of Payload and PayloadBase64 is set
// (JSON text or bytes), and likewise Result and ResultBase64 once a
// completed job keeps a result.
type Job struct {
	ID            string            `json:"id"`
	Namespace     string            `json:"namespace"`
	Queue         string            `json:"queue"`
	State         string            `json:"state"`
	Payload       json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64 *string           `json:"payload_base64,omitempty"`
	Priority      uint32            `json:"priority"`
	Key           string            `json:"key,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	CreatedAt     string            `json:"created_at"`
	ActivateAt    string            `json:"activate_at"`
	ExpireAt      string            `json:"expire_at,omitempty"`
	TTR           Duration          `json:"ttr"`
	Tries         uint32            `json:"tries"`
	Attempt       uint32            `json:"attempt"`
	Receipt       string            `json:"receipt,omitempty"`
	ReservedUntil string            `json:"reserved_until,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	ReplyTo       string            `json:"reply_to,omitempty"`
	Notify        string            `json:"notify,omitempty"`
	Cron          string            `json:"cron,omitempty"`
	Result        json.RawMessage   `json:"result,omitempty"`
	ResultBase64  *string           `json:"result_base64,omitempty"`
}

// AckAnswer is an ack's answer; NextID only when the ack put a next job.
type AckAnswer struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	NextID string `json:"next_id,omitempty"`
}

// AckTakeAnswer is the answer to an ack that asked for the next job
// ("take"): the ack's answer and the jobs the take reserved, [] when none
// came within its wait.
type AckTakeAnswer struct {
	AckAnswer
	Jobs []Job `json:"jobs"`
}

// AckBatchAnswer is a batch ack's answer, one item per acked reservation
// in the order given.
type AckBatchAnswer struct {
	Acks []AckAnswer `json:"acks"`
}

// JobPage is a listing's answer (and take's, without the cursor).
type JobPage struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Put is the put body. Queue is read only inside ack's "next", Wait only by
// call; Notify only by the server's own producers that ask for a result
// event (docs/realtime.md).
type Put struct {
	Queue          string            `json:"queue,omitempty"`
	Payload        *json.RawMessage  `json:"payload,omitempty"`
	PayloadBase64  *string           `json:"payload_base64,omitempty"`
	ID             string            `json:"id,omitempty"`
	Delay          string            `json:"delay,omitempty"`
	At             string            `json:"at,omitempty"`
	Priority       *uint32           `json:"priority,omitempty"`
	TTL            string            `json:"ttl,omitempty"`
	TTR            string            `json:"ttr,omitempty"`
	Tries          *uint32           `json:"tries,omitempty"`
	Key            string            `json:"key,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
	ReplyTo        string            `json:"reply_to,omitempty"`
	Notify         string            `json:"notify,omitempty"`
	Cron           string            `json:"cron,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Wait           string            `json:"wait,omitempty"`
}

// PutAnswer is the answer to one put.
type PutAnswer struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ActivateAt string `json:"activate_at"`
	Duplicate  bool   `json:"duplicate"`
}

// Backoff is a queue's nack retry delay. Fields are pointers because the
// same shape is the body of a queue PUT, where an absent field keeps its
// value; answers set every field.
type Backoff struct {
	Initial    *string  `json:"initial,omitempty"`
	Max        *string  `json:"max,omitempty"`
	Multiplier *float64 `json:"multiplier,omitempty"`
	Jitter     *float64 `json:"jitter,omitempty"`
}

// QueueConfig is a queue's settings; pointers as in Backoff.
type QueueConfig struct {
	DefaultTTR      *string  `json:"default_ttr,omitempty"`
	DefaultTries    *uint32  `json:"default_tries,omitempty"`
	DefaultTTL      *string  `json:"default_ttl,omitempty"`
	DefaultPriority *uint32  `json:"default_priority,omitempty"`
	MaxJobs         *uint64  `json:"max_jobs,omitempty"`
	MaxPayload      *uint32  `json:"max_payload,omitempty"`
	DedupWindow     *string  `json:"dedup_window,omitempty"`
	RetainResults   *string  `json:"retain_results,omitempty"`
	KeyMode         *string  `json:"key_mode,omitempty"`
	Backoff         *Backoff `json:"backoff,omitempty"`
}

// Counts are a queue's jobs by state.
type Counts struct {
	Delayed   uint64 `json:"delayed"`
	Ready     uint64 `json:"ready"`
	Blocked   uint64 `json:"blocked"`
	Reserved  uint64 `json:"reserved"`
	Dead      uint64 `json:"dead"`
	Completed uint64 `json:"completed"`
}

// Queue is the queue object.
type Queue struct {
	Namespace      string      `json:"namespace"`
	Name           string      `json:"name"`
	Config         QueueConfig `json:"config"`
	Paused         bool        `json:"paused"`
	Counts         Counts      `json:"counts"`
	OldestReadyAge Duration    `json:"oldest_ready_age"`
}

// QueuePage is the answer of a queue listing.
type QueuePage struct {
	Queues     []Queue `json:"queues"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// Result is the answer of GET .../result and of call: the state, and the
// result once completed (JSON null for a job acked without one). ID is set
// by call only.
type Result struct {
	ID           string          `json:"id,omitempty"`
	State        string          `json:"state,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	ResultBase64 *string         `json:"result_base64,omitempty"`
}

// Namespace is the namespace object of the admin listener.
type Namespace struct {
	Name             string          `json:"name"`
	AutoCreateQueues bool            `json:"auto_create_queues"`
	ChannelHistory   *ChannelHistory `json:"channel_history,omitempty"`
}

// ChannelHistory is a namespace's channel history policy; shown only for
// namespaces that set one. TTL "-1" keeps publications until they are
// pushed out by Size.
type ChannelHistory struct {
	Size    int    `json:"size"`
	TTL     string `json:"ttl"`
	Durable bool   `json:"durable"`
}

// PublishAnswer is where a publication landed in its channel.
type PublishAnswer struct {
	Offset uint64 `json:"offset"`
	Epoch  string `json:"epoch"`
}

// Publication is one message of a channel's history.
type Publication struct {
	Offset uint64          `json:"offset"`
	Data   json.RawMessage `json:"data"`
	Time   string          `json:"time"`
}

// History is a channel's history answer. Recovered false means the epoch
// changed or the position fell out of history: Publications is then empty.
type History struct {
	Publications []Publication `json:"publications"`
	Offset       uint64        `json:"offset"`
	Epoch        string        `json:"epoch"`
	Recovered    bool          `json:"recovered"`
}

package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// timeLayout is docs/api.md's answer format: UTC, always three fraction digits,
// so answers have a fixed width and sort as strings.
const timeLayout = "2006-01-02T15:04:05.000Z"

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// fmtOptTime gives "" for the zero time so omitempty drops the field.
func fmtOptTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmtTime(t)
}

// writeJSON encodes into a buffer first so that an encoding failure can
// still become a clean 500 instead of a truncated 200. HTML escaping is off:
// payloads must come back byte for byte as they were stored, and the
// default encoder would rewrite <, > and & inside them.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// blob is a stored byte string answered either as JSON text or as base64,
// depending on how it was given. Bytes flagged as JSON that do not parse
// (which only a bug or a corrupt log could produce) fall back to base64
// rather than breaking the whole answer.
func blob(data []byte, isJSON bool) (raw json.RawMessage, b64 *string) {
	if isJSON {
		if len(data) == 0 {
			return json.RawMessage("null"), nil
		}
		if json.Valid(data) {
			return json.RawMessage(data), nil
		}
	}
	s := base64.StdEncoding.EncodeToString(data)
	return nil, &s
}

type jobJSON struct {
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
	TTR           string            `json:"ttr"`
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

// JobObject is the API's job object for j, as every protocol that speaks
// JSON shows it (the WebSocket push uses it too).
func JobObject(j *engine.Job) any { return encodeJob(j) }

func encodeJob(j *engine.Job) jobJSON {
	out := jobJSON{
		ID:            j.ID,
		Namespace:     j.Namespace,
		Queue:         j.Queue,
		State:         j.State.String(),
		Priority:      j.Priority,
		Key:           j.Key,
		Tags:          j.Tags,
		CreatedAt:     fmtTime(j.CreatedAt),
		ActivateAt:    fmtTime(j.ActivateAt),
		ExpireAt:      fmtOptTime(j.ExpireAt),
		TTR:           j.TTR.String(),
		Tries:         j.Tries,
		Attempt:       j.Attempt,
		Receipt:       j.Receipt,
		ReservedUntil: fmtOptTime(j.ReservedUntil),
		LastError:     j.LastError,
		ReplyTo:       j.ReplyTo,
		Notify:        j.Notify,
		Cron:          j.Cron,
	}
	out.Payload, out.PayloadBase64 = blob(j.Data, j.PayloadJSON)
	if j.HasResult {
		out.Result, out.ResultBase64 = blob(j.ResultData, j.ResultJSON)
	}
	return out
}

type jobsJSON struct {
	Jobs       []jobJSON `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// encodeJobs never gives a nil slice: an empty answer is "jobs":[], not null.
func encodeJobs(jobs []engine.Job) []jobJSON {
	out := make([]jobJSON, len(jobs))
	for i := range jobs {
		out[i] = encodeJob(&jobs[i])
	}
	return out
}

type putJSON struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ActivateAt string `json:"activate_at"`
	Duplicate  bool   `json:"duplicate"`
}

func encodePut(r engine.PutResult) putJSON {
	return putJSON{ID: r.ID, State: r.State.String(), ActivateAt: fmtTime(r.ActivateAt), Duplicate: r.Duplicate}
}

type backoffJSON struct {
	Initial    string  `json:"initial"`
	Max        string  `json:"max"`
	Multiplier float64 `json:"multiplier"`
	Jitter     float64 `json:"jitter"`
}

type queueConfigJSON struct {
	DefaultTTR      string      `json:"default_ttr"`
	DefaultTries    uint32      `json:"default_tries"`
	DefaultTTL      string      `json:"default_ttl"`
	DefaultPriority uint32      `json:"default_priority"`
	MaxJobs         uint64      `json:"max_jobs"`
	MaxPayload      uint32      `json:"max_payload"`
	DedupWindow     string      `json:"dedup_window"`
	RetainResults   string      `json:"retain_results"`
	KeyMode         string      `json:"key_mode"`
	Backoff         backoffJSON `json:"backoff"`
}

type countsJSON struct {
	Delayed   uint64 `json:"delayed"`
	Ready     uint64 `json:"ready"`
	Blocked   uint64 `json:"blocked"`
	Reserved  uint64 `json:"reserved"`
	Dead      uint64 `json:"dead"`
	Completed uint64 `json:"completed"`
}

type queueJSON struct {
	Namespace      string          `json:"namespace"`
	Name           string          `json:"name"`
	Config         queueConfigJSON `json:"config"`
	Paused         bool            `json:"paused"`
	Counts         countsJSON      `json:"counts"`
	OldestReadyAge string          `json:"oldest_ready_age"`
}

func encodeQueue(q *engine.QueueInfo) queueJSON {
	c := &q.Config
	return queueJSON{
		Namespace: q.Namespace,
		Name:      q.Name,
		Config: queueConfigJSON{
			DefaultTTR:      c.DefaultTTR.String(),
			DefaultTries:    c.DefaultTries,
			DefaultTTL:      c.DefaultTTL.String(),
			DefaultPriority: c.DefaultPriority,
			MaxJobs:         c.MaxJobs,
			MaxPayload:      c.MaxPayload,
			DedupWindow:     c.DedupWindow.String(),
			RetainResults:   c.RetainResults.String(),
			KeyMode:         c.KeyMode.String(),
			Backoff: backoffJSON{
				Initial:    c.Backoff.Initial.String(),
				Max:        c.Backoff.Max.String(),
				Multiplier: c.Backoff.Multiplier,
				Jitter:     c.Backoff.Jitter,
			},
		},
		Paused: q.Paused,
		Counts: countsJSON{
			Delayed:   q.Counts.Delayed,
			Ready:     q.Counts.Ready,
			Blocked:   q.Counts.Blocked,
			Reserved:  q.Counts.Reserved,
			Dead:      q.Counts.Dead,
			Completed: q.Counts.Completed,
		},
		OldestReadyAge: q.OldestReadyAge.String(),
	}
}

type queuesJSON struct {
	Queues     []queueJSON `json:"queues"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// resultJSON is the answer of GET .../result: state, plus the result once
// completed. A completed job with no result answers "result": null (docs/api.md,
// Results and RPC), so the field is always there when done.
type resultJSON struct {
	State        string          `json:"state"`
	Result       json.RawMessage `json:"result,omitempty"`
	ResultBase64 *string         `json:"result_base64,omitempty"`
}

func encodeResult(info engine.ResultInfo, done bool) resultJSON {
	if !done {
		return resultJSON{State: info.State.String()}
	}
	out := resultJSON{State: engine.StateCompleted.String()}
	out.Result, out.ResultBase64 = resultBlob(info)
	return out
}

func resultBlob(info engine.ResultInfo) (json.RawMessage, *string) {
	if !info.HasResult {
		return json.RawMessage("null"), nil
	}
	return blob(info.ResultData, info.ResultJSON)
}

// callDoneJSON and callWaitingJSON are the two answers of call (200, 504).
type callDoneJSON struct {
	ID           string          `json:"id"`
	Result       json.RawMessage `json:"result,omitempty"`
	ResultBase64 *string         `json:"result_base64,omitempty"`
}

type callWaitingJSON struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

type namespaceJSON struct {
	Name             string              `json:"name"`
	AutoCreateQueues bool                `json:"auto_create_queues"`
	ChannelHistory   *channelHistoryJSON `json:"channel_history,omitempty"`
}

// channelHistoryJSON is shown only for namespaces that set a policy, so
// the namespace object of docs/api.md stays as it is for everyone else.
type channelHistoryJSON struct {
	Size    int    `json:"size"`
	TTL     string `json:"ttl"`
	Durable bool   `json:"durable"`
}

func encodeNamespace(n engine.NamespaceInfo) namespaceJSON {
	out := namespaceJSON{Name: n.Name, AutoCreateQueues: n.Config.AutoCreateQueues}
	if c := n.Config.Channels; c != (engine.ChannelHistory{}) {
		size, ttl := c.Size, c.TTL
		if size == 0 {
			size = pubsub.DefaultHistorySize
		}
		if ttl == 0 {
			ttl = pubsub.DefaultHistoryTTL
		}
		h := &channelHistoryJSON{Size: size, TTL: ttl.String(), Durable: c.Durable}
		if ttl < 0 {
			h.TTL = "-1"
		}
		out.ChannelHistory = h
	}
	return out
}

type publicationJSON struct {
	Offset uint64          `json:"offset"`
	Data   json.RawMessage `json:"data"`
	Time   string          `json:"time"`
}

type historyJSON struct {
	Publications []publicationJSON `json:"publications"`
	Offset       uint64            `json:"offset"`
	Epoch        string            `json:"epoch"`
	Recovered    bool              `json:"recovered"`
}

func encodeHistory(h HistoryResult) historyJSON {
	out := historyJSON{Publications: make([]publicationJSON, 0, len(h.Publications)), Offset: h.Offset, Epoch: h.Epoch, Recovered: h.Recovered}
	for _, p := range h.Publications {
		data := json.RawMessage(p.Data)
		if !json.Valid(data) {
			data = json.RawMessage("null")
		}
		out.Publications = append(out.Publications, publicationJSON{Offset: p.Offset, Data: data, Time: fmtTime(p.Time)})
	}
	return out
}

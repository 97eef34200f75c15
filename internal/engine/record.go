package engine

// Records are how every change leaves the engine: a command is validated,
// turned into one Entry (the records of that command, logged as one frame so
// a crash keeps all or none of them), and only then applied. Replay applies
// the same entries, so live state and recovered state are the same function
// of the log.
//
// Records describe resulting state, never deltas: a job record carries the
// job's whole image ("X is reserved, attempt 3, receipt R, until T"), a
// delete names the job. Applying a record twice, or on top of a snapshot
// that already contains its effect, gives the same state — which is what
// lets snapshots be taken while writes continue.
//
// Encoding of one entry (all integers little-endian varints unless noted):
//
//	entry   = version:u8(=2) time:uvarint(unix ms) count:uvarint record*
//	record  = kind:u8 fields (by kind, see encodeRecord)
//	string  = len:uvarint bytes
//	blob    = mode:u8 (0 none | 1 ref seg,off,len | 2 inline len bytes)
//
// Version 2 added the namespace's channel history policy, a job's notify
// channel and publication records; version-1 entries still decode (those
// fields are then empty).
//
// Inline blobs are payloads and results arriving with a command. Their bytes
// stay in the log; the engine keeps only their location, computed from the
// entry's position in its segment (Entry.Locate).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

const (
	entryVersion   = 2
	entryVersionV1 = 1
)

// Kind identifies a record.
type Kind uint8

const (
	KindNamespace   Kind = 1 // namespace upsert
	KindToken       Kind = 2 // token upsert
	KindTokenDelete Kind = 3
	KindQueue       Kind = 4 // queue upsert (config, paused)
	KindQueueDelete Kind = 5 // queue and all its jobs gone
	KindQueuePurge  Kind = 6 // all jobs of the queue gone
	KindJob         Kind = 7 // job upsert: full image
	KindJobDelete   Kind = 8
	KindIdem        Kind = 9 // idempotency key remembered until Expire
	KindCounters    Kind = 10
	KindPublication Kind = 11 // one publication of a durable channel (or its position only)
	KindFarIn       Kind = 13 // job image brought back from a far-future bucket (far.go)
	KindLoadHints   Kind = 14 // snapshots: sizes of the tables the jobs fill (LoadHints)
)

func (k Kind) String() string {
	switch k {
	case KindNamespace:
		return "namespace"
	case KindToken:
		return "token"
	case KindTokenDelete:
		return "token-delete"
	case KindQueue:
		return "queue"
	case KindQueueDelete:
		return "queue-delete"
	case KindQueuePurge:
		return "queue-purge"
	case KindJob:
		return "job"
	case KindJobDelete:
		return "job-delete"
	case KindIdem:
		return "idem"
	case KindCounters:
		return "counters"
	case KindPublication:
		return "publication"
	case KindFarIn:
		return "far-in"
	case KindLoadHints:
		return "load-hints"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// phase is the part of a job's state that records carry; delayed, ready and
// blocked are all "pending" and follow from time and the key chain.
type phase uint8

const (
	phasePending phase = iota + 1
	phaseReserved
	phaseDead
	phaseCompleted
)

// Blob is a payload or result in a record: either bytes arriving with the
// command (Data, not yet in the log) or a reference to bytes already logged.
type Blob struct {
	Data []byte
	Ref  BlobRef
	off  uint32 // offset of Data in the encoded entry, set by Encode
	has  bool
}

func inlineBlob(b []byte) Blob { return Blob{Data: b, has: true} }
func refBlob(r BlobRef) Blob   { return Blob{Ref: r, has: true} }

// JobImage is a job's whole state as records carry it.
type JobImage struct {
	NS, Queue    string
	ID           string
	Seq          uint64
	Phase        phase
	At           int64 // activate_at, unix ms
	Created      int64
	Expire       int64
	Prio         uint32
	TTR          uint32 // ms
	Tries        uint32
	Attempt      uint32
	Flags        uint8 // job flags except fULID/fHasExt
	Key          string
	Tags         []string // k1, v1, k2, v2 ... sorted by key
	ReplyTo      string
	Cron         string
	LastError    string
	RetainResult int64
	RetainUntil  int64
	Notify       string
	// beanstalkd's per-job counters (reserves is Attempt)
	Timeouts, Releases, Buries, Kicks uint32
	Payload                           Blob
	Result                            Blob
	// reservation (Phase == phaseReserved)
	Nonce   uint64
	Until   int64
	ResvTTR uint32
}

// Record is one change.
type Record struct {
	Kind  Kind
	NS    string
	Queue string

	NSConfig NamespaceConfig // KindNamespace

	TokenHash string // KindToken, KindTokenDelete
	TokenDesc string

	QConfig      QueueConfig // KindQueue
	QPaused      bool
	QPausedUntil int64 // paused until then (unix ms); 0 = until resumed
	QCreated     int64

	Job       JobImage // KindJob, KindFarIn
	FarBucket int64    // KindFarIn: the bucket the job came from (far.go)

	ID string // KindJobDelete

	IdemKey    string // KindIdem
	IdemID     string
	IdemExpire int64
	IdemAt     int64 // the original job's activation time

	Seq   uint64 // KindCounters
	Nonce uint64
	Jobs  uint64 // snapshots: how many jobs follow (a sizing hint)

	Hints *LoadHints // KindLoadHints

	Pub Publication // KindPublication (NS is the namespace)
}

// Publication is one publication of a durable channel as a record carries
// it. A record without data only states the channel's position (epoch and
// newest offset): snapshots write one for channels whose history is empty,
// so the epoch and offsets carry on after a restart.
type Publication struct {
	Channel string
	Epoch   string
	Offset  uint64
	Time    int64 // unix ms
	Data    []byte
	HasData bool
}

// Entry is the records of one command, logged and applied together.
type Entry struct {
	Time    int64 // unix ms at which the command was applied
	Records []Record
}

func (ent *Entry) reset(now int64) {
	ent.Time = now
	for i := range ent.Records {
		ent.Records[i] = Record{}
	}
	ent.Records = ent.Records[:0]
}

func (ent *Entry) add() *Record {
	ent.Records = append(ent.Records, Record{})
	return &ent.Records[len(ent.Records)-1]
}

// Encode appends the entry's encoding to dst and remembers where each
// inline blob lands relative to the start of the appended bytes.
func (ent *Entry) Encode(dst []byte) []byte {
	base := len(dst)
	dst = append(dst, entryVersion)
	dst = binary.AppendUvarint(dst, uint64(ent.Time))
	dst = binary.AppendUvarint(dst, uint64(len(ent.Records)))
	for i := range ent.Records {
		dst = encodeRecord(dst, base, &ent.Records[i])
	}
	return dst
}

// Locate turns the inline blobs of an encoded entry into log references,
// given that the entry's first byte is at offset bodyOff of segment seg.
func (ent *Entry) Locate(seg, bodyOff uint32) {
	fix := func(b *Blob) {
		if b.has && b.Data != nil {
			b.Ref = BlobRef{Segment: seg, Offset: bodyOff + b.off, Len: uint32(len(b.Data))}
		}
	}
	for i := range ent.Records {
		if k := ent.Records[i].Kind; k == KindJob || k == KindFarIn {
			fix(&ent.Records[i].Job.Payload)
			fix(&ent.Records[i].Job.Result)
		}
	}
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBlob(dst []byte, base int, b *Blob) []byte {
	switch {
	case !b.has:
		return append(dst, 0)
	case b.Data != nil:
		dst = append(dst, 2)
		dst = binary.AppendUvarint(dst, uint64(len(b.Data)))
		b.off = uint32(len(dst) - base)
		return append(dst, b.Data...)
	default:
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, uint64(b.Ref.Segment))
		dst = binary.AppendUvarint(dst, uint64(b.Ref.Offset))
		return binary.AppendUvarint(dst, uint64(b.Ref.Len))
	}
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendDur(dst []byte, d time.Duration) []byte { return binary.AppendVarint(dst, int64(d)) }

func encodeRecord(dst []byte, base int, r *Record) []byte {
	dst = append(dst, byte(r.Kind))
	switch r.Kind {
	case KindNamespace:
		dst = appendString(dst, r.NS)
		dst = appendBool(dst, r.NSConfig.AutoCreateQueues)
		dst = binary.AppendVarint(dst, int64(r.NSConfig.Channels.Size))
		dst = appendDur(dst, r.NSConfig.Channels.TTL)
		dst = appendBool(dst, r.NSConfig.Channels.Durable)
	case KindToken:
		dst = appendString(dst, r.NS)
		dst = appendString(dst, r.TokenHash)
		dst = appendString(dst, r.TokenDesc)
	case KindTokenDelete:
		dst = appendString(dst, r.TokenHash)
	case KindQueue:
		dst = appendString(dst, r.NS)
		dst = appendString(dst, r.Queue)
		c := &r.QConfig
		dst = appendDur(dst, c.DefaultTTR)
		dst = binary.AppendUvarint(dst, uint64(c.DefaultTries))
		dst = appendDur(dst, c.DefaultTTL)
		dst = binary.AppendUvarint(dst, uint64(c.DefaultPriority))
		dst = binary.AppendUvarint(dst, c.MaxJobs)
		dst = binary.AppendUvarint(dst, uint64(c.MaxPayload))
		dst = appendDur(dst, c.DedupWindow)
		dst = appendDur(dst, c.RetainResults)
		dst = appendDur(dst, c.Backoff.Initial)
		dst = appendDur(dst, c.Backoff.Max)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.Backoff.Multiplier))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.Backoff.Jitter))
		dst = append(dst, byte(c.KeyMode))
		dst = appendBool(dst, r.QPaused)
		dst = binary.AppendVarint(dst, r.QPausedUntil)
		dst = binary.AppendVarint(dst, r.QCreated)
	case KindQueueDelete, KindQueuePurge:
		dst = appendString(dst, r.NS)
		dst = appendString(dst, r.Queue)
	case KindJob, KindFarIn:
		if r.Kind == KindFarIn {
			dst = binary.AppendVarint(dst, r.FarBucket)
		}
		j := &r.Job
		dst = appendString(dst, j.NS)
		dst = appendString(dst, j.Queue)
		dst = appendString(dst, j.ID)
		dst = binary.AppendUvarint(dst, j.Seq)
		dst = append(dst, byte(j.Phase), j.Flags)
		dst = binary.AppendVarint(dst, j.At)
		dst = binary.AppendVarint(dst, j.Created)
		dst = binary.AppendVarint(dst, j.Expire)
		dst = binary.AppendUvarint(dst, uint64(j.Prio))
		dst = binary.AppendUvarint(dst, uint64(j.TTR))
		dst = binary.AppendUvarint(dst, uint64(j.Tries))
		dst = binary.AppendUvarint(dst, uint64(j.Attempt))
		dst = appendString(dst, j.Key)
		dst = binary.AppendUvarint(dst, uint64(len(j.Tags)))
		for _, t := range j.Tags {
			dst = appendString(dst, t)
		}
		dst = appendString(dst, j.ReplyTo)
		dst = appendString(dst, j.Cron)
		dst = appendString(dst, j.LastError)
		dst = binary.AppendVarint(dst, j.RetainResult)
		dst = binary.AppendVarint(dst, j.RetainUntil)
		dst = binary.AppendUvarint(dst, uint64(j.Timeouts))
		dst = binary.AppendUvarint(dst, uint64(j.Releases))
		dst = binary.AppendUvarint(dst, uint64(j.Buries))
		dst = binary.AppendUvarint(dst, uint64(j.Kicks))
		dst = appendString(dst, j.Notify)
		dst = appendBlob(dst, base, &j.Payload)
		dst = appendBlob(dst, base, &j.Result)
		if j.Phase == phaseReserved {
			dst = binary.AppendUvarint(dst, j.Nonce)
			dst = binary.AppendVarint(dst, j.Until)
			dst = binary.AppendUvarint(dst, uint64(j.ResvTTR))
		}
	case KindJobDelete:
		dst = appendString(dst, r.NS)
		dst = appendString(dst, r.Queue)
		dst = appendString(dst, r.ID)
	case KindIdem:
		dst = appendString(dst, r.NS)
		dst = appendString(dst, r.Queue)
		dst = appendString(dst, r.IdemKey)
		dst = appendString(dst, r.IdemID)
		dst = binary.AppendVarint(dst, r.IdemExpire)
		dst = binary.AppendVarint(dst, r.IdemAt)
	case KindCounters:
		dst = binary.AppendUvarint(dst, r.Seq)
		dst = binary.AppendUvarint(dst, r.Nonce)
		dst = binary.AppendUvarint(dst, r.Jobs)
	case KindLoadHints:
		dst = r.Hints.encode(dst)
	case KindPublication:
		p := &r.Pub
		dst = appendString(dst, r.NS)
		dst = appendString(dst, p.Channel)
		dst = appendString(dst, p.Epoch)
		dst = binary.AppendUvarint(dst, p.Offset)
		dst = binary.AppendVarint(dst, p.Time)
		dst = appendBool(dst, p.HasData)
		if p.HasData {
			dst = binary.AppendUvarint(dst, uint64(len(p.Data)))
			dst = append(dst, p.Data...)
		}
	}
	return dst
}

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("corrupt record")

type decoder struct {
	b   []byte
	off int
	err error
	v   byte // entry version
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrCorrupt, what, d.off)
	}
}

func (d *decoder) byte1(what string) byte {
	if d.err != nil || d.off >= len(d.b) {
		d.fail(what)
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) u32(what string) uint32 {
	v := d.uvarint(what)
	if v > math.MaxUint32 {
		d.fail(what + " out of range")
		return 0
	}
	return uint32(v)
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail(what + " length")
		return nil
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) str(what string) string { return string(d.bytes(what)) }

func (d *decoder) f64(what string) float64 {
	if d.err != nil || len(d.b)-d.off < 8 {
		d.fail(what)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return v
}

func (d *decoder) dur(what string) time.Duration { return time.Duration(d.varint(what)) }

func (d *decoder) blob(what string, seg, bodyOff uint32) Blob {
	switch d.byte1(what) {
	case 0:
		return Blob{}
	case 1:
		return refBlob(BlobRef{Segment: d.u32(what), Offset: d.u32(what), Len: d.u32(what)})
	case 2:
		n := d.uvarint(what)
		if d.err != nil || n > uint64(len(d.b)-d.off) {
			d.fail(what + " length")
			return Blob{}
		}
		b := Blob{Data: d.b[d.off : d.off+int(n)], has: true, off: uint32(d.off)}
		b.Ref = BlobRef{Segment: seg, Offset: bodyOff + uint32(d.off), Len: uint32(n)}
		d.off += int(n)
		return b
	default:
		d.fail(what + " mode")
		return Blob{}
	}
}

// DecodeEntry parses one entry whose first byte lies at bodyOff in segment
// seg (used to locate inline blobs). Blob data slices alias body. It never
// panics; any malformed input gives an error wrapping ErrCorrupt.
func DecodeEntry(body []byte, seg, bodyOff uint32) (*Entry, error) {
	d := &decoder{b: body}
	if d.v = d.byte1("version"); d.err == nil && d.v != entryVersion && d.v != entryVersionV1 {
		return nil, fmt.Errorf("%w: unknown entry version %d", ErrCorrupt, d.v)
	}
	ent := &Entry{Time: int64(d.uvarint("time"))}
	n := d.uvarint("count")
	if d.err == nil && n > uint64(len(body)) { // every record takes at least a byte
		d.fail("record count")
	}
	if d.err == nil {
		ent.Records = make([]Record, 0, n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		r := ent.add()
		decodeRecord(d, r, seg, bodyOff)
	}
	if d.err == nil && d.off != len(body) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return ent, nil
}

func decodeRecord(d *decoder, r *Record, seg, bodyOff uint32) {
	r.Kind = Kind(d.byte1("kind"))
	switch r.Kind {
	case KindNamespace:
		r.NS = d.str("namespace")
		r.NSConfig.AutoCreateQueues = d.byte1("auto_create") != 0
		if d.v >= 2 {
			c := &r.NSConfig.Channels
			size := d.varint("channel_history.size")
			c.TTL = d.dur("channel_history.ttl")
			c.Durable = d.byte1("channel_history.durable") != 0
			if d.err == nil && (size > MaxChannelHistory || size < -1) {
				d.fail("channel_history.size")
			}
			c.Size = int(size)
		}
	case KindToken:
		r.NS = d.str("namespace")
		r.TokenHash = d.str("token")
		r.TokenDesc = d.str("description")
	case KindTokenDelete:
		r.TokenHash = d.str("token")
	case KindQueue:
		r.NS = d.str("namespace")
		r.Queue = d.str("queue")
		c := &r.QConfig
		c.DefaultTTR = d.dur("default_ttr")
		c.DefaultTries = d.u32("default_tries")
		c.DefaultTTL = d.dur("default_ttl")
		c.DefaultPriority = d.u32("default_priority")
		c.MaxJobs = d.uvarint("max_jobs")
		c.MaxPayload = d.u32("max_payload")
		c.DedupWindow = d.dur("dedup_window")
		c.RetainResults = d.dur("retain_results")
		c.Backoff.Initial = d.dur("backoff.initial")
		c.Backoff.Max = d.dur("backoff.max")
		c.Backoff.Multiplier = d.f64("backoff.multiplier")
		c.Backoff.Jitter = d.f64("backoff.jitter")
		c.KeyMode = KeyMode(d.byte1("key_mode"))
		r.QPaused = d.byte1("paused") != 0
		r.QPausedUntil = d.varint("paused_until")
		r.QCreated = d.varint("created")
	case KindQueueDelete, KindQueuePurge:
		r.NS = d.str("namespace")
		r.Queue = d.str("queue")
	case KindJob, KindFarIn:
		if r.Kind == KindFarIn {
			r.FarBucket = d.varint("far bucket")
		}
		j := &r.Job
		j.NS = d.str("namespace")
		j.Queue = d.str("queue")
		j.ID = d.str("id")
		j.Seq = d.uvarint("seq")
		j.Phase = phase(d.byte1("phase"))
		j.Flags = d.byte1("flags")
		j.At = d.varint("at")
		j.Created = d.varint("created")
		j.Expire = d.varint("expire")
		j.Prio = d.u32("priority")
		j.TTR = d.u32("ttr")
		j.Tries = d.u32("tries")
		j.Attempt = d.u32("attempt")
		j.Key = d.str("key")
		nt := d.uvarint("tags")
		if d.err == nil && nt > 64 {
			d.fail("tag count")
		}
		for i := uint64(0); i < nt && d.err == nil; i++ {
			j.Tags = append(j.Tags, d.str("tag"))
		}
		j.ReplyTo = d.str("reply_to")
		j.Cron = d.str("cron")
		j.LastError = d.str("last_error")
		j.RetainResult = d.varint("retain_result")
		j.RetainUntil = d.varint("retain_until")
		j.Timeouts = d.u32("timeouts")
		j.Releases = d.u32("releases")
		j.Buries = d.u32("buries")
		j.Kicks = d.u32("kicks")
		if d.v >= 2 {
			j.Notify = d.str("notify")
		}
		j.Payload = d.blob("payload", seg, bodyOff)
		j.Result = d.blob("result", seg, bodyOff)
		switch j.Phase {
		case phasePending, phaseDead, phaseCompleted:
		case phaseReserved:
			j.Nonce = d.uvarint("nonce")
			j.Until = d.varint("until")
			j.ResvTTR = d.u32("resv_ttr")
		default:
			d.fail("phase")
		}
		if d.err == nil && (j.ID == "" || j.Queue == "" || len(j.Tags)%2 != 0) {
			d.fail("job image")
		}
	case KindJobDelete:
		r.NS = d.str("namespace")
		r.Queue = d.str("queue")
		r.ID = d.str("id")
	case KindIdem:
		r.NS = d.str("namespace")
		r.Queue = d.str("queue")
		r.IdemKey = d.str("idempotency_key")
		r.IdemID = d.str("id")
		r.IdemExpire = d.varint("expire")
		r.IdemAt = d.varint("at")
	case KindCounters:
		r.Seq = d.uvarint("seq")
		r.Nonce = d.uvarint("nonce")
		r.Jobs = d.uvarint("jobs")
	case KindLoadHints:
		r.Hints = decodeLoadHints(d)
	case KindPublication:
		p := &r.Pub
		r.NS = d.str("namespace")
		p.Channel = d.str("channel")
		p.Epoch = d.str("epoch")
		p.Offset = d.uvarint("offset")
		p.Time = d.varint("time")
		p.HasData = d.byte1("has_data") != 0
		if p.HasData {
			// copied: the engine keeps publication bytes (history is
			// bounded), unlike payloads, which stay in the log
			p.Data = append([]byte(nil), d.bytes("data")...)
		}
		if d.err == nil && (r.NS == "" || p.Channel == "" || p.Epoch == "" || p.Offset == 0) {
			d.fail("publication")
		}
	default:
		d.fail("kind")
	}
}

// Describe renders an entry for `chronoq wal dump`.
func (ent *Entry) Describe() string {
	s := time.UnixMilli(ent.Time).UTC().Format("2006-01-02T15:04:05.000Z")
	for i := range ent.Records {
		r := &ent.Records[i]
		s += " | " + r.Kind.String()
		switch r.Kind {
		case KindJob, KindFarIn:
			j := &r.Job
			s += fmt.Sprintf(" %s/%s/%s seq=%d phase=%d at=%d attempt=%d", j.NS, j.Queue, j.ID, j.Seq, j.Phase, j.At, j.Attempt)
			if j.Payload.Data != nil {
				s += fmt.Sprintf(" payload=%dB", len(j.Payload.Data))
			}
		case KindJobDelete:
			s += fmt.Sprintf(" %s/%s/%s", r.NS, r.Queue, r.ID)
		case KindQueue, KindQueueDelete, KindQueuePurge:
			s += fmt.Sprintf(" %s/%s", r.NS, r.Queue)
		case KindNamespace, KindToken:
			s += " " + r.NS
		case KindIdem:
			s += fmt.Sprintf(" %s/%s %q→%s", r.NS, r.Queue, r.IdemKey, r.IdemID)
		case KindPublication:
			s += fmt.Sprintf(" %s/%s %s:%d", r.NS, r.Pub.Channel, r.Pub.Epoch, r.Pub.Offset)
			if r.Pub.HasData {
				s += fmt.Sprintf(" data=%dB", len(r.Pub.Data))
			}
		}
	}
	return s
}

func sortTags(tags map[string]string) []string {
	if len(tags) == 0 {
		return nil
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, k, tags[k])
	}
	return out
}

package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/chronoq/chronoq/client"
)

// cliJSON prints v as one line of JSON. HTML escaping is off so payloads
// read as they were sent.
func cliJSON(v any) error {
	enc := json.NewEncoder(cliOut)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func cliTable() *tabwriter.Writer { return tabwriter.NewWriter(cliOut, 0, 8, 2, ' ', 0) }

func cliRow(w io.Writer, cols ...string) {
	for i, c := range cols {
		if c == "" {
			c = "-"
		}
		// A tab or newline inside a cell would break the columns.
		c = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, c)
	}
	io.WriteString(w, "\n")
}

func cliFmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// cliPayloadText is a job's payload for a table cell: the JSON text, or
// base64 for bytes, cut to max runes.
func cliPayloadText(j *client.Job, max int) string {
	s := string(j.Payload)
	if j.Payload == nil && j.PayloadBytes != nil {
		s = "base64:" + base64.StdEncoding.EncodeToString(j.PayloadBytes)
	}
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

func cliJobsTable(jobs []*client.Job, withReceipt bool) error {
	w := cliTable()
	hdr := []string{"QUEUE", "ID", "STATE", "PRI", "ATTEMPT", "ACTIVATE_AT", "KEY", "PAYLOAD"}
	if withReceipt {
		hdr = []string{"QUEUE", "ID", "RECEIPT", "ATTEMPT", "TTR", "KEY", "PAYLOAD"}
	}
	cliRow(w, hdr...)
	for _, j := range jobs {
		if withReceipt {
			cliRow(w, j.Queue, j.ID, j.Receipt, strconv.FormatUint(uint64(j.Attempt), 10), j.TTR.String(), j.Key, cliPayloadText(j, 60))
		} else {
			cliRow(w, j.Queue, j.ID, j.State, strconv.FormatUint(uint64(j.Priority), 10), strconv.FormatUint(uint64(j.Attempt), 10),
				cliFmtTime(j.ActivateAt), j.Key, cliPayloadText(j, 60))
		}
	}
	return w.Flush()
}

// cliJobDetail prints every field of one job, one per line.
func cliJobDetail(j *client.Job) error {
	w := cliTable()
	row := func(k, v string) {
		if v != "" {
			cliRow(w, k, v)
		}
	}
	row("id", j.ID)
	row("namespace", j.Namespace)
	row("queue", j.Queue)
	row("state", j.State)
	row("payload", cliPayloadText(j, 0))
	row("priority", strconv.FormatUint(uint64(j.Priority), 10))
	row("key", j.Key)
	if len(j.Tags) > 0 {
		keys := make([]string, 0, len(j.Tags))
		for k := range j.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + j.Tags[k]
		}
		row("tags", strings.Join(parts, " "))
	}
	row("created_at", cliFmtTime(j.CreatedAt))
	row("activate_at", cliFmtTime(j.ActivateAt))
	row("expire_at", cliFmtTime(j.ExpireAt))
	row("ttr", j.TTR.String())
	tries := strconv.FormatUint(uint64(j.Tries), 10)
	if j.Tries == 0 {
		tries = "0 (unlimited)"
	}
	row("tries", tries)
	row("attempt", strconv.FormatUint(uint64(j.Attempt), 10))
	row("receipt", j.Receipt)
	row("reserved_until", cliFmtTime(j.ReservedUntil))
	row("last_error", j.LastError)
	row("reply_to", j.ReplyTo)
	row("cron", j.Cron)
	if j.Result != nil {
		row("result", string(j.Result))
	} else if j.ResultBytes != nil {
		row("result", "base64:"+base64.StdEncoding.EncodeToString(j.ResultBytes))
	}
	return w.Flush()
}

func cliQueueDetail(q *client.Queue) error {
	w := cliTable()
	c := q.Config
	dur := func(d *time.Duration) string {
		if d == nil {
			return ""
		}
		return d.String()
	}
	u32 := func(v *uint32) string {
		if v == nil {
			return ""
		}
		return strconv.FormatUint(uint64(*v), 10)
	}
	state := "active"
	if q.Paused {
		state = "paused"
	}
	cliRow(w, "queue", q.Name)
	cliRow(w, "namespace", q.Namespace)
	cliRow(w, "state", state)
	cliRow(w, "counts", fmt.Sprintf("ready %d, delayed %d, blocked %d, reserved %d, dead %d, completed %d",
		q.Counts.Ready, q.Counts.Delayed, q.Counts.Blocked, q.Counts.Reserved, q.Counts.Dead, q.Counts.Completed))
	cliRow(w, "oldest_ready_age", q.OldestReadyAge.String())
	cliRow(w, "default_ttr", dur(c.DefaultTTR))
	cliRow(w, "default_tries", u32(c.DefaultTries))
	cliRow(w, "default_ttl", dur(c.DefaultTTL))
	cliRow(w, "default_priority", u32(c.DefaultPriority))
	if c.MaxJobs != nil {
		cliRow(w, "max_jobs", strconv.FormatUint(*c.MaxJobs, 10))
	}
	cliRow(w, "max_payload", u32(c.MaxPayload))
	cliRow(w, "dedup_window", dur(c.DedupWindow))
	cliRow(w, "retain_results", dur(c.RetainResults))
	if c.KeyMode != nil {
		cliRow(w, "key_mode", *c.KeyMode)
	}
	if b := c.Backoff; b != nil {
		f := func(p *float64) string {
			if p == nil {
				return "-"
			}
			return strconv.FormatFloat(*p, 'g', -1, 64)
		}
		cliRow(w, "backoff", fmt.Sprintf("initial %s, max %s, multiplier %s, jitter %s", dur(b.Initial), dur(b.Max), f(b.Multiplier), f(b.Jitter)))
	}
	return w.Flush()
}

// cliStatsTable is the stats view: one aligned row per queue.
func cliStatsTable(qs []client.Queue) error {
	w := cliTable()
	cliRow(w, "QUEUE", "STATE", "READY", "DELAYED", "BLOCKED", "RESERVED", "DEAD", "COMPLETED", "OLDEST_READY")
	n := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for _, q := range qs {
		state := "active"
		if q.Paused {
			state = "paused"
		}
		c := q.Counts
		cliRow(w, q.Name, state, n(c.Ready), n(c.Delayed), n(c.Blocked), n(c.Reserved), n(c.Dead), n(c.Completed), q.OldestReadyAge.String())
	}
	return w.Flush()
}

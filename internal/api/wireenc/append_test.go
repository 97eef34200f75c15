package wireenc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/wire"
)

// stdJSON is encoding/json as the HTTP API uses it: HTML escaping off, no
// trailing newline.
func stdJSON(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// pieces that strings are made of: every escape class encoding/json has
var pieces = []string{
	"", "a", "queue-1", " ", `"`, `\`, "/", "<", ">", "&", "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f",
	"é", "日本", "\u2028", "\u2029", "\u2027", "😀", "\xff", "\xe2\x80", "\xed\xa0\x80", "\xf0\x9f", "\ufffd", "\xc0\xaf",
}

func randString(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(6); n > 0; n-- {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

var jsonPayloads = []string{
	`{"to":"a@b.c","html":"<b>&</b>"}`, ` { "a" : [ 1 , 2 ,"x y" ] , "b":"\" \\ "} `, "\t\n[1,\r\n2]\n", `"\u2028 é"`,
	`null`, `true`, `-1.5e3`, `""`, `"  spaced  "`, `{"k":"\u003c"}`, `[]`, `{}`,
}

func randTime(r *rand.Rand) time.Time {
	switch r.IntN(6) {
	case 0:
		return time.Time{}
	case 1: // outside the four-digit years
		return time.Date(10000+r.IntN(5000), 1, 2, 3, 4, 5, 6, time.UTC)
	case 2:
		return time.Date(-r.IntN(100), 12, 31, 23, 59, 59, 999999999, time.UTC)
	case 3: // another zone: answers are UTC
		return time.Date(r.IntN(10000), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9), time.FixedZone("x", 3600*(r.IntN(27)-13)))
	default:
		return time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).UTC()
	}
}

func randJob(r *rand.Rand) engine.Job {
	j := engine.Job{
		ID: randString(r), Namespace: randString(r), Queue: randString(r),
		State:    engine.State(r.IntN(9)),
		Priority: r.Uint32(), Key: randString(r),
		CreatedAt: randTime(r), ActivateAt: randTime(r), ExpireAt: randTime(r), ReservedUntil: randTime(r),
		TTR:   time.Duration(r.Int64N(int64(100 * time.Hour))),
		Tries: r.Uint32(), Attempt: uint32(r.IntN(100)),
		Receipt: randString(r), LastError: randString(r), ReplyTo: randString(r), Notify: randString(r), Cron: randString(r),
	}
	if r.IntN(3) == 0 {
		j.Tags = map[string]string{}
		for n := r.IntN(5); n > 0; n-- {
			j.Tags[randString(r)] = randString(r)
		}
	}
	blob := func() ([]byte, bool) {
		switch r.IntN(5) {
		case 0:
			return []byte(jsonPayloads[r.IntN(len(jsonPayloads))]), true
		case 1: // flagged JSON that is not (base64 fallback)
			return []byte(randString(r) + "{"), true
		case 2:
			return nil, r.IntN(2) == 0
		default:
			b := make([]byte, r.IntN(40))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return b, false
		}
	}
	j.Data, j.PayloadJSON = blob()
	if r.IntN(3) == 0 {
		j.HasResult = true
		j.ResultData, j.ResultJSON = blob()
	}
	return j
}

// TestAppendJobMatchesEncodingJSON: the hand-written job encoder writes
// exactly encoding/json's bytes for the wire shape, on generated jobs.
func TestAppendJobMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		j := randJob(r)
		want := stdJSON(t, Job(&j))
		got := AppendJob(nil, &j)
		if !bytes.Equal(got, want) {
			t.Fatalf("job %d %+v\n got %s\nwant %s", i, j, got, want)
		}
	}
}

func TestAppendAnswersMatchEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		jobs := make([]engine.Job, r.IntN(4))
		for k := range jobs {
			jobs[k] = randJob(r)
		}
		if got, want := AppendJobPage(nil, jobs), stdJSON(t, wire.JobPage{Jobs: Jobs(jobs)}); !bytes.Equal(got, want) {
			t.Fatalf("page\n got %s\nwant %s", got, want)
		}
		ack := engine.AckResult{ID: randString(r), State: randString(r)}
		if r.IntN(2) == 0 {
			ack.NextID = randString(r)
		}
		wa := wire.AckAnswer{ID: ack.ID, State: ack.State, NextID: ack.NextID}
		if got, want := AppendAck(nil, ack, false, nil), stdJSON(t, wa); !bytes.Equal(got, want) {
			t.Fatalf("ack\n got %s\nwant %s", got, want)
		}
		if got, want := AppendAck(nil, ack, true, jobs), stdJSON(t, wire.AckTakeAnswer{AckAnswer: wa, Jobs: Jobs(jobs)}); !bytes.Equal(got, want) {
			t.Fatalf("ack+take\n got %s\nwant %s", got, want)
		}
		put := engine.PutResult{ID: randString(r), State: engine.State(r.IntN(9)), ActivateAt: randTime(r), Duplicate: r.IntN(2) == 0}
		if got, want := AppendPut(nil, put), stdJSON(t, Put(put)); !bytes.Equal(got, want) {
			t.Fatalf("put\n got %s\nwant %s", got, want)
		}
	}
}

func TestAppendTimeMatchesFormat(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 100000; i++ {
		tm := randTime(r)
		if got, want := string(appendTime(nil, tm)), tm.UTC().Format(wire.TimeLayout); got != want {
			t.Fatalf("%v: got %s want %s", tm, got, want)
		}
	}
}

// FuzzAppendString holds the string escaper to encoding/json on any input.
func FuzzAppendString(f *testing.F) {
	for _, p := range pieces {
		f.Add(p + "x" + p)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := appendString(nil, s), stdJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("%q\n got %s\nwant %s", s, got, want)
		}
	})
}

// FuzzAppendCompact holds the payload compaction to encoding/json's for
// every valid JSON text.
func FuzzAppendCompact(f *testing.F) {
	for _, p := range jsonPayloads {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, b); err != nil {
			t.Fatal(err)
		}
		if got := AppendCompact(nil, b); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%q\n got %s\nwant %s", b, got, want.Bytes())
		}
	})
}

func BenchmarkJobEncoding(b *testing.B) {
	j := engine.Job{ID: "01JD3W0Q8Z6M1N2P3Q4R5S6T7V", Namespace: "default", Queue: "emails", State: engine.StateReserved,
		Data: []byte(`"` + strings.Repeat("x", 100) + `"`), PayloadJSON: true, Priority: 1024,
		CreatedAt: time.Now(), ActivateAt: time.Now(), TTR: 30 * time.Second, Tries: 25, Attempt: 1,
		Receipt: "01JD3W1A2B3C4D5E6F7G8H9J0K", ReservedUntil: time.Now()}
	jobs := []engine.Job{j}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(wire.JobPage{Jobs: Jobs(jobs)})
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = AppendJobPage(buf[:0], jobs)
		}
	})
}

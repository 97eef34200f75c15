package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// BenchmarkDecodePut is the put route's body decoding (go test -bench
// DecodePut -benchmem): a 100-byte string payload, as the bench sends.
func BenchmarkDecodePut(b *testing.B) {
	body := []byte(`{"payload":"` + strings.Repeat("x", 100) + `"}`)
	lim := limits{maxPayload: 1 << 20}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := decodePut(body, lim); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAckTake(b *testing.B) {
	body := []byte(`{"receipt":"01JD3W1A2B3C4D5E6F7G8H9J0K","take":{"max":1,"ttr":"30s","wait":"5s"}}`)
	lim := limits{maxPayload: 1 << 20, maxWait: 60e9}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := decodeAckTake(body, "q", lim); err != nil {
			b.Fatal(err)
		}
	}
}

// putOnly is a Backend whose Put answers at once and records nothing, so
// BenchmarkPutRoute measures the HTTP API's own path.
type putOnly struct{ fakeBackend }

func (*putOnly) Put(context.Context, string, string, engine.PutRequest) (engine.PutResult, error) {
	return engine.PutResult{ID: "01JD3W1A2B3C4D5E6F7G8H9J0K", Seq: 42, State: engine.StateReady}, nil
}

// BenchmarkPutRoute is a put through the main listener's whole handler
// (panic recovery, body budget, routing, auth, request metrics, body read,
// decoding, answer), without net/http's connection handling and without
// the broker (go test -bench PutRoute -benchmem). The request and the
// recorder are made per iteration, so their allocations are counted too.
func BenchmarkPutRoute(b *testing.B) {
	s := New(&putOnly{}, Options{
		Logger:  slog.New(slog.DiscardHandler),
		Observe: func(string, int, time.Duration) {},
	})
	h := s.Main()
	body := []byte(`{"payload":"` + strings.Repeat("x", 100) + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/v1/ns/default/queues/q/jobs", bytes.NewReader(body))
		r.Host = "127.0.0.1:7070"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 201 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

package httpapi

import (
	"strings"
	"testing"
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

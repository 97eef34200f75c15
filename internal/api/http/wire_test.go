package httpapi

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/wire"
)

// The put body is read field by field (decode.go), not through wire.Put;
// this holds the two together: every field the client can send is one the
// server reads, and the other way round.
func TestPutFieldsMatchWire(t *testing.T) {
	var shape []string
	rt := reflect.TypeOf(wire.Put{})
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		shape = append(shape, name)
	}
	// "queue" is read by ack's next, "wait" by call (readPut's extra).
	server := append(slices.Clone(putFields), "queue", "wait")
	slices.Sort(shape)
	slices.Sort(server)
	if !slices.Equal(shape, server) {
		t.Fatalf("wire.Put has %v; the server reads %v", shape, server)
	}
}

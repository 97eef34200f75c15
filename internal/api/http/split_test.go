package httpapi

import (
	"strings"
	"testing"
)

func TestReadKnown(t *testing.T) {
	got, err := readKnown(strings.NewReader("abc"), 3)
	if err != nil || string(got) != "abc" {
		t.Fatalf("exact: %q %v", got, err)
	}
	if got, err := readKnown(strings.NewReader(""), 0); err != nil || len(got) != 0 {
		t.Fatalf("empty: %q %v", got, err)
	}
	if _, err := readKnown(strings.NewReader("ab"), 3); err == nil || !strings.Contains(err.Error(), "body of 2 bytes, its Content-Length says 3") {
		t.Fatalf("short: %v", err)
	}
	if _, err := readKnown(strings.NewReader("abcd"), 3); err == nil || !strings.Contains(err.Error(), "longer than its Content-Length 3") {
		t.Fatalf("long: %v", err)
	}
}

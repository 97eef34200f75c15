package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"
)

// waker readies each of the waiters by a channel send: in the report the
// waiters' wake-ups are attributed to it by name.
func waker(chans []chan struct{}) {
	for _, c := range chans {
		c <- struct{}{}
	}
}

func TestReportAttributesWakeUps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.out")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.Start(f); err != nil {
		t.Fatal(err)
	}
	const n = 64
	chans := make([]chan struct{}, n)
	var wg sync.WaitGroup
	for i := range chans {
		chans[i] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-chans[i]
		}()
	}
	// Let the waiters park first: a send to a receiver not yet waiting
	// does not wake it (the receiver wakes the sender instead).
	for range 1000 {
		runtime.Gosched()
	}
	waker(chans)
	wg.Wait()
	trace.Stop()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := report(path, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"s traced", "made runnable by", "created"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	wt, err := collect(in)
	if err != nil {
		t.Fatal(err)
	}
	woken := wt.waits["github.com/chronoq/chronoq/bench/schedwait.waker"]
	if len(woken) == 0 || len(woken) > n {
		t.Fatalf("%d wake-ups attributed to the waker, want 1..%d; causes: %v", len(woken), n, keys(wt.waits))
	}
	if got := len(wt.waits["created"]); got < n {
		t.Fatalf("%d goroutines started, want at least %d", got, n)
	}
}

func keys(m map[string][]time.Duration) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestReportRejectsWhatIsNotATrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not-a-trace")
	if err := os.WriteFile(path, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := report(path, &bytes.Buffer{}); err == nil {
		t.Fatal("a file that is not a trace was read without an error")
	}
}

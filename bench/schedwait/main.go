// Command schedwait reads Go runtime execution traces and prints how long
// goroutines waited for a CPU once they could run, grouped by what made
// them runnable. Under a closed-loop load that saturates the cores (1000
// producers + 1000 consumers on two cores) most of a request's latency is
// such waiting, in the server and in the load generator alike, and its
// spread is the latency's spread (docs/benchmarks.md, "where the HTTP
// tail is spent").
//
// Usage: go run ./bench/schedwait TRACE...
//
// A trace comes from the server's admin listener
// (curl -o F 'http://ADMIN/debug/pprof/trace?seconds=2') or from
// chronoq-bench --trace F. Causes:
//
//	network   the network poller: a socket became readable or writable
//	created   a new goroutine (a go statement)
//	preempted the goroutine was running and was preempted or yielded
//	syscall   returned from a blocking system call
//	garbage collector
//	          readied as a collection started or ended (the world was
//	          stopped)
//	FUNC      woken by another goroutine running FUNC (the first frame of
//	          its stack outside the runtime and the sync packages: the
//	          function that sent, closed, unlocked or signalled)
//
// Causes under 1 % of all the waiting are summed into one line.
//
// The network poller hands over at most 128 ready goroutines per poll;
// the "polls" line shows how many it handed over in each poll, and how
// far apart the polls were.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: schedwait TRACE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := report(path, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "schedwait: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

// pollGap separates two polls of the network poller: the goroutines one
// poll makes runnable are marked within microseconds of each other.
const pollGap = 20 * time.Microsecond

type runnable struct {
	at    trace.Time
	cause string
}

// poll is one poll of the network poller as the trace shows it: the
// goroutines it made runnable, the first and the last at its start and
// end.
type poll struct {
	start, end trace.Time
	n          int
}

// waiting is what a trace says about waiting for a CPU.
type waiting struct {
	span  time.Duration
	waits map[string][]time.Duration // by cause
	polls []poll
}

func report(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	wt, err := collect(f)
	if err != nil {
		return err
	}
	if wt.span <= 0 {
		// the averages below divide by it
		return errors.New("the trace spans no time: nothing to report")
	}
	fmt.Fprintf(w, "%s: %.2f s traced\n", path, wt.span.Seconds())
	wt.write(w)
	return nil
}

func collect(in io.Reader) (waiting, error) {
	r, err := trace.NewReader(in)
	if err != nil {
		return waiting{}, fmt.Errorf("read trace: %w", err)
	}
	pending := map[trace.GoID]runnable{}
	waits := map[string][]time.Duration{}
	var first, last trace.Time
	var polls []poll
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return waiting{}, fmt.Errorf("read trace: %w", err)
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		id := st.Resource.Goroutine()
		from, to := st.Goroutine()
		switch {
		case to == trace.GoRunnable:
			c := cause(ev, from)
			pending[id] = runnable{ev.Time(), c}
			if c == "network" {
				if n := len(polls); n > 0 && ev.Time().Sub(polls[n-1].end) < pollGap {
					polls[n-1].n++
					polls[n-1].end = ev.Time()
				} else {
					polls = append(polls, poll{ev.Time(), ev.Time(), 1})
				}
			}
		case from == trace.GoRunnable && to == trace.GoRunning:
			if p, ok := pending[id]; ok {
				delete(pending, id)
				waits[p.cause] = append(waits[p.cause], ev.Time().Sub(p.at))
			}
		case from == trace.GoRunnable:
			delete(pending, id)
		}
	}
	return waiting{last.Sub(first), waits, polls}, nil
}

// write prints the table and the polls line.
func (wt waiting) write(w io.Writer) {
	span, waits, polls := wt.span, wt.waits, wt.polls
	causes := make([]string, 0, len(waits))
	total := map[string]time.Duration{}
	for c, ws := range waits {
		causes = append(causes, c)
		for _, d := range ws {
			total[c] += d
		}
	}
	slices.SortFunc(causes, func(a, b string) int { return int(total[b] - total[a]) })
	// Causes under 1 % of all waiting (timers, the collector's workers,
	// connection set-up) are summed into one line.
	var all time.Duration
	for _, t := range total {
		all += t
	}
	const rest = "(all other causes)"
	for len(causes) > 1 && total[causes[len(causes)-1]]*100 < all {
		c := causes[len(causes)-1]
		causes = causes[:len(causes)-1]
		waits[rest] = append(waits[rest], waits[c]...)
		total[rest] += total[c]
	}
	if total[rest] > 0 {
		causes = append(causes, rest)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "made runnable by\twakes\twaiting (avg goroutines)\tp50 ms\tp90 ms\tp99 ms\tmax ms\t")
	for _, c := range causes {
		ws := waits[c]
		slices.Sort(ws)
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", c, len(ws),
			float64(total[c])/float64(span), ms(quantile(ws, 0.5)), ms(quantile(ws, 0.9)),
			ms(quantile(ws, 0.99)), ms(ws[len(ws)-1]))
	}
	tw.Flush()
	if len(polls) > 1 {
		gaps := make([]time.Duration, 0, len(polls)-1)
		sizes := make([]int, 0, len(polls))
		for i, p := range polls {
			sizes = append(sizes, p.n)
			if i > 0 {
				gaps = append(gaps, p.start.Sub(polls[i-1].start))
			}
		}
		slices.Sort(gaps)
		slices.Sort(sizes)
		fmt.Fprintf(w, "polls: %d, goroutines per poll p50 %d p90 %d max %d; apart p50 %.2f ms p90 %.2f ms max %.2f ms\n",
			len(polls), sizes[len(sizes)/2], sizes[len(sizes)*9/10], sizes[len(sizes)-1],
			ms(quantile(gaps, 0.5)), ms(quantile(gaps, 0.9)), ms(gaps[len(gaps)-1]))
	}
}

// cause names what made a goroutine runnable.
func cause(ev trace.Event, from trace.GoState) string {
	switch from {
	case trace.GoNotExist:
		return "created"
	case trace.GoRunning:
		return "preempted"
	case trace.GoSyscall:
		return "syscall"
	}
	if ev.Goroutine() == trace.NoGoroutine {
		return "network"
	}
	for fr := range ev.Stack().Frames() {
		// A collection that starts or ends stops the world and then
		// readies every goroutine it stopped, from whatever allocation
		// triggered it.
		if strings.HasPrefix(fr.Func, "runtime.gc") {
			return "garbage collector"
		}
		if !strings.HasPrefix(fr.Func, "runtime.") && !strings.HasPrefix(fr.Func, "sync.") &&
			!strings.HasPrefix(fr.Func, "internal/") {
			return fr.Func
		}
	}
	return "runtime"
}

func quantile(s []time.Duration, q float64) time.Duration {
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

package beanstalk_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bs "github.com/beanstalkd/go-beanstalk"

	"github.com/chronoq/chronoq/internal/api/beanstalk"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/wal"
)

// The throughput comparison of the issue: put and put+reserve+delete with
// 8 and 64 go-beanstalk connections and 100-byte bodies (and put16: 16
// puts pipelined per write over a raw connection), chronoq (fsync
// before every answer, group commit) against beanstalkd -b DIR -f0
// (fsync every write) and beanstalkd without a binlog, each server a
// separate process on a fresh directory, the three run one after the
// other, round after round. It takes minutes, so it runs only when asked:
//
//	CHRONOQ_BEANSTALK_BENCH=1 go test -run TestBenchmarkAB -v -timeout 30m ./test/beanstalk/
//
// CHRONOQ_BEANSTALK_BENCH_SECS sets the seconds per run (default 10),
// CHRONOQ_BEANSTALK_BENCH_ROUNDS the rounds (default 3),
// CHRONOQ_BEANSTALK_BENCH_{SERVERS,WORK,CONNS} comma lists of what to run,
// and CHRONOQ_BIN a chronoq binary to run as `chronoq beanstalkd -b DIR`
// (default: this test binary serves, see TestBenchServerProcess).

func TestBenchmarkAB(t *testing.T) {
	if os.Getenv("CHRONOQ_BEANSTALK_BENCH") == "" {
		t.Skip("set CHRONOQ_BEANSTALK_BENCH=1 to run the throughput comparison (minutes)")
	}
	if _, err := exec.LookPath("beanstalkd"); err != nil {
		t.Skip("beanstalkd is not installed")
	}
	secs := envInt("CHRONOQ_BEANSTALK_BENCH_SECS", 10)
	rounds := envInt("CHRONOQ_BEANSTALK_BENCH_ROUNDS", 3)
	servers := filter([]string{"chronoq", "beanstalkd -f0", "beanstalkd (no binlog)", "chronoq (no -b)"}, os.Getenv("CHRONOQ_BEANSTALK_BENCH_SERVERS"))
	type config struct {
		work  string
		conns int
	}
	var configs []config
	for _, w := range filter([]string{"put", "put+reserve+delete", "put16"}, os.Getenv("CHRONOQ_BEANSTALK_BENCH_WORK")) {
		for _, n := range filter([]string{"8", "64"}, os.Getenv("CHRONOQ_BEANSTALK_BENCH_CONNS")) {
			conns, _ := strconv.Atoi(n)
			configs = append(configs, config{w, conns})
		}
	}
	results := map[string][]float64{}
	for r := 1; r <= rounds; r++ {
		for _, cfg := range configs {
			for _, srv := range servers {
				addr, stop := benchServer(t, srv)
				rate := drive(t, addr, cfg.work, cfg.conns, time.Duration(secs)*time.Second)
				stop()
				key := fmt.Sprintf("%-20s %2d conns  %s", cfg.work, cfg.conns, srv)
				results[key] = append(results[key], rate)
				t.Logf("round %d  %s: %.0f jobs/s", r, key, rate)
			}
		}
	}
	t.Logf("medians over %d rounds of %ds (jobs/s; runs in order):", rounds, secs)
	has := func(s string) bool { return slices.Contains(servers, s) }
	for _, cfg := range configs {
		med := map[string]float64{}
		for _, srv := range servers {
			key := fmt.Sprintf("%-20s %2d conns  %s", cfg.work, cfg.conns, srv)
			med[srv] = median(results[key])
			t.Logf("  %s: %8.0f  %v", key, med[srv], rounded(results[key]))
		}
		if has("chronoq") && has("beanstalkd -f0") && has("beanstalkd (no binlog)") {
			t.Logf("  %-20s %2d conns  chronoq / beanstalkd -f0 = %.1fx, chronoq / beanstalkd (no binlog) = %.2fx",
				cfg.work, cfg.conns, med["chronoq"]/med["beanstalkd -f0"], med["chronoq"]/med["beanstalkd (no binlog)"])
		}
		if has("chronoq (no -b)") && has("beanstalkd (no binlog)") {
			t.Logf("  %-20s %2d conns  chronoq (no -b) / beanstalkd (no binlog) = %.2fx",
				cfg.work, cfg.conns, med["chronoq (no -b)"]/med["beanstalkd (no binlog)"])
		}
	}
}

// filter keeps the items named in a comma-separated list (all if empty).
func filter(items []string, only string) []string {
	if only == "" {
		return items
	}
	var out []string
	for _, it := range items {
		if slices.Contains(strings.Split(only, ","), it) {
			out = append(out, it)
		}
	}
	return out
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func rounded(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// benchServer starts one server process on a fresh directory.
func benchServer(t *testing.T, which string) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	var cmd *exec.Cmd
	switch {
	case strings.HasPrefix(which, "chronoq") && os.Getenv("CHRONOQ_BIN") != "":
		args := []string{"beanstalkd", "-l", "127.0.0.1", "-p", port, "-b", dir}
		if which != "chronoq" {
			args = args[:5]
		}
		cmd = exec.Command(os.Getenv("CHRONOQ_BIN"), args...)
	case strings.HasPrefix(which, "chronoq"):
		sync := "always"
		if which != "chronoq" {
			sync = "never"
		}
		cmd = exec.Command(os.Args[0], "-test.run=^TestBenchServerProcess$")
		cmd.Env = append(os.Environ(), "CHRONOQ_BENCH_SERVE=127.0.0.1:"+port+","+dir+","+sync)
	case which == "beanstalkd -f0":
		cmd = exec.Command("beanstalkd", "-l", "127.0.0.1", "-p", port, "-b", dir, "-f0")
	default:
		cmd = exec.Command("beanstalkd", "-l", "127.0.0.1", "-p", port)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + port
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > 10*time.Second {
			cmd.Process.Kill()
			t.Fatalf("%s did not start", which)
		}
	}
	return addr, func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
}

// drive runs the workload on n connections for d after a one-second
// warm-up and answers completed jobs per second.
func drive(t *testing.T, addr, work string, n int, d time.Duration) float64 {
	t.Helper()
	body := []byte(strings.Repeat("x", 100))
	var done atomic.Int64
	var counting atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := 0; i < n; i++ {
		if work == "put16" {
			// 16 puts in one write, then their 16 answers: a client
			// that pipelines (go-beanstalk does not).
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			batch := []byte(strings.Repeat("put 1024 0 60 100\r\n"+string(body)+"\r\n", 16))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				r := bufio.NewReader(nc)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := nc.Write(batch); err != nil {
						failed.Store(err)
						return
					}
					for range 16 {
						if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "INSERTED ") {
							failed.Store(fmt.Errorf("answer %q: %v", l, err))
							return
						}
					}
					if counting.Load() {
						done.Add(16)
					}
				}
			}()
			continue
		}
		c, err := bs.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			ts := bs.NewTubeSet(c, "default")
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Put(body, 1024, 0, time.Minute); err != nil {
					failed.Store(err)
					return
				}
				if work != "put" {
					id, _, err := ts.Reserve(10 * time.Second)
					if err == nil {
						err = c.Delete(id)
					}
					if err != nil {
						failed.Store(err)
						return
					}
				}
				if counting.Load() {
					done.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	counting.Store(true)
	start := time.Now()
	time.Sleep(d)
	counting.Store(false)
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("%s on %s: %v", work, addr, err)
	}
	return float64(done.Load()) / elapsed.Seconds()
}

// TestBenchServerProcess is the chronoq server of the comparison when no
// CHRONOQ_BIN is given: the test binary re-run as a server process, with
// the settings of `chronoq beanstalkd -b DIR` (fsync before every answer)
// or, for "chronoq (no -b)", of `chronoq beanstalkd` (no fsync, as
// beanstalkd without a binlog keeps nothing).
func TestBenchServerProcess(t *testing.T) {
	spec := os.Getenv("CHRONOQ_BENCH_SERVE")
	if spec == "" {
		t.Skip("runs only as the benchmark's server process")
	}
	parts := strings.Split(spec, ",")
	addr, dir, policy := parts[0], parts[1], wal.SyncAlways
	if parts[2] == "never" {
		policy = wal.SyncNever // `chronoq beanstalkd` without -b
	}
	b, err := broker.Open(broker.Options{Dir: dir, Logger: quiet, WAL: wal.Options{Sync: policy, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	srv := beanstalk.New(b, beanstalk.Options{Logger: quiet})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	if path := os.Getenv("CHRONOQ_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Close()
	b.Close()
}

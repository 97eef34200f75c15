// Package cluster_test runs three real chronoq processes on 127.0.0.1 as a
// cluster and kills the leader with SIGKILL under load (docs/cluster.md).
package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "chronoq-cluster-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath, err = testbin.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type node struct {
	id                    uint64
	dir                   string
	http, admin, peerAddr string
	cmd                   *exec.Cmd
	out                   *testbin.Output
	done                  chan struct{}
	down                  bool // guarded by liveMu
}

type clusterT struct {
	t     *testing.T
	nodes []*node
	peers string
}

func startCluster(t *testing.T) *clusterT {
	c := &clusterT{t: t}
	var peers []string
	for id := uint64(1); id <= 3; id++ {
		n := &node{id: id, dir: filepath.Join(t.TempDir(), "data"), http: testbin.FreeAddr(t), admin: testbin.FreeAddr(t), peerAddr: testbin.FreeAddr(t)}
		c.nodes = append(c.nodes, n)
		peers = append(peers, fmt.Sprintf("%d=%s", id, n.peerAddr))
	}
	c.peers = strings.Join(peers, ",")
	for _, n := range c.nodes {
		c.start(n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.kill(n)
			if t.Failed() && n.out != nil {
				out := n.out.String()
				t.Logf("node %d output (last 8 KiB):\n%s", n.id, out[max(0, len(out)-8<<10):])
			}
		}
	})
	return c
}

func (c *clusterT) start(n *node, extra ...string) {
	c.t.Helper()
	n.out = &testbin.Output{}
	args := append([]string{"serve", "--data", n.dir, "--http", n.http, "--admin", n.admin, "--beanstalk", "",
		"--node-id", strconv.FormatUint(n.id, 10), "--peers", c.peers, "--log-async=false"}, extra...)
	n.cmd = exec.Command(binPath, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(n.cmd, n.done)
}

func (c *clusterT) kill(n *node) {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
	n.cmd = nil
}

type status struct {
	ID      uint64 `json:"id"`
	Role    string `json:"role"`
	Term    uint64 `json:"term"`
	Leader  uint64 `json:"leader"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
}

var client = &http.Client{Timeout: 3 * time.Second}

func (n *node) status() (status, error) { return adminStatus[status](n) }

// adminStatus reads n's /cluster/status into T (the tests' views of it
// differ in the fields they need).
func adminStatus[T any](n *node) (T, error) {
	var st T
	resp, err := client.Get("http://" + n.admin + "/cluster/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader waits until the live nodes agree on a leader among them.
func (c *clusterT) leader(within time.Duration) *node {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.cmd == nil {
				continue
			}
			if st, err := n.status(); err == nil && st.Role == "Leader" {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, n := range c.nodes {
		c.t.Logf("node %d output:\n%s", n.id, n.out.String())
	}
	c.t.Fatalf("no leader within %s", within)
	return nil
}

func post(addr, path string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	resp, err := client.Post("http://"+addr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestKillLeaderUnderLoad: producers put jobs with client ids through any
// node, consumers take and ack through any node, and the leader is killed
// with SIGKILL, CHRONOQ_CLUSTER_KILLS times (default 3). Every acknowledged
// put must be present at the end unless acknowledged as acked, no
// acknowledged ack may come back, and writes must succeed again within 5 s
// of each kill. Meanwhile keyed producers and consumers check per-key FIFO
// order (startKeyedLoad).
func TestKillLeaderUnderLoad(t *testing.T) {
	kills := envInt("CHRONOQ_CLUSTER_KILLS", 3)
	c := startCluster(t)
	first := c.leader(15 * time.Second)
	// chronoq cluster status --json, asked of the leader, names it and
	// lists every member.
	out, err := exec.Command(binPath, "cluster", "status", "--json", "--admin-url", "http://"+first.admin).CombinedOutput()
	if err != nil {
		t.Fatalf("chronoq cluster status: %v\n%s", err, out)
	}
	var cs struct {
		Leader uint64 `json:"leader"`
		Nodes  []struct {
			ID   uint64 `json:"id"`
			Role string `json:"role"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(out, &cs); err != nil || cs.Leader != first.id || len(cs.Nodes) != 3 {
		t.Fatalf("chronoq cluster status --json: %s (err %v), want leader %d and 3 nodes", out, err, first.id)
	}

	var (
		mu        sync.Mutex
		putOK     = map[string]bool{}
		ackOK     = map[string]bool{}
		ackTried  = map[string]bool{}
		seq       atomic.Int64
		failovers []time.Duration
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	pick := func(i int) *node {
		live := c.liveSnapshot()
		if len(live) == 0 {
			return nil
		}
		return live[i%len(live)]
	}
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				n := pick(p + i)
				if n == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				id := fmt.Sprintf("p%d-%d", p, seq.Add(1))
				code, _, err := post(n.http, "/v1/ns/default/queues/q/jobs", map[string]any{"id": id, "payload": map[string]any{"n": id}})
				if err == nil && (code == 201 || code == 200) {
					mu.Lock()
					putOK[id] = true
					mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}(p)
	}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				n := pick(w + i)
				if n == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				code, body, err := post(n.http, "/v1/ns/default/queues/q/take", map[string]any{"max": 4, "ttr": "60s"})
				if err != nil || code != 200 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				var res struct {
					Jobs []struct{ ID, Receipt string } `json:"jobs"`
				}
				json.Unmarshal(body, &res)
				for _, j := range res.Jobs {
					n := pick(w + i + 1)
					if n == nil {
						break
					}
					mu.Lock()
					ackTried[j.ID] = true
					mu.Unlock()
					code, _, err := post(n.http, "/v1/ns/default/queues/q/jobs/"+j.ID+"/ack", map[string]any{"receipt": j.Receipt})
					if err == nil && code == 200 {
						mu.Lock()
						ackOK[j.ID] = true
						mu.Unlock()
					}
				}
			}
		}(w)
	}

	fifo := startKeyedLoad(ctx, &wg, pick)

	for k := 0; k < kills; k++ {
		time.Sleep(700 * time.Millisecond)
		lead := c.leader(10 * time.Second)
		c.setLive(lead, false)
		c.kill(lead)
		killed := time.Now()
		// The first write acknowledged after the kill.
		var took time.Duration
		for i := 0; ; i++ {
			n := pick(i)
			code, _, err := post(n.http, "/v1/ns/default/queues/probe/jobs", map[string]any{"payload": k})
			if err == nil && code == 201 {
				took = time.Since(killed)
				break
			}
			if time.Since(killed) > 5*time.Second {
				cancel()
				wg.Wait()
				t.Fatalf("kill %d: no write succeeded within 5 s of killing node %d", k+1, lead.id)
			}
			time.Sleep(5 * time.Millisecond)
		}
		failovers = append(failovers, took)
		c.start(lead)
		c.setLive(lead, true)
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()

	// Converge: every node applies the same log.
	deadline := time.Now().Add(15 * time.Second)
	for {
		var applied []uint64
		for _, n := range c.nodes {
			if st, err := n.status(); err == nil && st.Leader != 0 {
				applied = append(applied, st.Applied)
			}
		}
		if len(applied) == 3 && applied[0] == applied[1] && applied[1] == applied[2] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes did not converge: applied %v", applied)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(putOK) == 0 || len(ackOK) == 0 {
		t.Fatalf("no load ran: %d puts, %d acks acknowledged", len(putOK), len(ackOK))
	}
	// Asked through each node in turn (followers forward to the leader,
	// so this checks the leader's state and every forwarding path; the
	// replicas' equality is what the simulation in internal/cluster
	// checks).
	for _, n := range c.nodes {
		for id := range putOK {
			resp, err := client.Get("http://" + n.http + "/v1/ns/default/queues/q/jobs/" + id)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			switch {
			case ackOK[id] && resp.StatusCode != 404:
				t.Errorf("node %d: acknowledged ack of %s came back (status %d)", n.id, id, resp.StatusCode)
			case !ackOK[id] && resp.StatusCode != 200 && resp.StatusCode != 404:
				t.Errorf("node %d: job %s: status %d", n.id, id, resp.StatusCode)
			case !ackTried[id] && resp.StatusCode == 404:
				// Only an ack may remove a job (one whose answer was
				// lost in a kill counts); any other removal is a lost
				// write.
				t.Errorf("node %d: acknowledged put %s is gone", n.id, id)
			}
		}
	}
	fifo.check(t)
	slices.Sort(failovers)
	p50 := failovers[len(failovers)/2]
	p99 := failovers[min(len(failovers)-1, len(failovers)*99/100)]
	t.Logf("%d kills: %d puts and %d acks acknowledged; failover (kill -9 → first acknowledged write) p50 %s, p99 %s, max %s, all %v",
		kills, len(putOK), len(ackOK), p50.Round(time.Millisecond), p99.Round(time.Millisecond), failovers[len(failovers)-1].Round(time.Millisecond), failovers)
}

var liveMu sync.Mutex

func (c *clusterT) liveSnapshot() []*node {
	liveMu.Lock()
	defer liveMu.Unlock()
	var out []*node
	for _, n := range c.nodes {
		if !n.down {
			out = append(out, n)
		}
	}
	return out
}

func (c *clusterT) setLive(n *node, up bool) {
	liveMu.Lock()
	n.down = !up
	liveMu.Unlock()
}

// loadT runs clients that put, take and ack through every node, and
// records every error they see.
type loadT struct {
	mu      sync.Mutex
	errs    []string
	dropped int
	ok      atomic.Int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startLoad starts six clients; each round puts a job through one node,
// takes one and acks it, moving to the next node every round. Nodes in
// skip (set while one is restarting) are not used.
func startLoad(c *clusterT, skip func(n *node) bool) *loadT {
	l := &loadT{}
	var seq atomic.Int64
	fail := func(what string, code int, body []byte, err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.errs) < 20 {
			l.errs = append(l.errs, fmt.Sprintf("%s: %d %s %v", what, code, bytes.TrimSpace(body), err))
		} else {
			l.dropped++
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for w := 0; w < 6; w++ {
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				n := c.nodes[(w+i)%3]
				if skip != nil && skip(n) {
					continue
				}
				via := " via node " + strconv.FormatUint(n.id, 10)
				id := fmt.Sprintf("h%d-%d", w, seq.Add(1))
				code, body, err := post(n.http, "/v1/ns/default/queues/hq/jobs", map[string]any{"id": id, "payload": 1})
				if err != nil || code != 201 {
					fail("put "+id+via, code, body, err)
					continue
				}
				code, body, err = post(n.http, "/v1/ns/default/queues/hq/take", map[string]any{"max": 1, "ttr": "60s"})
				if err != nil || code != 200 {
					fail("take"+via, code, body, err)
					continue
				}
				var res struct {
					Jobs []struct{ ID, Receipt string } `json:"jobs"`
				}
				json.Unmarshal(body, &res)
				for _, j := range res.Jobs {
					code, body, err := post(n.http, "/v1/ns/default/queues/hq/jobs/"+j.ID+"/ack", map[string]any{"receipt": j.Receipt})
					if err != nil || code != 200 {
						fail("ack "+j.ID+via, code, body, err)
					}
				}
				l.ok.Add(1)
			}
		}(w)
	}
	return l
}

// stop ends the load and fails the test if any client saw an error.
func (l *loadT) stop(t *testing.T, what string) {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	if l.ok.Load() == 0 {
		t.Fatal("no load ran")
	}
	if len(l.errs) > 0 {
		t.Fatalf("%d client errors during %s (%d put→take→ack rounds succeeded); first ones:\n%s",
			len(l.errs)+l.dropped, what, l.ok.Load(), strings.Join(l.errs, "\n"))
	}
	t.Logf("%s: %d put→take→ack rounds, no client error", what, l.ok.Load())
}

// TestTransferLeaderUnderLoad: clients putting, taking and acking through
// every node see no error while leadership moves around
// (CHRONOQ_CLUSTER_TRANSFERS times, default 6).
func TestTransferLeaderUnderLoad(t *testing.T) {
	c := startCluster(t)
	c.leader(15 * time.Second)
	c.settled(10 * time.Second)
	l := startLoad(c, nil)
	transfers := envInt("CHRONOQ_CLUSTER_TRANSFERS", 6)
	for k := 0; k < transfers; k++ {
		time.Sleep(400 * time.Millisecond)
		lead := c.settled(10 * time.Second)
		to := c.nodes[int(lead.id)%3]
		if code, body, err := post(lead.admin, "/cluster/transfer-leader", map[string]any{"to": to.id}); err != nil || code != 200 {
			l.cancel()
			l.wg.Wait()
			t.Fatalf("transfer %d to node %d: %d %s %v", k+1, to.id, code, body, err)
		}
	}
	time.Sleep(400 * time.Millisecond)
	l.stop(t, fmt.Sprintf("%d leadership transfers", transfers))
}

// TestRollingRestartUnderLoad: the leader is stopped with SIGTERM and
// started again, three times, while clients work through the other
// nodes: SIGTERM hands leadership over first, so they see no error.
func TestRollingRestartUnderLoad(t *testing.T) {
	c := startCluster(t)
	c.leader(15 * time.Second)
	c.settled(10 * time.Second)
	var restarting atomic.Uint64
	l := startLoad(c, func(n *node) bool { return restarting.Load() == n.id })
	for k := 0; k < 3; k++ {
		time.Sleep(400 * time.Millisecond)
		lead := c.settled(10 * time.Second)
		// A client stops using a node it is told is going away (a load
		// balancer draining it).
		restarting.Store(lead.id)
		time.Sleep(50 * time.Millisecond)
		lead.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-lead.done:
		case <-time.After(15 * time.Second):
			l.cancel()
			l.wg.Wait()
			t.Fatalf("node %d did not stop on SIGTERM", lead.id)
		}
		lead.cmd = nil
		c.start(lead)
		c.settled(10 * time.Second)
		restarting.Store(0)
	}
	time.Sleep(400 * time.Millisecond)
	l.stop(t, "3 rolling restarts of the leader")
}

// keyedLoad puts jobs of a few keys, each key's jobs one after the other
// with increasing sequence numbers, and takes and acks them, recording
// the order in which each job is first delivered.
type keyedLoad struct {
	mu        sync.Mutex
	delivered map[int][]int // key → sequence numbers in first-delivery order
	seen      map[string]bool
	acked     map[int]int // key → highest sequence number whose put was acknowledged
}

const fifoKeys = 4

// startKeyedLoad starts one producer per key and two consumers on queue
// kq (key_mode strict, the default: a key's next job is ready only once
// the one before it is acked). A put is retried with the same id and
// idempotency key until it is acknowledged, so each key's jobs enter the
// queue in sequence order; an ack is retried with its receipt for up to
// 5 s, so a lost answer does not hold the key for the TTR.
func startKeyedLoad(ctx context.Context, wg *sync.WaitGroup, pick func(int) *node) *keyedLoad {
	l := &keyedLoad{delivered: map[int][]int{}, seen: map[string]bool{}, acked: map[int]int{}}
	for k := 0; k < fifoKeys; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for seq, i := 1, 0; ctx.Err() == nil; i++ {
				n := pick(k + i)
				if n == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				id := fmt.Sprintf("k%d-%d", k, seq)
				code, _, err := post(n.http, "/v1/ns/default/queues/kq/jobs", map[string]any{"id": id, "idempotency_key": id,
					"key": fmt.Sprintf("key-%d", k), "payload": map[string]int{"key": k, "seq": seq}})
				if err != nil || code != 201 && code != 200 {
					time.Sleep(20 * time.Millisecond)
					continue // the same id again
				}
				l.mu.Lock()
				l.acked[k] = seq
				l.mu.Unlock()
				seq++
				time.Sleep(5 * time.Millisecond)
			}
		}(k)
	}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				n := pick(w + i)
				if n == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				code, body, err := post(n.http, "/v1/ns/default/queues/kq/take", map[string]any{"max": fifoKeys, "ttr": "60s"})
				if err != nil || code != 200 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				var res struct {
					Jobs []struct {
						ID, Receipt string
						Payload     struct{ Key, Seq int }
					} `json:"jobs"`
				}
				json.Unmarshal(body, &res)
				l.mu.Lock()
				for _, j := range res.Jobs {
					if !l.seen[j.ID] {
						l.seen[j.ID] = true
						l.delivered[j.Payload.Key] = append(l.delivered[j.Payload.Key], j.Payload.Seq)
					}
				}
				l.mu.Unlock()
				for _, j := range res.Jobs {
					for try, until := 0, time.Now().Add(5*time.Second); time.Now().Before(until); try++ {
						n := pick(w + i + try)
						if n == nil {
							break
						}
						code, _, err := post(n.http, "/v1/ns/default/queues/kq/jobs/"+j.ID+"/ack", map[string]any{"receipt": j.Receipt})
						if err == nil && (code == 200 || code == 404) {
							break
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
			}
		}(w)
	}
	return l
}

// check fails the test unless every key's jobs were first delivered in
// sequence order with none skipped: 1, 2, 3, ...
func (l *keyedLoad) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := fifoViolation(l.delivered); err != nil {
		t.Error(err)
	}
	total := 0
	for _, got := range l.delivered {
		total += len(got)
	}
	if total == 0 {
		t.Error("no keyed job was delivered")
	}
	t.Logf("per-key FIFO: %d keyed jobs delivered in order over %d keys (puts acknowledged per key: %v)", total, fifoKeys, l.acked)
}

func fifoViolation(delivered map[int][]int) error {
	for k, got := range delivered {
		for i, seq := range got {
			if seq != i+1 {
				return fmt.Errorf("key %d: jobs first delivered in the order %v: per-key FIFO broken at position %d (seq %d)", k, got, i+1, seq)
			}
		}
	}
	return nil
}

// The FIFO check catches a job delivered ahead of an older one of its
// key, and one skipped.
func TestFIFOViolation(t *testing.T) {
	if err := fifoViolation(map[int][]int{0: {1, 2, 3}, 1: {1}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]int{{1, 3, 2}, {2}, {1, 2, 4}} {
		if fifoViolation(map[int][]int{0: {1, 2}, 1: bad}) == nil {
			t.Errorf("%v passed", bad)
		}
	}
}

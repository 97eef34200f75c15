package cluster_test

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
)

// linkProxy forwards one direction of peer traffic (node from dials node
// to through it) and can be cut: a cut closes its connections and refuses
// new ones, as a network partition would.
type linkProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newLinkProxy(t *testing.T, target string) *linkProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *linkProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

func (p *linkProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

func (p *linkProxy) close() {
	p.ln.Close()
	p.setCut(true)
	p.wg.Wait()
}

// TestPartitionedLeaderCommitsNothing cuts the leader off from both peers
// (every peer link goes through a loopback proxy): the majority elects a
// new leader and takes writes; the old leader commits nothing and answers
// writes with 503, never hanging; after healing every node converges.
func TestPartitionedLeaderCommitsNothing(t *testing.T) {
	c := &clusterT{t: t}
	for id := uint64(1); id <= 3; id++ {
		c.nodes = append(c.nodes, &node{id: id, dir: t.TempDir() + "/data", http: freeAddr(t), admin: freeAddr(t), peerAddr: freeAddr(t)})
	}
	// links[from][to] carries from's messages to to.
	links := map[uint64]map[uint64]*linkProxy{}
	views := map[uint64]string{}
	for _, a := range c.nodes {
		links[a.id] = map[uint64]*linkProxy{}
		var peers []string
		for _, b := range c.nodes {
			addr := b.peerAddr
			if a.id != b.id {
				links[a.id][b.id] = newLinkProxy(t, b.peerAddr)
				addr = links[a.id][b.id].ln.Addr().String()
			}
			peers = append(peers, fmt.Sprintf("%d=%s", b.id, addr))
		}
		views[a.id] = strings.Join(peers, ",")
	}
	for _, n := range c.nodes {
		c.peers = views[n.id]
		c.start(n, "--peer-addr", n.peerAddr)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.kill(n)
		}
	})
	old := c.leader(15 * time.Second)
	if code, _, err := post(old.http, "/v1/ns/default/queues/q/jobs", map[string]any{"id": "before", "payload": 1}); err != nil || code != 201 {
		t.Fatalf("put before the partition: %d %v", code, err)
	}
	cut := func(on bool) {
		for a, m := range links {
			for b, p := range m {
				if a == old.id || b == old.id {
					p.setCut(on)
				}
			}
		}
	}
	cut(true)
	oldSt, _ := old.status()
	// The majority elects a leader among itself and takes writes.
	var next *node
	deadline := time.Now().Add(10 * time.Second)
	for next == nil && time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.id == old.id {
				continue
			}
			if st, err := n.status(); err == nil && st.Role == "Leader" {
				next = n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if next == nil {
		for _, n := range c.nodes {
			st, err := n.status()
			t.Logf("node %d: %+v %v; output:\n%s", n.id, st, err, n.out.String())
		}
		t.Fatal("the majority elected no leader")
	}
	for i := 0; i < 20; i++ {
		if code, body, err := post(next.http, "/v1/ns/default/queues/q/jobs", map[string]any{"id": fmt.Sprintf("major-%d", i), "payload": i}); err != nil || code != 201 {
			t.Fatalf("put on the majority: %d %s %v", code, body, err)
		}
	}
	// The new leader's metrics say so, and count the commits.
	resp, err := client.Get("http://" + next.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var mb strings.Builder
	io.Copy(&mb, resp.Body)
	resp.Body.Close()
	metricsText := mb.String()
	for _, want := range []string{"chronoq_cluster_is_leader 1", fmt.Sprintf("chronoq_cluster_leader %d", next.id), "chronoq_cluster_follower_lag_entries{node=", "chronoq_cluster_leader_changes_total "} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("metrics of the new leader lack %q", want)
		}
	}
	if strings.Contains(metricsText, "chronoq_cluster_commit_seconds_count 0\n") || !strings.Contains(metricsText, "chronoq_cluster_commit_seconds_count") {
		t.Errorf("the new leader's commit latency histogram counted nothing")
	}
	// The old leader answers writes with 503 promptly, and commits
	// nothing while cut off.
	for i := 0; i < 5; i++ {
		began := time.Now()
		code, body, err := post(old.http, "/v1/ns/default/queues/q/jobs", map[string]any{"id": fmt.Sprintf("minor-%d", i), "payload": i})
		if err != nil {
			t.Fatalf("put on the cut-off node: %v (after %s)", err, time.Since(began))
		}
		if code != 503 {
			t.Fatalf("put on the cut-off node: %d %s", code, body)
		}
	}
	if st, _ := old.status(); st.Commit != oldSt.Commit {
		t.Fatalf("the cut-off node's commit index moved from %d to %d", oldSt.Commit, st.Commit)
	}
	// Healed, everyone converges on the majority's log.
	cut(false)
	deadline = time.Now().Add(15 * time.Second)
	for {
		var applied []uint64
		var leaders []uint64
		for _, n := range c.nodes {
			if st, err := n.status(); err == nil {
				applied, leaders = append(applied, st.Applied), append(leaders, st.Leader)
			}
		}
		if len(applied) == 3 && applied[0] == applied[1] && applied[1] == applied[2] && leaders[0] == leaders[1] && leaders[1] == leaders[2] && leaders[0] != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no convergence after healing: applied %v, leaders %v", applied, leaders)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, n := range c.nodes {
		for i := 0; i < 20; i++ {
			resp, err := client.Get(fmt.Sprintf("http://%s/v1/ns/default/queues/q/jobs/major-%d", n.http, i))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("node %d: major-%d: %d", n.id, i, resp.StatusCode)
			}
		}
		for i := 0; i < 5; i++ {
			resp, err := client.Get(fmt.Sprintf("http://%s/v1/ns/default/queues/q/jobs/minor-%d", n.http, i))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 404 {
				t.Fatalf("node %d: a write refused during the partition exists (minor-%d: %d)", n.id, i, resp.StatusCode)
			}
		}
	}
}

// freeAddr: testbin.FreeAddr says why not a closed ":0" listener (the
// proxies listen on ":0" after the nodes' ports are chosen).
func freeAddr(t *testing.T) string { return testbin.FreeAddr(t) }

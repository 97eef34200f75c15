package cluster_test

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRestartAndCrashWholeCluster stops all three nodes gracefully and
// starts them again, then kills all three with SIGKILL under load and
// starts them again: every acknowledged put is there both times (the
// raft log, replayed from each node's WAL, is the only state).
func TestRestartAndCrashWholeCluster(t *testing.T) {
	c := startCluster(t)
	lead := c.leader(15 * time.Second)
	// chronoq cluster transfer-leader moves leadership on demand.
	to := c.nodes[int(lead.id)%3]
	if out, err := exec.Command(binPath, "cluster", "transfer-leader", fmt.Sprint(to.id), "--admin-url", "http://"+lead.admin).CombinedOutput(); err != nil {
		t.Fatalf("chronoq cluster transfer-leader %d: %v\n%s", to.id, err, out)
	}
	if st, err := to.status(); err != nil || st.Role != "Leader" {
		t.Fatalf("node %d after transfer-leader: %+v %v", to.id, st, err)
	}
	out, err := exec.Command(binPath, "cluster", "transfer-leader", "9", "--admin-url", "http://"+to.admin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a member") {
		t.Fatalf("transfer-leader to a non-member: %v %s", err, out)
	}
	acked := map[string]bool{}
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("graceful-%d", i)
		n := c.nodes[i%3]
		if code, body, err := post(n.http, "/v1/ns/default/queues/q/jobs", map[string]any{"id": id, "payload": i}); err != nil || code != 201 {
			t.Fatalf("put %s via node %d: %d %s %v", id, n.id, code, body, err)
		}
		acked[id] = true
	}
	for _, n := range c.nodes {
		n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range c.nodes {
		select {
		case <-n.done:
		case <-time.After(15 * time.Second):
			t.Fatalf("node %d did not stop on SIGTERM", n.id)
		}
		n.cmd = nil
	}
	for _, n := range c.nodes {
		c.start(n)
	}
	c.leader(15 * time.Second)
	c.checkPresent(acked)

	// Load, then SIGKILL everyone at once.
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("crash-%d-%d", p, i)
				n := c.nodes[(p+i)%3]
				if code, _, err := post(n.http, "/v1/ns/default/queues/q/jobs", map[string]any{"id": id, "payload": i}); err == nil && code == 201 {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
			}
		}(p)
	}
	time.Sleep(1500 * time.Millisecond)
	for _, n := range c.nodes {
		n.cmd.Process.Signal(syscall.SIGKILL)
	}
	close(stop)
	wg.Wait()
	for _, n := range c.nodes {
		<-n.done
		n.cmd = nil
	}
	for _, n := range c.nodes {
		c.start(n)
	}
	c.leader(15 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 60 {
		t.Fatalf("only %d puts acknowledged: the load did not run", len(acked))
	}
	c.checkPresent(acked)
}

// checkPresent asks every node (followers forward reads to the leader)
// for every job.
func (c *clusterT) checkPresent(ids map[string]bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range c.nodes {
		for id := range ids {
			for {
				resp, err := client.Get("http://" + n.http + "/v1/ns/default/queues/q/jobs/" + id)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == 200 {
						break
					}
					if resp.StatusCode == 404 {
						c.t.Fatalf("node %d: acknowledged put %s is gone after the restart", n.id, id)
					}
				}
				if time.Now().After(deadline) {
					c.t.Fatalf("node %d: job %s: no answer in time (%v)", n.id, id, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

package cluster_test

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
)

// memberStatus is GET /cluster/status with the membership.
type memberStatus struct {
	status
	Members []struct {
		ID       uint64 `json:"id"`
		PeerAddr string `json:"peer_addr"`
		Role     string `json:"role"`
	} `json:"members"`
	Learners []uint64 `json:"learners"`
	Removed  string   `json:"removed"`
}

func (n *node) memberStatus() (memberStatus, error) { return adminStatus[memberStatus](n) }

func (st memberStatus) roles() string {
	var parts []string
	for _, m := range st.Members {
		parts = append(parts, fmt.Sprintf("%d=%s", m.ID, m.Role))
	}
	return strings.Join(parts, ",")
}

func cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(binPath, args...).CombinedOutput()
	return string(out), err
}

func adminDo(method, url string) (int, string, error) {
	req, _ := http.NewRequest(method, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, within, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplaceMembersUnderLoad: three members under put load; node 4 is
// started with --join and an empty data directory, added as a learner
// (through a follower's admin listener, which forwards to the leader),
// catches up from entry 1 and is promoted; then the leader is removed
// (it hands leadership over first) and writes go on. Every acknowledged
// put must be in the state of each remaining member (each is made leader
// in turn and asked directly). Bad membership requests change nothing.
func TestReplaceMembersUnderLoad(t *testing.T) {
	c := startCluster(t)
	lead := c.leader(15 * time.Second)
	var follower *node
	for _, n := range c.nodes {
		if n != lead {
			follower = n
			break
		}
	}
	n4 := &node{id: 4, dir: filepath.Join(t.TempDir(), "data4"), http: testbin.FreeAddr(t), admin: testbin.FreeAddr(t), peerAddr: testbin.FreeAddr(t)}

	// CHRONOQ_MEMBER_PRELOAD=N puts N jobs first, so that node 4 has a
	// longer log to catch up with (the catch-up time is logged).
	preload := envInt("CHRONOQ_MEMBER_PRELOAD", 0)
	var pwg sync.WaitGroup
	for p := 0; p < 16 && preload > 0; p++ {
		pwg.Add(1)
		go func(p int) {
			defer pwg.Done()
			for i := p; i < preload; i += 16 {
				post(lead.http, "/v1/ns/default/queues/pre/jobs", map[string]any{"payload": strings.Repeat("x", 100)})
			}
		}(p)
	}
	pwg.Wait()

	// Put load through every live node, recording what was acknowledged.
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for p := 0; p < 3; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				live := c.liveSnapshot()
				n := live[(p+i)%len(live)]
				id := fmt.Sprintf("m%d-%d", p, i)
				if code, _, err := post(n.http, "/v1/ns/default/queues/q/jobs", map[string]any{"id": id, "payload": i}); err == nil && code == 201 {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}(p)
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	before, err := lead.memberStatus()
	if err != nil || before.roles() != "1=voter,2=voter,3=voter" {
		t.Fatalf("membership before: %q %v", before.roles(), err)
	}
	// Bad input: refused with a clear error, nothing changes.
	adm := "http://" + follower.admin
	if out, err := cli(t, "cluster", "remove", "9", "--admin-url", adm); err == nil || !strings.Contains(out, "node 9 is not a member") {
		t.Fatalf("remove of an unknown id: %v %s", err, out)
	}
	if out, err := cli(t, "cluster", "add", "2", n4.peerAddr, "--admin-url", adm); err == nil || !strings.Contains(out, "node 2 is already a member") {
		t.Fatalf("add of a duplicate id: %v %s", err, out)
	}
	if out, err := cli(t, "cluster", "add", "5", c.nodes[1].peerAddr, "--admin-url", adm); err == nil || !strings.Contains(out, "is already node 2's") {
		t.Fatalf("add of a duplicate address: %v %s", err, out)
	}
	if st, _ := lead.memberStatus(); st.roles() != before.roles() {
		t.Fatalf("bad requests changed the membership: %s", st.roles())
	}

	// Node 4 waits with --join until it is added: not ready, and it
	// says why.
	peers4 := c.peers + ",4=" + n4.peerAddr
	start4 := func() {
		saved := c.peers
		c.peers = peers4
		c.start(n4, "--join")
		c.peers = saved
	}
	start4()
	t.Cleanup(func() { c.kill(n4) })
	waitFor(t, 10*time.Second, "node 4 says it is not a member", func() (bool, string) {
		code, body, err := adminDo("GET", "http://"+n4.admin+"/readyz")
		return err == nil && code == 503 && strings.Contains(body, "not a member yet"), fmt.Sprintf("%d %s %v", code, body, err)
	})
	c.kill(n4) // stopped: it stays a learner until started again

	// Add it (through a follower). A second change while it is a learner
	// is refused.
	if out, err := cli(t, "cluster", "add", "4", n4.peerAddr, "--admin-url", adm); err != nil || !strings.Contains(out, "added as a learner") {
		t.Fatalf("chronoq cluster add 4: %v %s", err, out)
	}
	if out, err := cli(t, "cluster", "add", "5", testbin.FreeAddr(t), "--admin-url", adm); err == nil || !strings.Contains(out, "change_in_flight") {
		t.Fatalf("a second add while node 4 is a learner: %v %s", err, out)
	}
	out, err := cli(t, "cluster", "status", "--json", "--admin-url", "http://"+lead.admin)
	if err != nil || !strings.Contains(out, `"learners":[4]`) || !strings.Contains(out, `"Learner"`) {
		t.Fatalf("status with a learner: %v %s", err, out)
	}

	start4()
	liveMu.Lock() // the producers read c.nodes through liveSnapshot
	c.nodes = append(c.nodes, n4)
	liveMu.Unlock()
	c.setLive(n4, true)
	started4 := time.Now()
	waitFor(t, 30*time.Second, "node 4 promoted to voter", func() (bool, string) {
		st, err := lead.memberStatus()
		return err == nil && st.roles() == "1=voter,2=voter,3=voter,4=voter", fmt.Sprintf("%s %v", st.roles(), err)
	})
	promotedAfter := time.Since(started4)
	st4, err := n4.memberStatus()
	if err != nil || st4.Role != "Follower" {
		t.Fatalf("node 4 after promotion: %+v %v", st4, err)
	}

	// Remove the leader: it hands leadership over, then is removed.
	lead = c.leader(5 * time.Second)
	c.setLive(lead, false)
	removing := time.Now()
	res, err := cli(t, "cluster", "remove", strconv.FormatUint(lead.id, 10), "--admin-url", "http://"+lead.admin, "--json")
	removeTook := time.Since(removing)
	if err != nil {
		t.Fatalf("chronoq cluster remove %d (the leader): %v %s", lead.id, err, res)
	}
	var rest []*node
	for _, n := range c.nodes {
		if n != lead {
			rest = append(rest, n)
		}
	}
	waitFor(t, 10*time.Second, "removed node says so", func() (bool, string) {
		code, body, err := adminDo("GET", "http://"+lead.admin+"/readyz")
		return err == nil && code == 503 && strings.Contains(body, "removed"), fmt.Sprintf("%d %s %v", code, body, err)
	})
	time.Sleep(time.Second) // writes go on without it
	close(stop)
	wg.Wait()

	want := []string{}
	for _, n := range rest {
		want = append(want, fmt.Sprintf("%d=voter", n.id))
	}
	for _, n := range rest {
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d applies the removal", n.id), func() (bool, string) {
			st, err := n.memberStatus()
			return err == nil && st.roles() == strings.Join(want, ","), fmt.Sprintf("%s %v", st.roles(), err)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no put was acknowledged")
	}
	// Each remaining member leads in turn and answers from its own state.
	for _, n := range rest {
		cur := c.leaderAmong(rest, 10*time.Second)
		if cur != n {
			if out, err := cli(t, "cluster", "transfer-leader", strconv.FormatUint(n.id, 10), "--admin-url", "http://"+cur.admin); err != nil {
				t.Fatalf("transfer-leader %d: %v %s", n.id, err, out)
			}
		}
		missing := 0
		for id := range acked {
			code, _, err := adminDo("GET", "http://"+n.http+"/v1/ns/default/queues/q/jobs/"+id)
			if err != nil || code != 200 {
				missing++
				if missing < 5 {
					t.Errorf("node %d: acknowledged put %s: %d %v", n.id, id, code, err)
				}
			}
		}
		if missing > 0 {
			t.Fatalf("node %d: %d of %d acknowledged puts missing", n.id, missing, len(acked))
		}
	}
	t.Logf("%d acknowledged puts present on nodes %v after adding node 4 and removing node %d; node 4 promoted %s after it started (log of %d entries), removing the leader took %s",
		len(acked), want, lead.id, promotedAfter.Round(time.Millisecond), st4.Commit, removeTook.Round(time.Millisecond))
}

// leaderAmong waits for a leader among ns.
func (c *clusterT) leaderAmong(ns []*node, within time.Duration) *node {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, n := range ns {
			if st, err := n.status(); err == nil && st.Role == "Leader" {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader among the remaining members within %s", within)
	return nil
}

// TestRemoveDeadLeaderDuringElection: the leader is killed and, while the
// survivors know no leader yet, an operator removes it through a
// survivor's admin listener. The request waits for the election (as a
// client request does, docs/cluster.md "What a client sees during a
// failover") instead of being refused no_quorum, and reaches the new
// leader, which just won and may still be catching up with the log.
func TestRemoveDeadLeaderDuringElection(t *testing.T) {
	c := startCluster(t)
	c.leader(15 * time.Second)
	dead := c.settled(10 * time.Second)
	var f *node
	for _, n := range c.nodes {
		if n != dead {
			f = n
			break
		}
	}
	c.kill(dead)
	sawNoLeader := false
	for until := time.Now().Add(2 * time.Second); time.Now().Before(until); {
		if st, err := f.status(); err == nil && st.Leader != dead.id {
			sawNoLeader = st.Leader == 0
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	out, err := cli(t, "cluster", "remove", strconv.FormatUint(dead.id, 10), "--admin-url", "http://"+f.admin)
	if err != nil {
		t.Fatalf("chronoq cluster remove %d through node %d right after the kill (it knew no leader: %v): %v %s", dead.id, f.id, sawNoLeader, err, out)
	}
	var want []string
	for _, n := range c.nodes {
		if n != dead {
			want = append(want, fmt.Sprintf("%d=voter", n.id))
		}
	}
	waitFor(t, 10*time.Second, "the survivors apply the removal", func() (bool, string) {
		st, err := f.memberStatus()
		return err == nil && st.roles() == strings.Join(want, ","), fmt.Sprintf("%s %v", st.roles(), err)
	})
	t.Logf("removed the killed leader %d through node %d (it knew no leader when asked: %v)", dead.id, f.id, sawNoLeader)
}

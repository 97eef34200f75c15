package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"
)

// TestBeanstalkThroughAnyNode: a beanstalkd client connected to a follower
// is relayed to the leader; when leadership moves the connection is closed
// and the client's reconnect lands on the new leader.
func TestBeanstalkThroughAnyNode(t *testing.T) {
	c := &clusterT{t: t}
	var peers []string
	bs := map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		n := &node{id: id, dir: t.TempDir() + "/data", http: freeAddr(t), admin: freeAddr(t), peerAddr: freeAddr(t)}
		bs[id] = freeAddr(t)
		c.nodes = append(c.nodes, n)
		peers = append(peers, fmt.Sprintf("%d=%s", id, n.peerAddr))
	}
	c.peers = joinComma(peers)
	for _, n := range c.nodes {
		c.start(n, "--beanstalk", bs[n.id])
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.kill(n)
		}
	})
	// Every node must know the leader: one that does not yet serves the
	// connection itself, and its put fails (no leader known).
	lead := c.settled(15 * time.Second)
	follower := c.nodes[int(lead.id)%3]
	conn, err := beanstalk.Dial("tcp", bs[follower.id])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id, err := conn.Put([]byte("hello"), 1, 0, time.Minute)
	if err != nil {
		t.Fatalf("put through follower %d: %v", follower.id, err)
	}
	rid, body, err := conn.Reserve(time.Second)
	if err != nil || rid != id || string(body) != "hello" {
		t.Fatalf("reserve through the follower: %d %q %v (put %d)", rid, body, err, id)
	}
	if err := conn.Delete(rid); err != nil {
		t.Fatalf("delete through the follower: %v", err)
	}
	// Leadership moves to the node the client is connected to.
	if code, body, err := post(lead.admin, "/cluster/transfer-leader", map[string]any{"to": follower.id}); err != nil || code != 200 {
		t.Fatalf("transfer-leader: %d %s %v", code, body, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := conn.Put([]byte("after"), 1, 0, time.Minute)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no put after the leader change: %v", err)
		}
		conn.Close()
		time.Sleep(50 * time.Millisecond)
		if conn, err = beanstalk.Dial("tcp", bs[follower.id]); err != nil {
			t.Fatal(err)
		}
	}
	_, body, err = conn.Reserve(time.Second)
	if err != nil || string(body) != "after" {
		t.Fatalf("reserve on the new leader: %q %v", body, err)
	}
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

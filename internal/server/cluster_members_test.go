package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/server"
)

func adminCall(t *testing.T, method, url, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

// The membership admin API: bad requests are refused with the field and
// change nothing, a follower forwards a change to the leader, a member
// started with --join says it is not a member yet, and a restart whose
// --peers differs from the membership in the log warns and uses the log.
func TestClusterMembershipAdminAPI(t *testing.T) {
	peers := map[uint64]string{1: freePort(t), 2: freePort(t), 3: freePort(t)}
	var members []*server.Server
	var cfgs []server.Config
	logs := make([]*syncBuf, 3)
	for id := uint64(1); id <= 3; id++ {
		cfg := clusterConfig(t, id, peers)
		logs[id-1] = &syncBuf{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs[id-1], nil))
		cfgs = append(cfgs, cfg)
	}
	stops := make([]func(), 3)
	for i, cfg := range cfgs {
		s, err := server.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(context.Background()) }()
		stopped := false
		stops[i] = func() {
			if stopped {
				return
			}
			stopped = true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Shutdown(ctx)
			<-done
		}
		t.Cleanup(stops[i])
		members = append(members, s)
	}
	var leader, follower *server.Server
	waitFor(t, "a leader", func() bool {
		for _, s := range members {
			if _, self := s.Broker().ClusterLeader(); self {
				leader = s
			}
		}
		return leader != nil
	})
	for _, s := range members {
		if s != leader {
			follower = s
			break
		}
	}
	waitFor(t, "the follower knows the leader", func() bool { l, _ := follower.Broker().ClusterLeader(); return l != 0 })
	fURL := "http://" + follower.Addr(server.Admin) + "/cluster/members"
	statusOf := func(s *server.Server) string {
		st, _ := s.Broker().ClusterStatus()
		b, _ := json.Marshal(st.Members)
		return string(b)
	}
	before := statusOf(leader)
	for _, tc := range []struct {
		method, url, body string
		code              int
		want              string
	}{
		{"POST", fURL, `{"id":4}`, 400, "peer_addr"},
		{"POST", fURL, `{"id":0,"peer_addr":"127.0.0.1:1"}`, 400, "id: the node id must be 1 or more"},
		{"POST", fURL, `{"id":4,"peer_addr":"10.9.8.7:7790"}`, 400, "protected mode"},
		{"POST", fURL, `{"id":4,"peer_addr":"127.0.0.1:1","extra":1}`, 400, "unknown field"},
		{"POST", fURL, `{"id":2,"peer_addr":"127.0.0.1:1"}`, 400, "node 2 is already a member"},
		{"DELETE", fURL + "/x", "", 400, `id: \"x\" is not a node id`},
		{"DELETE", fURL + "/9", "", 400, "node 9 is not a member"},
	} {
		a := adminCall(t, tc.method, tc.url, tc.body)
		if a.code != tc.code || !strings.Contains(a.body, tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d with %q", tc.method, tc.url, tc.body, a.code, a.body, tc.code, tc.want)
		}
	}
	if got := statusOf(leader); got != before {
		t.Fatalf("bad requests changed the membership: %s, was %s", got, before)
	}

	// Node 4 joins: it is not a member until added, and says so.
	addr4 := freePort(t)
	all := map[uint64]string{1: peers[1], 2: peers[2], 3: peers[3], 4: addr4}
	cfg4 := clusterConfig(t, 4, all)
	cfg4.Cluster.Join = true
	n4 := start(t, cfg4)
	code, body := get(t, "http://"+n4.Addr(server.Admin)+"/readyz")
	if code != 503 || !strings.Contains(body, "not a member yet") {
		t.Fatalf("readyz of a joining node not yet added: %d %s", code, body)
	}
	// Added through the follower, which forwards to the leader.
	a := adminCall(t, "POST", fURL, `{"id":4,"peer_addr":"`+addr4+`"}`)
	if a.code != 200 || !strings.Contains(a.body, `"role":"learner"`) {
		t.Fatalf("add through a follower: %d %s", a.code, a.body)
	}
	waitFor(t, "node 4 promoted and ready", func() bool {
		st, _ := leader.Broker().ClusterStatus()
		code, _ := get(t, "http://"+n4.Addr(server.Admin)+"/readyz")
		return len(st.Members) == 4 && len(st.Learners) == 0 && code == 200
	})
	st4, _ := n4.Broker().ClusterStatus()
	if b, _ := json.Marshal(st4.Members); !strings.Contains(string(b), `"id":1,"peer_addr":"`+peers[1]+`"`) {
		t.Fatalf("node 4's membership lacks the addresses: %s", b)
	}

	// Restart the follower with the old --peers (without node 4): it
	// warns, and keeps node 4 as a member.
	var fi int
	for i, s := range members {
		if s == follower {
			fi = i
		}
	}
	stops[fi]()
	cfg := cfgs[fi]
	restartLog := &syncBuf{}
	cfg.Logger = slog.New(slog.NewTextHandler(restartLog, nil))
	again := start(t, cfg)
	if !strings.Contains(restartLog.String(), "--peers differs from the membership") || !strings.Contains(restartLog.String(), "member 4=") {
		t.Fatalf("a restart with stale --peers did not warn:\n%s", restartLog.String())
	}
	waitFor(t, "the restarted follower has four members", func() bool {
		st, _ := again.Broker().ClusterStatus()
		return len(st.Members) == 4 && st.Leader != 0
	})
}

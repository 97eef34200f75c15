package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/testbin"
)

// freePort: testbin.FreeAddr says why not a closed ":0" listener.
func freePort(t *testing.T) string { return testbin.FreeAddr(t) }

func clusterConfig(t *testing.T, id uint64, peers map[uint64]string) server.Config {
	cfg := testConfig(t)
	cfg.BeanstalkAddr = ""
	cfg.Cluster = &server.ClusterConfig{NodeID: id, Peers: peers, TickInterval: 10 * time.Millisecond}
	return cfg
}

func TestClusterConfigRefusals(t *testing.T) {
	loop := map[uint64]string{1: "127.0.0.1:1", 2: "127.0.0.1:2", 3: "127.0.0.1:3"}
	for _, tc := range []struct {
		name string
		edit func(c *server.Config)
		want string
	}{
		{"no secret beyond loopback", func(c *server.Config) { c.Cluster.Peers[2] = "10.1.2.3:7790" }, "without a cluster secret"},
		{"short secret", func(c *server.Config) { c.Cluster.Secret = []byte("short") }, "at least 16 bytes"},
		{"id not among peers", func(c *server.Config) { c.Cluster.NodeID = 9 }, "id 9 is not among them"},
		{"another node's data", func(c *server.Config) {
			os.WriteFile(filepath.Join(c.DataDir, "cluster-member"), []byte("node 2\n"), 0o600)
		}, `belongs to cluster member "node 2"`},
		{"a single node's data", func(c *server.Config) {
			os.MkdirAll(filepath.Join(c.DataDir, "wal"), 0o700)
			os.WriteFile(filepath.Join(c.DataDir, "wal", "00000000000000000001.log"), []byte("x"), 0o600)
		}, "holds a single node's log"},
	} {
		peers := map[uint64]string{}
		for k, v := range loop {
			peers[k] = v
		}
		cfg := clusterConfig(t, 1, peers)
		tc.edit(&cfg)
		s, err := server.New(cfg)
		if err == nil {
			s.Shutdown(context.Background())
			t.Errorf("%s: started", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want it to mention %q", tc.name, err, tc.want)
		}
	}
	for _, bad := range []string{"1=a", "x=127.0.0.1:1", "0=127.0.0.1:1", "1=127.0.0.1:1,1=127.0.0.1:2", ""} {
		if _, err := server.ParsePeers(bad); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
}

// A single member of three, alone, knows no leader: readiness says so and
// a write is refused with no_quorum at once instead of hanging.
func TestClusterMinorityAnswersNoQuorum(t *testing.T) {
	peers := map[uint64]string{1: freePort(t), 2: freePort(t), 3: freePort(t)}
	s := start(t, clusterConfig(t, 1, peers))
	code, body := get(t, "http://"+s.Addr(server.Admin)+"/readyz")
	if code != 503 || !strings.Contains(body, "no leader") {
		t.Fatalf("readyz of a lone member: %d %s", code, body)
	}
	began := time.Now()
	resp, err := httpPost("http://"+s.Addr(server.HTTP)+"/v1/ns/default/queues/q/jobs", `{"payload":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.code != 503 || !strings.Contains(resp.body, `"no_quorum"`) || time.Since(began) > 2*time.Second {
		t.Fatalf("put on a lone member: %d %s after %s", resp.code, resp.body, time.Since(began))
	}
	if _, err := s.Broker().Put(context.Background(), "default", "q", engine.PutRequest{Payload: []byte("x")}); engine.CodeOf(err) != "no_quorum" {
		t.Fatalf("broker put on a lone member: %v", err)
	}
}

type answer struct {
	code int
	body string
}

func httpPost(url, body string) (answer, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}, nil
}

func TestSingleNodeRefusesMemberData(t *testing.T) {
	cfg := testConfig(t)
	os.WriteFile(filepath.Join(cfg.DataDir, "cluster-member"), []byte("node 3\n"), 0o600)
	s, err := server.New(cfg)
	if err == nil {
		s.Shutdown(context.Background())
		t.Fatal("a single node started on a cluster member's data directory")
	}
	if !strings.Contains(err.Error(), "--node-id and --peers") {
		t.Fatalf("error %q does not say how to start it", err)
	}
}

// The dashboard's overview shows a member's view of the cluster (a lone
// member knows its id and no leader); a single node shows none.
func TestDashboardOverviewShowsCluster(t *testing.T) {
	peers := map[uint64]string{1: freePort(t), 2: freePort(t), 3: freePort(t)}
	member := start(t, clusterConfig(t, 1, peers))
	single := start(t, testConfig(t))
	overview := func(s *server.Server) map[string]any {
		code, body := get(t, "http://"+s.Addr(server.Admin)+"/admin/stats")
		if code != 200 {
			t.Fatalf("/admin/stats: %d %s", code, body)
		}
		var ov map[string]any
		if err := json.Unmarshal([]byte(body), &ov); err != nil {
			t.Fatal(err)
		}
		return ov
	}
	cl, ok := overview(member)["cluster"].(map[string]any)
	if !ok || cl["id"] != float64(1) || cl["leader"] != float64(0) || cl["role"] == "" {
		t.Fatalf("a lone member's overview: cluster %v", cl)
	}
	if c, has := overview(single)["cluster"]; has {
		t.Fatalf("a single node's overview has a cluster: %v", c)
	}
}

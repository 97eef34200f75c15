package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
)

// clusterStatus is GET /cluster/status on a member's admin listener
// (internal/broker/cluster.go).
type clusterStatus struct {
	ID      uint64            `json:"id"`
	Role    string            `json:"role"`
	Term    uint64            `json:"term"`
	Leader  uint64            `json:"leader"`
	Commit  uint64            `json:"commit"`
	Applied uint64            `json:"applied"`
	Match   map[uint64]uint64 `json:"match,omitempty"`
}

type clusterNode struct {
	ID      uint64 `json:"id"`
	Role    string `json:"role"`
	Term    uint64 `json:"term,omitempty"`
	Applied uint64 `json:"applied,omitempty"`
	Match   uint64 `json:"match,omitempty"`
}

func cliCluster(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(cliOut, `Usage: chronoq cluster status [--admin-url URL] [--json]

Show a cluster member's view of the group, from its admin listener
(--admin-url, CHRONOQ_ADMIN_URL). Asked of the leader, it lists every
member with how far its log matches the leader's.

Example:
  chronoq cluster status --admin-url http://127.0.0.1:7778 --json
`)
		if len(args) == 0 {
			return errors.New("cluster: give a subcommand: status")
		}
		return nil
	}
	if args[0] != "status" {
		return fmt.Errorf("cluster: unknown subcommand %q (want status)", args[0])
	}
	c := newCLICmd("cluster status", "[flags]", "Show a cluster member's view of the group", "chronoq cluster status --json")
	if _, err := c.parse(args[1:], 0, 0); err != nil {
		return cliDone(err)
	}
	ctx, cancel := cliContext()
	defer cancel()
	base := strings.TrimRight(cliEnv(c.conn.adminURL, "CHRONOQ_ADMIN_URL", cliDefaultAdminURL), "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/cluster/status", nil)
	if err != nil {
		return fmt.Errorf("cluster status: %w", err)
	}
	if tok := cliEnv(c.conn.token, "CHRONOQ_TOKEN", ""); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cluster status: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("cluster status: %s is not a cluster member (started without --peers)", base)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("cluster status: %s answered %d: %s", base, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var st clusterStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("cluster status: undecodable answer: %w", err)
	}
	nodes := []clusterNode{{ID: st.ID, Role: st.Role, Term: st.Term, Applied: st.Applied, Match: st.Match[st.ID]}}
	for id, m := range st.Match {
		if id != st.ID {
			nodes = append(nodes, clusterNode{ID: id, Role: "Follower", Match: m})
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	if c.conn.json {
		return cliJSON(map[string]any{"leader": st.Leader, "term": st.Term, "commit": st.Commit, "nodes": nodes})
	}
	fmt.Fprintf(cliOut, "leader %d, term %d, commit %d (as node %d sees it)\n", st.Leader, st.Term, st.Commit, st.ID)
	w := cliTable()
	cliRow(w, "NODE", "ROLE", "APPLIED", "MATCH")
	for _, n := range nodes {
		applied := "-"
		if n.ID == st.ID {
			applied = fmt.Sprint(n.Applied)
		}
		cliRow(w, fmt.Sprint(n.ID), n.Role, applied, fmt.Sprint(n.Match))
	}
	return w.Flush()
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/chronoq/chronoq/internal/broker"
)

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
       chronoq cluster transfer-leader NODE_ID [--admin-url URL]

status shows a cluster member's view of the group, from its admin listener
(--admin-url, CHRONOQ_ADMIN_URL). Asked of the leader, it lists every
member with how far its log matches the leader's. transfer-leader, sent to
the leader's admin listener, hands leadership to member NODE_ID.

Example:
  chronoq cluster status --admin-url http://127.0.0.1:7778 --json
`)
		if len(args) == 0 {
			return errors.New("cluster: give a subcommand: status or transfer-leader")
		}
		return nil
	}
	switch args[0] {
	case "status":
	case "transfer-leader":
		return cliTransferLeader(args[1:])
	default:
		return fmt.Errorf("cluster: unknown subcommand %q (want status or transfer-leader)", args[0])
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
	var st broker.ClusterStatus // GET /cluster/status on a member's admin listener
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

func cliTransferLeader(args []string) error {
	c := newCLICmd("cluster transfer-leader", "NODE_ID [flags]", "Hand leadership to a member (ask the leader's admin listener)",
		"chronoq cluster transfer-leader 2 --admin-url http://127.0.0.1:7778")
	pos, err := c.parse(args, 1, 1)
	if err != nil {
		return cliDone(err)
	}
	to, err := strconv.ParseUint(pos[0], 10, 64)
	if err != nil || to == 0 {
		return fmt.Errorf("cluster transfer-leader: NODE_ID must be a number from 1, got %q", pos[0])
	}
	ctx, cancel := cliContext()
	defer cancel()
	base := strings.TrimRight(cliEnv(c.conn.adminURL, "CHRONOQ_ADMIN_URL", cliDefaultAdminURL), "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/cluster/transfer-leader", strings.NewReader(fmt.Sprintf(`{"to":%d}`, to)))
	if err != nil {
		return fmt.Errorf("cluster transfer-leader: %w", err)
	}
	if tok := cliEnv(c.conn.token, "CHRONOQ_TOKEN", ""); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cluster transfer-leader: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster transfer-leader: %s answered %d: %s", base, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if c.conn.json {
		_, err := cliOut.Write(body)
		return err
	}
	fmt.Fprintf(cliOut, "node %d leads\n", to)
	return nil
}

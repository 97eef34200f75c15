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
	// PeerAddr is the member's peer address as the membership records it.
	PeerAddr string `json:"peer_addr,omitempty"`
}

func cliCluster(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(cliOut, `Usage: chronoq cluster status [--admin-url URL] [--json]
       chronoq cluster transfer-leader NODE_ID [--admin-url URL]
       chronoq cluster add NODE_ID PEER_ADDR [--admin-url URL] [--json]
       chronoq cluster remove NODE_ID [--admin-url URL] [--json]

status shows a cluster member's view of the group, from its admin listener
(--admin-url, CHRONOQ_ADMIN_URL). Asked of the leader, it lists every
member with how far its log matches the leader's. transfer-leader, sent to
the leader's admin listener, hands leadership to member NODE_ID.

add makes NODE_ID (started with --join, listening for peers on PEER_ADDR)
a learner; the leader promotes it to voter once it caught up. remove takes
a member out of the cluster (the leader hands leadership over first when it
is the one removed). One change at a time; any member's admin listener
takes them and forwards them to the leader.

Example:
  chronoq cluster status --admin-url http://127.0.0.1:7778 --json
  chronoq cluster add 4 10.0.0.4:7790 --admin-url http://127.0.0.1:7778
`)
		if len(args) == 0 {
			return errors.New("cluster: give a subcommand: status, add, remove or transfer-leader")
		}
		return nil
	}
	switch args[0] {
	case "status":
	case "transfer-leader":
		return cliTransferLeader(args[1:])
	case "add":
		return cliClusterAdd(args[1:])
	case "remove":
		return cliClusterRemove(args[1:])
	default:
		return fmt.Errorf("cluster: unknown subcommand %q (want status, add, remove or transfer-leader)", args[0])
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
	seen := map[uint64]bool{st.ID: true}
	for _, m := range st.Members {
		if m.ID == st.ID {
			nodes[0].PeerAddr = m.PeerAddr
			if m.Role == "learner" {
				nodes[0].Role = "Learner"
			}
			continue
		}
		role := "Follower"
		if m.Role == "learner" {
			role = "Learner"
		}
		nodes = append(nodes, clusterNode{ID: m.ID, Role: role, Match: st.Match[m.ID], PeerAddr: m.PeerAddr})
		seen[m.ID] = true
	}
	for id, m := range st.Match {
		if !seen[id] {
			nodes = append(nodes, clusterNode{ID: id, Role: "Follower", Match: m})
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	if st.Learners == nil {
		st.Learners = []uint64{}
	}
	if c.conn.json {
		out := map[string]any{"leader": st.Leader, "term": st.Term, "commit": st.Commit, "nodes": nodes, "learners": st.Learners}
		if st.Removed != "" {
			out["removed"] = st.Removed
		}
		return cliJSON(out)
	}
	fmt.Fprintf(cliOut, "leader %d, term %d, commit %d (as node %d sees it)\n", st.Leader, st.Term, st.Commit, st.ID)
	if st.Removed != "" {
		fmt.Fprintf(cliOut, "node %d was removed from the cluster: %s\n", st.ID, st.Removed)
	}
	w := cliTable()
	cliRow(w, "NODE", "ROLE", "APPLIED", "MATCH", "PEER")
	for _, n := range nodes {
		applied := "-"
		if n.ID == st.ID {
			applied = fmt.Sprint(n.Applied)
		}
		peer := n.PeerAddr
		if peer == "" {
			peer = "-"
		}
		cliRow(w, fmt.Sprint(n.ID), n.Role, applied, fmt.Sprint(n.Match), peer)
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

// cliMemberChange sends a membership change to a member's admin listener
// (POST /cluster/members, DELETE /cluster/members/{id}).
func cliMemberChange(c *cliCmd, verb, method, path, body string) ([]byte, error) {
	ctx, cancel := cliContext()
	defer cancel()
	base := strings.TrimRight(cliEnv(c.conn.adminURL, "CHRONOQ_ADMIN_URL", cliDefaultAdminURL), "/")
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", verb, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := cliEnv(c.conn.token, "CHRONOQ_TOKEN", ""); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", verb, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("cluster %s: %s is not a cluster member (started without --peers)", verb, base)
	case resp.StatusCode != http.StatusOK:
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(out, &e) == nil && e.Error.Message != "" {
			return nil, fmt.Errorf("cluster %s: %s (%s)", verb, e.Error.Message, e.Error.Code)
		}
		return nil, fmt.Errorf("cluster %s: %s answered %d: %s", verb, base, resp.StatusCode, strings.TrimSpace(string(out)))
	}
	return out, nil
}

func cliClusterAdd(args []string) error {
	c := newCLICmd("cluster add", "NODE_ID PEER_ADDR [flags]", "Add a member as a learner; the leader promotes it once it caught up",
		"chronoq cluster add 4 127.0.0.1:7793 --admin-url http://127.0.0.1:7778")
	pos, err := c.parse(args, 2, 2)
	if err != nil {
		return cliDone(err)
	}
	id, err := strconv.ParseUint(pos[0], 10, 64)
	if err != nil || id == 0 {
		return fmt.Errorf("cluster add: NODE_ID must be a number from 1, got %q", pos[0])
	}
	body, _ := json.Marshal(map[string]any{"id": id, "peer_addr": pos[1]})
	out, err := cliMemberChange(c, "add", http.MethodPost, "/cluster/members", string(body))
	if err != nil {
		return err
	}
	if c.conn.json {
		_, err := cliOut.Write(out)
		return err
	}
	fmt.Fprintf(cliOut, "node %d added as a learner at %s; the leader promotes it to voter once it caught up (chronoq cluster status)\n", id, pos[1])
	return nil
}

func cliClusterRemove(args []string) error {
	c := newCLICmd("cluster remove", "NODE_ID [flags]", "Remove a member from the cluster",
		"chronoq cluster remove 3 --admin-url http://127.0.0.1:7778")
	pos, err := c.parse(args, 1, 1)
	if err != nil {
		return cliDone(err)
	}
	id, err := strconv.ParseUint(pos[0], 10, 64)
	if err != nil || id == 0 {
		return fmt.Errorf("cluster remove: NODE_ID must be a number from 1, got %q", pos[0])
	}
	out, err := cliMemberChange(c, "remove", http.MethodDelete, "/cluster/members/"+strconv.FormatUint(id, 10), "")
	if err != nil {
		return err
	}
	if c.conn.json {
		_, err := cliOut.Write(out)
		return err
	}
	var ch broker.MemberChange
	json.Unmarshal(out, &ch)
	fmt.Fprintf(cliOut, "node %d removed\n", id)
	if ch.Warning != "" {
		fmt.Fprintf(cliOut, "warning: %s\n", ch.Warning)
	}
	return nil
}

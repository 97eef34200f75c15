package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
)

// Membership changes on the admin listener (docs/cluster.md, "Add, remove
// or replace a member"):
//
//	POST   /cluster/members       {"id": 4, "peer_addr": "host:port"}  add as learner
//	DELETE /cluster/members/{id}                                       remove
//
// Only the leader changes the membership. A follower forwards the call to
// the leader's admin listener (members tell each other its address when
// they connect); without a known leader it answers 503 no_quorum. Removing
// the leader hands leadership to the most caught-up voter first, then
// forwards the removal to the new leader.

// memberChangeTimeout bounds one admin call: the hand-over of leadership
// plus the change itself.
const memberChangeTimeout = 15 * time.Second

func (p *clusterPart) addMemberHandler(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !adminAuth(s, w, r) {
			return
		}
		var req struct {
			ID       uint64 `json:"id"`
			PeerAddr string `json:"peer_addr"`
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
		if err != nil {
			writeClusterError(w, http.StatusBadRequest, "bad_request", "body: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw)) // forwardAdmin sends it on
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeClusterError(w, http.StatusBadRequest, "bad_request", `body must be {"id": NODE_ID, "peer_addr": "host:port"}: `+err.Error())
			return
		}
		if req.ID == 0 {
			writeClusterError(w, http.StatusBadRequest, "bad_request", "id: the node id must be 1 or more")
			return
		}
		if _, _, err := splitHostPort(req.PeerAddr); err != nil {
			writeClusterError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("peer_addr: %q is not host:port", req.PeerAddr))
			return
		}
		if len(p.cfg.Secret) == 0 && !IsLoopback(req.PeerAddr) {
			writeClusterError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("peer_addr: %s is not a loopback address and this cluster runs without a cluster secret (protected mode)", req.PeerAddr))
			return
		}
		if p.forwardAdmin(s, w, r, 0) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), memberChangeTimeout)
		defer cancel()
		ch, err := s.b.AddMember(ctx, req.ID, req.PeerAddr)
		if err != nil {
			writeMemberError(w, err)
			return
		}
		s.lg.Info("cluster: member added as learner; the leader promotes it to voter once it caught up", "node", req.ID, "peer_addr", req.PeerAddr)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": ch.ID, "index": ch.Index, "role": "learner", "peer_addr": req.PeerAddr})
	})
}

func (p *clusterPart) removeMemberHandler(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !adminAuth(s, w, r) {
			return
		}
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil || id == 0 {
			writeClusterError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("id: %q is not a node id (a number from 1)", r.PathValue("id")))
			return
		}
		if p.forwardAdmin(s, w, r, id) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), memberChangeTimeout)
		defer cancel()
		ch, err := s.b.RemoveMember(ctx, id)
		if err != nil {
			writeMemberError(w, err)
			return
		}
		if ch.Warning != "" {
			s.lg.Warn("cluster: member removed", "node", id, "warning", ch.Warning)
		} else {
			s.lg.Info("cluster: member removed", "node", id)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ch)
	})
}

// forwardAdmin sends a membership change to the leader when this member
// does not lead, and hands leadership over first when the change removes
// this member (removing). It answers whether it answered the request.
func (p *clusterPart) forwardAdmin(s *Server, w http.ResponseWriter, r *http.Request, removing uint64) bool {
	lead, self := s.b.ClusterLeader()
	if lead == 0 {
		// In an election (after a leader change, or a kill): wait for the
		// next leader as a client request does (forward.go).
		lead, self = p.awaitLeader(s, r)
	}
	if self && removing != 0 && removing == p.cfg.NodeID {
		if r.Header.Get(forwardedHeader) != "" {
			writeClusterError(w, http.StatusServiceUnavailable, "not_leader", "leadership moved back to the member being removed; retry")
			return true
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		s.b.TransferLeadership(ctx)
		cancel()
		if lead, self = s.b.ClusterLeader(); self || lead == 0 {
			writeClusterError(w, http.StatusServiceUnavailable, "unavailable", "could not hand leadership to another voter before removing this one (is another voter caught up and reachable?)")
			return true
		}
	}
	if self {
		return false
	}
	if lead == 0 {
		writeClusterError(w, http.StatusServiceUnavailable, string(broker.CodeNoQuorum), "this node knows no leader: no quorum is reachable")
		return true
	}
	target := p.advertisedBy(lead).Admin
	if target == "" || r.Header.Get(forwardedHeader) != "" {
		writeClusterError(w, http.StatusServiceUnavailable, "not_leader", fmt.Sprintf("this node is not the leader; the leader is node %d: ask its admin listener", lead))
		return true
	}
	u, err := url.Parse(target)
	if err != nil {
		writeClusterError(w, http.StatusServiceUnavailable, "not_leader", fmt.Sprintf("this node is not the leader; the leader is node %d", lead))
		return true
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = p.forwarder(s)
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		s.lg.Warn("cluster: forwarding a membership change to the leader failed", "leader", lead, "admin", target, "err", err)
		writeClusterError(w, http.StatusServiceUnavailable, "not_leader", fmt.Sprintf("the leader (node %d, admin %s) did not answer: %v", lead, target, err))
	}
	r.Header.Set(forwardedHeader, strconv.FormatUint(p.cfg.NodeID, 10))
	rp.ServeHTTP(w, r)
	return true
}

func writeMemberError(w http.ResponseWriter, err error) {
	var ee *engine.Error
	status, code := http.StatusServiceUnavailable, "unavailable"
	if errors.As(err, &ee) {
		code = string(ee.Code)
		switch ee.Code {
		case engine.CodeBadRequest:
			status = http.StatusBadRequest
		case cluster.CodeChangeInFlight, cluster.CodeWouldLoseQuorum:
			status = http.StatusConflict
		}
	}
	msg := err.Error()
	if ee != nil && ee.Field != "" {
		msg = ee.Field + ": " + ee.Message
	}
	writeClusterError(w, status, code, msg)
}

// onMembership follows an applied membership change: the transport sends
// to the new members and refuses removed ones.
func (p *clusterPart) onMembership(ms []cluster.Member, removed []uint64) {
	p.members.Store(&ms)
	if tr := p.tr.Load(); tr != nil {
		tr.UpdatePeers(p.peerTable(ms), removed)
	}
}

// peerTable is the transport's table for members ms: the address the
// membership carries, or the --peers one for members bootstrapped before
// addresses travelled in the log.
func (p *clusterPart) peerTable(ms []cluster.Member) map[uint64]string {
	if len(ms) == 0 {
		return nil
	}
	out := make(map[uint64]string, len(ms))
	self := false
	for _, m := range ms {
		addr := m.Addr
		if addr == "" {
			addr = p.cfg.Peers[m.ID]
		}
		out[m.ID] = addr
		self = self || m.ID == p.cfg.NodeID
	}
	if !self && p.retired.Load() == nil {
		// Joining, not added yet: the log so far is a prefix of the
		// membership; keep talking to the members --peers names.
		for id, addr := range p.cfg.Peers {
			if _, ok := out[id]; !ok {
				out[id] = addr
			}
		}
	}
	return out
}

// retire stops the raft traffic of a member the cluster removed.
func (p *clusterPart) retire(why string) {
	p.retired.Store(&why)
	if tr := p.tr.Load(); tr != nil {
		tr.Retire(why)
	}
}

// checkPeers compares --peers with the membership the log holds: the log
// wins (a restart after add/remove needs no new --peers), and a
// difference is logged so an operator sees a stale command line.
func (p *clusterPart) checkPeers(s *Server, st broker.ClusterStatus) map[uint64]string {
	peers := p.cfg.Peers
	if len(st.Members) == 0 {
		return peers
	}
	ms := make([]cluster.Member, 0, len(st.Members))
	for _, m := range st.Members {
		ms = append(ms, cluster.Member{ID: m.ID, Addr: m.PeerAddr, Learner: m.Role == "learner"})
	}
	table := p.peerTable(ms)
	var diff []string
	for id, addr := range peers {
		if got, ok := table[id]; !ok {
			diff = append(diff, fmt.Sprintf("%d=%s is not a member", id, addr))
		} else if got != addr {
			diff = append(diff, fmt.Sprintf("node %d is at %s, not %s", id, got, addr))
		}
	}
	for id, addr := range table {
		if _, ok := peers[id]; !ok {
			diff = append(diff, fmt.Sprintf("member %d=%s is missing", id, addr))
		}
	}
	slices.Sort(diff)
	if len(diff) > 0 {
		s.lg.Warn("cluster: --peers differs from the membership in this node's log; the log's membership is used", "differences", diff)
	}
	out := make(map[uint64]string, len(table)+1)
	for id, addr := range table {
		out[id] = addr
	}
	if _, ok := out[p.cfg.NodeID]; !ok {
		// Removed, or not added yet: listen where --peers says.
		out[p.cfg.NodeID] = peers[p.cfg.NodeID]
	}
	return out
}

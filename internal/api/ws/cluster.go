package ws

// discLeaderChanged ends the connections a cluster member served while it
// led (or while it knew no leader) once it does not lead: its hub no
// longer hears what is published, so the client reconnects, reaches the
// new leader through any node, and recovers from its position
// (docs/cluster.md).
var discLeaderChanged = disconnectReason{4006, "leader_changed", true}

// DisconnectLeaderChanged closes every connection with 4006
// (leader_changed, reconnect) and answers how many it closed. Unlike
// Shutdown it keeps accepting new connections.
func (s *Server) DisconnectLeaderChanged() int {
	s.mu.Lock()
	all := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		all = append(all, c)
	}
	s.mu.Unlock()
	for _, c := range all {
		c.disconnect(discLeaderChanged)
	}
	return len(all)
}

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
func (s *Server) DisconnectLeaderChanged() int { return s.disconnectAll(discLeaderChanged) }

package pubsub

// RenewMemoryEpochs gives every channel of a namespace whose history is
// not durable a new epoch and an empty history, and answers how many it
// renewed. A cluster member calls it when it becomes the leader: the
// publications of memory-only channels made under another leader never
// reached this hub, so positions in its old epochs would claim a
// recovery that misses them (docs/cluster.md).
func (h *Hub) RenewMemoryEpochs() int {
	h.mu.RLock()
	chans := make([]*channel, 0, len(h.chans))
	for k, c := range h.chans {
		conf, ok := h.nsConf[k.ns]
		if !ok {
			conf = h.def
		}
		if !conf.Durable {
			chans = append(chans, c)
		}
	}
	h.mu.RUnlock()
	for _, c := range chans {
		c.mu.Lock()
		c.epoch, c.offset = newEpoch(), 0
		c.ring.clear()
		c.mu.Unlock()
	}
	return len(chans)
}

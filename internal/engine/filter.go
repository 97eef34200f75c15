package engine

import (
	"slices"
)

// Filters select jobs for list and cancel (docs/api.md, Filters).

func stateMask(states []State, def uint8) uint8 {
	if len(states) == 0 {
		return def
	}
	var m uint8
	for _, s := range states {
		m |= 1 << s
	}
	return m
}

const allStates = 1<<StateDelayed | 1<<StateReady | 1<<StateBlocked | 1<<StateReserved | 1<<StateDead | 1<<StateCompleted

// candidates visits the jobs that may match f in the given queues (nil: the
// queues of ns): through the tag index when f names a tag, else by scan.
func (e *Engine) candidates(f *Filter, inQueue func(qi uint32) bool, fn func(slot uint32)) {
	if len(f.Tags) > 0 {
		var best map[uint32]struct{}
		first := true
		for k, v := range f.Tags {
			set := e.tagIndex[tagKey(k, v)]
			if first || len(set) < len(best) {
				best, first = set, false
			}
		}
		slots := make([]uint32, 0, len(best))
		for s := range best {
			slots = append(slots, s)
		}
		slices.Sort(slots)
		for _, s := range slots {
			if inQueue(e.jq(e.jobs.get(s))) {
				fn(s)
			}
		}
		return
	}
	e.forEachJob(func(slot uint32, j *job) {
		if inQueue(e.jq(j)) {
			fn(slot)
		}
	})
}

func (e *Engine) matches(slot uint32, f *Filter, mask uint8) bool {
	j := e.jobs.get(slot)
	if mask&(1<<j.state) == 0 {
		return false
	}
	if f.HasKey && e.keys.keys[j.key] != f.Key {
		return false
	}
	if len(f.Tags) > 0 {
		x, ok := e.ext(slot)
		if !ok {
			return false
		}
		for k, v := range f.Tags {
			found := false
			for i := 0; i+1 < len(x.tags); i += 2 {
				if x.tags[i] == k && x.tags[i+1] == v {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

func checkFilter(f *Filter) error {
	if len(f.States) > MaxFilterStates {
		return badf("state", "at most %d states, got %d", MaxFilterStates, len(f.States))
	}
	if err := checkKey(f.Key); err != nil {
		return err
	}
	for _, s := range f.States {
		if s == StateNone || s >= StateGone {
			return badf("state", "unknown state")
		}
	}
	if err := checkTags(f.Tags); err != nil {
		return err
	}
	return nil
}

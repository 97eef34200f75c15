package cluster

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Membership changes in the simulation: now and then the leader adds a
// fourth member (a fresh one, started to join: it catches up from entry 1
// and is promoted once caught up) or removes it again, under the same
// faults as the rest of the simulation. The member's state hash must match
// the others' at every entry, and the end checks hold on every member that
// was not removed. Ids are not reused, so each added member is a new one.

// extra is the newest added member that is not gone, if any.
func (s *sim) extra() *simMember {
	if m := s.members[len(s.members)-1]; m.join && !m.gone {
		return m
	}
	return nil
}

// changeMembers asks leader l for the next membership change.
func (s *sim) changeMembers(l *simMember) {
	x := s.extra()
	if x == nil {
		x = &simMember{id: uint64(len(s.members) + 1), join: true, skew: s.rng.Int64N(1001) - 500}
		x.dir = filepath.Join(s.tmp, strconv.FormatUint(x.id, 10))
		if err := s.open(x); err != nil {
			s.failf("member %d: open: %v", x.id, err)
			return
		}
		s.members = append(s.members, x)
	}
	var cur *Member
	for _, mb := range l.n.Members() {
		if mb.ID == x.id {
			cur = &mb
		}
	}
	switch {
	case cur == nil && !l.n.WasRemoved(x.id):
		l.n.AddLearner(x.id, fmt.Sprintf("sim:%d", x.id))
	case cur != nil && (!cur.Learner || s.rng.IntN(4) == 0):
		l.n.RemoveMember(x.id)
	}
}

// followMembers lets the leader promote a learner that caught up, counts
// applied changes and closes a member once the
// leader applied its removal (it takes no further part).
func (s *sim) followMembers() {
	l := s.leader()
	if l == nil {
		return
	}
	l.n.Promote() // as the broker's loop does after every turn
	seen := map[uint64]bool{}
	for _, mb := range l.n.Members() {
		seen[mb.ID] = true
	}
	for _, m := range s.members {
		if m.gone || !m.join {
			continue
		}
		if l.n.WasRemoved(m.id) && !seen[m.id] {
			if m.downUntil == 0 {
				m.n.Close()
			}
			m.gone = true
			s.stats.removed++
		}
	}
	for _, mb := range l.n.Members() {
		if mb.ID > 3 {
			x := s.members[mb.ID-1]
			switch {
			case mb.Learner && !x.sawLearner:
				x.sawLearner = true
				s.stats.added++
			case !mb.Learner && !x.sawVoter:
				x.sawVoter = true
				s.stats.promoted++
			}
		}
	}
}

func TestSimulationMembership(t *testing.T) {
	seeds := simSeeds(t) / 8
	first := uint64(101)
	var total simStats
	for seed := first; seed < first+uint64(max(seeds, 1)); seed++ {
		began := time.Now()
		st, err := runSimWith(t, seed, 4000, t.TempDir(), true)
		if testing.Verbose() {
			t.Logf("seed %d: %+v in %s", seed, st, time.Since(began).Round(time.Millisecond))
		}
		if err != nil {
			t.Fatalf("%v\nreproduce: go test -run TestSimulationMembership ./internal/cluster/ (seed %d)", err, seed)
		}
		total.added += st.added
		total.promoted += st.promoted
		total.removed += st.removed
		total.acknowledged += st.acknowledged
	}
	t.Logf("membership simulation: %d learners added, %d promoted, %d removed; %d operations acknowledged", total.added, total.promoted, total.removed, total.acknowledged)
	if total.promoted == 0 || total.removed == 0 {
		t.Fatalf("no member was promoted (%d) or removed (%d): the simulation did not change the membership", total.promoted, total.removed)
	}
}

package engine

// The sequence table maps a job's enqueue sequence number to its slot
// (beanstalkd addresses jobs by this number).

type seqHasher struct{}

func seqHash(seq uint64) uint64 { return seq * 0x9e3779b97f4a7c15 }

func (seqHasher) hash(e *Engine, slot uint32) uint64 { return seqHash(e.jobs.get(slot).seqNo()) }

func (e *Engine) seqLookup(seq uint64) uint32 {
	t := &e.seqs
	mask := uint64(len(t.slots) - 1)
	for i := seqHash(seq) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == noSlot || e.jobs.get(s).seqNo() == seq {
			return s
		}
	}
}

package engine

import (
	"strings"
	"time"
)

// Job events are how a job put with notify tells a channel what happens to
// it (a browser watching its own export finish). The engine only notes
// them; the broker publishes them once the change that caused them is
// durable, so nobody hears "completed" for an ack a crash could undo.
//
// Most events follow from the records a command commits: a job image that
// becomes reserved, completed or dead is that event, and a reserved job
// going back to pending is a nack. A delete says nothing about why, so the
// command that logs it names the reason (evHint). Time-derived transitions
// (a reservation running out, a TTL passing) are not logged — replay
// derives them again — and are noted as they happen.

// Job event names.
const (
	EventReserved  = "reserved"
	EventCompleted = "completed"
	EventNacked    = "nacked"
	EventDead      = "dead"
	EventExpired   = "expired"
	EventCancelled = "cancelled"
)

// JobEvent is one lifecycle event of a job that asked for them.
type JobEvent struct {
	NS, Queue, ID string
	Channel       string // the job's notify channel, in NS
	Event         string
	State         State // the job's state after the event; StateGone once deleted
	Attempt       uint32
	Error         string // nacked, dead: the last error
	HasResult     bool   // completed with a result
	Result        []byte
	ResultJSON    bool
	Time          time.Time
}

// SetEvents turns the noting of job events on or off. It is off while the
// broker replays the log: those events happened before the restart.
func (e *Engine) SetEvents(on bool) {
	e.events.on = on
	e.events.out = nil
}

// TakeEvents returns the events noted since the last call, oldest first.
func (e *Engine) TakeEvents() []JobEvent {
	out := e.events.out
	e.events.out = nil
	return out
}

// eventLog is the engine's side of job events.
type eventLog struct {
	on      bool
	out     []JobEvent // committed, for TakeEvents
	pending []JobEvent // noted by the command being committed
	// set by the command being decided, reset by begin
	hint       string // why this command's deletes happen
	result     []byte // the ack's result, for completed events of deleted jobs
	hasResult  bool
	resultJSON bool
}

// resetEvents readies the log for a new command.
func (ev *eventLog) reset() {
	ev.pending = ev.pending[:0]
	ev.hint, ev.result, ev.hasResult, ev.resultJSON = "", nil, false, false
}

// noteRecords notes the events of the scratch entry, before it is applied
// (the jobs' current states are what they change from).
func (e *Engine) noteRecords() {
	if !e.events.on {
		return
	}
	for i := range e.ent.Records {
		r := &e.ent.Records[i]
		switch r.Kind {
		case KindJob:
			if r.Job.Notify != "" {
				e.noteImage(&r.Job)
			}
		case KindJobDelete:
			if e.events.hint != "" {
				e.noteDelete(r)
			}
		}
	}
}

func (e *Engine) noteImage(img *JobImage) {
	old := StateNone
	var oldNonce uint64
	slot := noSlot
	if q := e.lookupQueue(img.NS, img.Queue); q != nil {
		k := makeIDKey(img.ID)
		if slot = e.idLookup(q.idx, &k); slot != noSlot {
			old = e.jobs.get(slot).state
			oldNonce = e.resv[slot].nonce
		}
	}
	ev := JobEvent{NS: img.NS, Queue: img.Queue, ID: img.ID, Channel: img.Notify, Attempt: img.Attempt}
	switch img.Phase {
	case phaseReserved:
		if old == StateReserved && oldNonce == img.Nonce {
			return // touched
		}
		ev.Event = EventReserved
	case phaseCompleted:
		if old == StateCompleted {
			return
		}
		ev.Event = EventCompleted
		if img.Flags&fHasResult != 0 && img.Result.Data != nil {
			ev.HasResult, ev.Result, ev.ResultJSON = true, img.Result.Data, img.Flags&fResultJSON != 0
		}
	case phaseDead:
		if old == StateDead {
			return
		}
		ev.Event, ev.Error = EventDead, img.LastError
	case phasePending:
		if old != StateReserved {
			return // put, update, kick, respawn: not lifecycle events
		}
		ev.Event, ev.Error = EventNacked, img.LastError
		if e.events.hint == EventCompleted {
			// acked and rescheduled (reschedule or cron): this run is done
			ev.Event, ev.Error = EventCompleted, ""
			ev.HasResult, ev.Result, ev.ResultJSON = e.events.hasResult, e.events.result, e.events.resultJSON
		}
	default:
		return
	}
	// the state after the change is read once it is applied
	e.events.pending = append(e.events.pending, ev)
}

func (e *Engine) noteDelete(r *Record) {
	q := e.lookupQueue(r.NS, r.Queue)
	if q == nil {
		return
	}
	k := makeIDKey(r.ID)
	slot := e.idLookup(q.idx, &k)
	if slot == noSlot || e.jobs.get(slot).flags&fHasExt == 0 {
		return
	}
	x, ok := e.ext(slot)
	if !ok || x.notify == "" {
		return
	}
	x.notify = strings.Clone(x.notify)
	ev := JobEvent{NS: r.NS, Queue: r.Queue, ID: r.ID, Channel: x.notify, Event: e.events.hint,
		Attempt: e.attempt(slot), State: StateGone}
	if ev.Event == EventCompleted {
		ev.HasResult, ev.Result, ev.ResultJSON = e.events.hasResult, e.events.result, e.events.resultJSON
	}
	e.events.pending = append(e.events.pending, ev)
}

// publishEvents moves the committed command's events to the output, with
// the states the jobs are in now.
func (e *Engine) publishEvents() {
	if !e.events.on || len(e.events.pending) == 0 {
		return
	}
	at := fromMS(e.now)
	for i := range e.events.pending {
		ev := e.events.pending[i]
		ev.Time = at
		if ev.State != StateGone {
			ev.State = e.stateOf(ev.NS, ev.Queue, ev.ID)
		}
		e.events.out = append(e.events.out, ev)
	}
	e.events.reset()
}

func (e *Engine) stateOf(ns, qn, id string) State {
	q := e.lookupQueue(ns, qn)
	if q == nil {
		return StateGone
	}
	k := makeIDKey(id)
	slot := e.idLookup(q.idx, &k)
	if slot == noSlot {
		return StateGone
	}
	return e.jobs.get(slot).state
}

// noteNow notes a time-derived event of the job in slot, which is still in
// its old state.
func (e *Engine) noteNow(q *queue, slot uint32, event, errText string, after State) {
	if !e.events.on || e.jobs.get(slot).flags&fHasExt == 0 {
		return
	}
	x, ok := e.ext(slot)
	if !ok || x.notify == "" {
		return
	}
	x.notify = strings.Clone(x.notify)
	e.events.out = append(e.events.out, JobEvent{NS: q.ns.name, Queue: q.name, ID: e.jobID(slot), Channel: x.notify,
		Event: event, State: after, Attempt: e.attempt(slot), Error: errText, Time: fromMS(e.now)})
}

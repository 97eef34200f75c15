package beanstalk

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// The stats commands answer YAML in beanstalkd 1.13's exact layout: every
// key, in its order, numbers bare, and the string values 1.13 quotes
// (version, hostname, os, platform, tube and tube names) in double quotes,
// unescaped as beanstalkd leaves them.

// urgentThreshold is beanstalkd's URGENT_THRESHOLD.
const urgentThreshold = 1024

type yamlBuf []byte

func (y *yamlBuf) num(key string, v int64) {
	*y = append(*y, key...)
	*y = append(*y, ": "...)
	*y = strconv.AppendInt(*y, v, 10)
	*y = append(*y, '\n')
}

func (y *yamlBuf) unum(key string, v uint64) {
	*y = append(*y, key...)
	*y = append(*y, ": "...)
	*y = strconv.AppendUint(*y, v, 10)
	*y = append(*y, '\n')
}

func (y *yamlBuf) str(key, v string) {
	*y = append(*y, key...)
	*y = append(*y, ": "...)
	*y = append(*y, v...)
	*y = append(*y, '\n')
}

func (y *yamlBuf) quoted(key, v string) { y.str(key, `"`+v+`"`) }

// secs is beanstalkd's whole seconds: nanoseconds divided, toward zero.
func secs(d time.Duration) int64 { return int64(d / time.Second) }

// stateName maps a job's state to beanstalkd's four. A dead job is buried
// however it got there; a blocked job (waiting on its key, only possible
// for jobs put over HTTP) is not yet eligible, which beanstalkd calls
// delayed.
func stateName(s engine.State) string {
	switch s {
	case engine.StateReady:
		return "ready"
	case engine.StateReserved:
		return "reserved"
	case engine.StateDead:
		return "buried"
	}
	return "delayed"
}

func (s *Server) jobStats(j engine.Job, now time.Time) []byte {
	tube, _ := tubeOf(j.Queue)
	if tube == "" {
		tube = j.Queue
	}
	var left time.Duration
	switch j.State {
	case engine.StateReserved:
		left = j.ReservedUntil.Sub(now)
	case engine.StateDelayed:
		left = j.ActivateAt.Sub(now)
	}
	// chronoq keeps when a job activates, not the delay it was given: the
	// put's delay is the distance from its creation (exact until a release
	// with a delay moves it).
	delay := max(j.ActivateAt.Sub(j.CreatedAt), 0)
	y := yamlBuf("---\n")
	y.unum("id", j.Seq)
	y.quoted("tube", tube)
	y.str("state", stateName(j.State))
	y.unum("pri", uint64(j.Priority))
	y.num("age", secs(now.Sub(j.CreatedAt)))
	y.num("delay", secs(delay))
	y.num("ttr", secs(j.TTR))
	y.num("time-left", max(secs(left), 0))
	file := uint64(j.Payload.Segment)
	if s.opts.NoBinlog {
		file = 0
	}
	y.unum("file", file)
	y.unum("reserves", uint64(j.Attempt))
	y.unum("timeouts", uint64(j.Timeouts))
	y.unum("releases", uint64(j.Releases))
	y.unum("buries", uint64(j.Buries))
	y.unum("kicks", uint64(j.Kicks))
	return y
}

// tubeStats answers stats-tube; the tube exists if it has a queue, a
// connection uses or watches it, or it is "default".
func (s *Server) tubeStats(ctx context.Context, name, queue string, now time.Time) ([]byte, error) {
	ns := s.opts.Namespace
	info, err := s.b.GetQueue(ctx, ns, queue)
	if engine.CodeOf(err) == engine.CodeQueueNotFound && (name == "default" || s.referenced(name)) {
		info, err = engine.QueueInfo{Name: queue}, nil
	}
	if err != nil {
		return nil, err
	}
	urgent := 0
	if info.Counts.Ready > 0 {
		if urgent, err = s.b.UrgentReady(ctx, ns, queue, urgentThreshold); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	t := *s.tube(name)
	s.mu.Unlock()
	var pause, left time.Duration
	if info.Paused && info.PausedUntil.After(now) {
		left = info.PausedUntil.Sub(now)
		pause = left
		if t.pausedUntil.Equal(info.PausedUntil) {
			pause = t.pauseFor // the pause was ours: report its delay
		}
	}
	y := yamlBuf("---\n")
	y.quoted("name", name)
	y.num("current-jobs-urgent", int64(urgent))
	y.unum("current-jobs-ready", info.Counts.Ready)
	y.unum("current-jobs-reserved", info.Counts.Reserved)
	y.unum("current-jobs-delayed", info.Counts.Delayed+info.Counts.Blocked)
	y.unum("current-jobs-buried", info.Counts.Dead)
	y.unum("total-jobs", info.Stats.Put)
	y.num("current-using", int64(t.using))
	y.num("current-watching", int64(t.watching))
	y.num("current-waiting", int64(t.waiting))
	y.unum("cmd-delete", t.deletes)
	y.unum("cmd-pause-tube", t.pauses)
	y.num("pause", secs(pause))
	y.num("pause-time-left", secs(left))
	return y, nil
}

// statKeys are the cmd-* counters of stats, in beanstalkd's order
// (reserve-job and kick-job are counted by beanstalkd but not shown).
var statKeys = [...]struct {
	key string
	op  op
}{
	{"cmd-put", opPut},
	{"cmd-peek", opPeekJob},
	{"cmd-peek-ready", opPeekReady},
	{"cmd-peek-delayed", opPeekDelayed},
	{"cmd-peek-buried", opPeekBuried},
	{"cmd-reserve", opReserve},
	{"cmd-reserve-with-timeout", opReserveTimeout},
	{"cmd-delete", opDelete},
	{"cmd-release", opRelease},
	{"cmd-use", opUse},
	{"cmd-watch", opWatch},
	{"cmd-ignore", opIgnore},
	{"cmd-bury", opBury},
	{"cmd-kick", opKick},
	{"cmd-touch", opTouch},
	{"cmd-stats", opStats},
	{"cmd-stats-job", opStatsJob},
	{"cmd-stats-tube", opStatsTube},
	{"cmd-list-tubes", opListTubes},
	{"cmd-list-tube-used", opListTubeUsed},
	{"cmd-list-tubes-watched", opListTubesWatched},
	{"cmd-pause-tube", opPauseTube},
}

func (s *Server) serverStats(ctx context.Context, now time.Time) ([]byte, error) {
	ns := s.opts.Namespace
	queues, err := s.b.ListQueues(ctx, ns)
	if err != nil {
		return nil, err
	}
	var sum engine.Counts
	var urgent, total uint64
	for _, q := range queues {
		c := q.Counts
		sum.Ready += c.Ready
		sum.Reserved += c.Reserved
		sum.Delayed += c.Delayed + c.Blocked
		sum.Dead += c.Dead
		total += q.Stats.Put
		if c.Ready > 0 {
			n, err := s.b.UrgentReady(ctx, ns, q.Name, urgentThreshold)
			if err != nil {
				return nil, err
			}
			urgent += uint64(n)
		}
	}
	tubes, err := s.listTubes(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var producers, workers, waiting int64
	for _, c := range conns {
		c.prune(now) // so job-timeouts counts what ran out by now
		if c.producer.Load() {
			producers++
		}
		if c.worker.Load() {
			workers++
		}
		if c.waiting.Load() {
			waiting++
		}
	}
	utime, stime := rusage()
	host := hostInfo()

	y := yamlBuf("---\n")
	y.unum("current-jobs-urgent", urgent)
	y.unum("current-jobs-ready", sum.Ready)
	y.unum("current-jobs-reserved", sum.Reserved)
	y.unum("current-jobs-delayed", sum.Delayed)
	y.unum("current-jobs-buried", sum.Dead)
	for _, k := range statKeys {
		y.unum(k.key, s.cmds[k.op].Load())
	}
	y.unum("job-timeouts", s.timeouts.Load())
	y.unum("total-jobs", total)
	y.num("max-job-size", int64(s.opts.MaxJobSize))
	y.num("current-tubes", int64(len(tubes)))
	y.num("current-connections", int64(len(conns)))
	y.num("current-producers", producers)
	y.num("current-workers", workers)
	y.num("current-waiting", waiting)
	y.unum("total-connections", s.totalCon.Load())
	y.num("pid", int64(s.pid))
	y.quoted("version", s.opts.Version)
	y.str("rusage-utime", cTime(utime))
	y.str("rusage-stime", cTime(stime))
	y.num("uptime", secs(now.Sub(s.started)))
	y.num("binlog-oldest-index", 0)
	y.num("binlog-current-index", 0)
	y.num("binlog-records-migrated", 0)
	y.num("binlog-records-written", 0)
	y.num("binlog-max-size", s.opts.BinlogMaxSize)
	y.str("draining", strconv.FormatBool(s.draining.Load()))
	y.str("id", s.id)
	y.quoted("hostname", host.hostname)
	y.quoted("os", host.os)
	y.quoted("platform", host.platform)
	return y, nil
}

// cTime formats a duration as beanstalkd's "%d.%06d" of a timeval.
func cTime(d time.Duration) string {
	us := d.Microseconds()
	frac := strconv.FormatInt(us%1e6, 10)
	for len(frac) < 6 {
		frac = "0" + frac
	}
	return strconv.FormatInt(us/1e6, 10) + "." + frac
}

// listTubes names every tube: "default" first, then the namespace's
// queues that a tube name reaches, oldest first, then tubes that exist
// only because a connection uses or watches them, in the order they were
// first named. beanstalkd forgets an empty tube nobody refers to; a
// chronoq queue lives until deleted, so it stays listed.
func (s *Server) listTubes(ctx context.Context) ([]string, error) {
	queues, err := s.b.ListQueues(ctx, s.opts.Namespace)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(queues, func(a, b engine.QueueInfo) int { return a.CreatedAt.Compare(b.CreatedAt) })
	names := []string{"default"}
	seen := map[string]bool{"default": true}
	for _, q := range queues {
		if t, ok := tubeOf(q.Name); ok && !seen[t] {
			seen[t] = true
			names = append(names, t)
		}
	}
	type ref struct {
		name string
		seq  uint64
	}
	var refs []ref
	s.mu.Lock()
	for name, t := range s.tubes {
		if !seen[name] && t.using+t.watching > 0 {
			refs = append(refs, ref{name, t.seq})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(a.seq, b.seq) })
	for _, r := range refs {
		names = append(names, r.name)
	}
	return names, nil
}

func yamlList(names []string) []byte {
	y := yamlBuf("---\n")
	for _, n := range names {
		y = append(y, "- "...)
		y = append(y, n...)
		y = append(y, '\n')
	}
	return y
}

// referenced reports whether a connection uses or watches a tube.
func (s *Server) referenced(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tubes[name]
	return t != nil && t.using+t.watching > 0
}

// deleted counts a delete for stats-tube's cmd-delete.
func (s *Server) deleted(queue string) {
	name, ok := tubeOf(queue)
	if !ok {
		return
	}
	s.mu.Lock()
	s.tube(name).deletes++
	s.mu.Unlock()
}

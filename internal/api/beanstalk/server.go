package beanstalk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Backend is what the protocol needs from the broker (*broker.Broker
// implements it). Every call is answered after its effects are durable.
type Backend interface {
	Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error)
	// PutQueued starts a put and returns at once; puts started one after
	// another run in that order. wait gives the durable answer.
	PutQueued(ctx context.Context, ns, q string, req engine.PutRequest) (wait func() (engine.PutResult, error))
	Take(ctx context.Context, ns string, req engine.TakeRequest, wait time.Duration) ([]engine.Job, error)
	TakeBest(ctx context.Context, ns string, queues []string) ([]engine.Job, error)
	ReserveJob(ctx context.Context, ns, q, id string, ttr *time.Duration) (engine.Job, error)
	Ack(ctx context.Context, ns, q, id string, req engine.AckRequest) (engine.AckResult, error)
	Release(ctx context.Context, ns, q, id string, req engine.ReleaseRequest) (engine.State, error)
	Touch(ctx context.Context, ns, q, id string, req engine.TouchRequest) (time.Time, error)
	Bury(ctx context.Context, ns, q, id string, req engine.BuryRequest) error
	Cancel(ctx context.Context, ns, q, id, receipt string) error
	JobBySeq(ctx context.Context, ns string, seq uint64) (engine.Job, error)
	PeekState(ctx context.Context, ns, q string, state engine.State) (engine.Job, error)
	KickBounded(ctx context.Context, ns, q string, n int) (int, error)
	KickJob(ctx context.Context, ns, q, id string) error
	PutQueue(ctx context.Context, ns, q string, p engine.QueuePatch) (engine.QueueInfo, bool, error)
	GetQueue(ctx context.Context, ns, q string) (engine.QueueInfo, error)
	ListQueues(ctx context.Context, ns string) ([]engine.QueueInfo, error)
	PauseFor(ctx context.Context, ns, q string, d time.Duration) (engine.QueueInfo, error)
	UrgentReady(ctx context.Context, ns, q string, threshold uint32) (int, error)
}

// Options configures a Server. The zero value serves namespace "default"
// with beanstalkd's defaults.
type Options struct {
	Namespace  string // tubes are the queues of this namespace; default "default"
	MaxJobSize int    // largest job body (-z); default 65535, at most MaxJobSizeLimit
	// BinlogMaxSize is reported as binlog-max-size (beanstalkd's -s).
	BinlogMaxSize int64
	// NoBinlog says the jobs are in no log that outlives the process
	// (chronoq beanstalkd without -b): stats-job then reports file 0, as
	// beanstalkd without a binlog does, instead of the log segment.
	NoBinlog bool
	Version  string // reported by stats; default "1.13"
	Logger   *slog.Logger
	// IdleTimeout closes a connection that sends nothing for that long
	// while it is not waiting in a reserve; 0 (the default, as in
	// beanstalkd) never does: workers keep idle connections for hours.
	IdleTimeout time.Duration
}

// DefaultMaxJobSize is beanstalkd's default -z.
const DefaultMaxJobSize = 1<<16 - 1

// MaxJobSizeLimit is the largest MaxJobSize: the largest payload chronoq
// stores. beanstalkd allows 1 GiB; a larger -z is cut to this limit with
// a warning, as beanstalkd cuts one above its own.
const MaxJobSizeLimit = engine.MaxPayloadHard

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("beanstalk: server closed")

// Server serves the protocol on any number of listeners.
type Server struct {
	b    Backend
	opts Options
	lg   *slog.Logger

	ctx    context.Context // ends at Close: in-flight waits give up
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	tubes     map[string]*tubeState // tube name → what connections do with it
	tubeSeq   uint64
	closed    bool
	wg        sync.WaitGroup

	draining atomic.Bool
	cmds     [numOps]atomic.Uint64
	totalCon atomic.Uint64
	panics   atomic.Int64
	timeouts atomic.Uint64
	// lastHTTPWarn is when a cross-protocol request was last logged as a
	// warning (unix ns).
	lastHTTPWarn atomic.Int64
	started      time.Time
	id           string
	pid          int
}

// tubeState is the per-tube state beanstalkd keeps in memory and chronoq
// does not: which connections use, watch and wait on it, and counters
// that live as long as the process.
type tubeState struct {
	seq                      uint64 // order of first reference, for list-tubes
	using, watching, waiting int
	deletes, pauses          uint64
	pauseFor                 time.Duration // the last pause-tube's delay
	pausedUntil              time.Time     // when that pause ends
}

// New makes a server over b.
func New(b Backend, opts Options) *Server {
	if opts.Namespace == "" {
		opts.Namespace = engine.DefaultNamespace
	}
	if opts.MaxJobSize <= 0 {
		opts.MaxJobSize = DefaultMaxJobSize
	}
	if opts.Version == "" {
		opts.Version = "1.13"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxJobSize > MaxJobSizeLimit {
		opts.Logger.Warn(fmt.Sprintf("beanstalk: maximum job size was set to %d", MaxJobSizeLimit),
			"asked", opts.MaxJobSize, "why", "chronoq stores jobs of at most 64 MiB")
		opts.MaxJobSize = MaxJobSizeLimit
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		b: b, opts: opts, lg: opts.Logger,
		ctx: ctx, cancel: cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
		tubes:     map[string]*tubeState{},
		started:   time.Now(),
		id:        hex.EncodeToString(id[:]),
		pid:       os.Getpid(),
	}
	s.tube("default") // beanstalkd's default tube always exists
	return s
}

// Serve accepts connections on ln until Close (then it returns
// ErrServerClosed) or until ln fails.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	if exposed(ln.Addr()) {
		s.lg.Warn("beanstalk: the beanstalkd protocol has no authentication: anyone who can reach this address can put, reserve and delete jobs; listen on 127.0.0.1 (-l) or firewall the port",
			"addr", ln.Addr().String())
	}
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				// Out of file descriptors or a passing accept error:
				// back off instead of spinning, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.lg.Warn("beanstalk: accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.totalCon.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
		}()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// SetDraining puts the server into beanstalkd's drain mode (its SIGUSR1):
// puts are answered DRAINING, everything else works.
func (s *Server) SetDraining(on bool) { s.draining.Store(on) }

// Close stops the listeners, ends every connection — releasing the jobs
// they had reserved, as beanstalkd does for a closed connection — and
// waits for them. The backend must still be open.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.draining.Store(true)
	var errs []error
	for ln := range s.listeners {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) count(o op) { s.cmds[o].Add(1) }

// tube returns the state of a tube, creating it. Callers hold s.mu, except
// New.
func (s *Server) tube(name string) *tubeState {
	t := s.tubes[name]
	if t == nil {
		s.tubeSeq++
		t = &tubeState{seq: s.tubeSeq}
		s.tubes[name] = t
	}
	return t
}

// exposed reports a listening address reachable from other hosts: TCP on
// any address but loopback.
func exposed(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && !t.IP.IsLoopback()
}

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/beanstalkd/go-beanstalk"
)

// beanstalkTarget speaks the beanstalkd protocol through go-beanstalk:
// put, reserve-with-timeout, delete, in a fresh tube per run. It drives
// beanstalkd itself and chronoq's beanstalkd-protocol listener alike.
type beanstalkTarget struct {
	addr, tube string
	pipeline   int // --pipeline: each connection also gets a raw put connection
}

// OpenBeanstalk opens a beanstalkd-protocol target: chronoq's listener
// or beanstalkd itself.
func OpenBeanstalk(_ context.Context, cfg Config, addr, run string) (Target, error) {
	return &beanstalkTarget{addr: addr, tube: run, pipeline: cfg.Pipeline}, nil
}

func (t *beanstalkTarget) Addr() string { return t.addr }
func (t *beanstalkTarget) Caps() Caps   { return Caps{DelayResolution: time.Second} }
func (t *beanstalkTarget) Close() error { return nil }

// Cleanup leaves jobs of put runs in place: beanstalkd has no "drop tube",
// and deleting them one by one would take longer than the run.
func (t *beanstalkTarget) Cleanup(context.Context) error { return nil }

// OpTimeout bounds one request beyond its own wait, since go-beanstalk has
// no contexts: a server that stops answering fails the op instead of
// hanging the run.
const OpTimeout = 30 * time.Second

// deadlineConn keeps a read deadline at least OpTimeout/2 beyond the
// current command's wait. It moves the deadline only when less is left:
// moving it is a runtime timer update, and one per read of each of a
// thousand connections was load-generator CPU per job that grew with the
// connection count.
type deadlineConn struct {
	net.Conn
	wait time.Duration // the current command's own wait (reserve)
	set  time.Time     // the deadline in force
}

func (d *deadlineConn) Read(p []byte) (int, error) {
	now := time.Now()
	if d.set.Before(now.Add(d.wait + OpTimeout/2)) {
		d.set = now.Add(d.wait + OpTimeout)
		if err := d.Conn.SetReadDeadline(d.set); err != nil {
			return 0, err
		}
	}
	return d.Conn.Read(p)
}

func (t *beanstalkTarget) Connect(ctx context.Context) (Conn, error) {
	nc, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	dc := &deadlineConn{Conn: nc}
	c := beanstalk.NewConn(dc)
	bc := &beanstalkConn{dc: dc, c: c, tube: beanstalk.NewTube(c, t.tube), set: beanstalk.NewTubeSet(c, t.tube)}
	// "use" and "watch"/"ignore default" before the clock starts
	if _, err := bc.tube.Kick(0); err != nil {
		c.Close()
		return nil, err
	}
	if _, _, err := bc.set.Reserve(0); !errors.Is(err, beanstalk.ErrTimeout) {
		c.Close()
		if err == nil {
			err = errors.New("fresh tube answered a job")
		}
		return nil, err
	}
	if t.pipeline > 1 {
		if bc.pipe, err = t.dialPipe(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return bc, nil
}

// dialPipe opens a connection for pipelined puts: go-beanstalk answers
// one command at a time, so --pipeline writes the protocol itself.
func (t *beanstalkTarget) dialPipe(ctx context.Context) (*pipeConn, error) {
	nc, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	p := &pipeConn{nc: nc, r: bufio.NewReader(nc)}
	nc.SetDeadline(time.Now().Add(OpTimeout))
	if _, err := fmt.Fprintf(nc, "use %s\r\n", t.tube); err != nil {
		nc.Close()
		return nil, err
	}
	if line, err := p.r.ReadString('\n'); err != nil || line != "USING "+t.tube+"\r\n" {
		nc.Close()
		return nil, fmt.Errorf("use %s: %q %v", t.tube, line, err)
	}
	return p, nil
}

type pipeConn struct {
	nc  net.Conn
	r   *bufio.Reader
	buf []byte
}

type beanstalkConn struct {
	dc   *deadlineConn
	c    *beanstalk.Conn
	tube *beanstalk.Tube
	set  *beanstalk.TubeSet
	pipe *pipeConn // --pipeline
}

func (c *beanstalkConn) Close() error {
	if c.pipe != nil {
		c.pipe.nc.Close()
	}
	return c.c.Close()
}

func (c *beanstalkConn) PutPipelined(_ context.Context, payload []byte, lat []time.Duration) error {
	p := c.pipe
	if p == nil {
		return errors.New("put: no pipelining connection (--pipeline)")
	}
	p.nc.SetDeadline(time.Now().Add(OpTimeout))
	sent := make([]time.Time, len(lat))
	for i := range lat {
		p.buf = fmt.Appendf(p.buf[:0], "put 1024 0 30 %d\r\n%s\r\n", len(payload), payload)
		sent[i] = time.Now()
		if _, err := p.nc.Write(p.buf); err != nil {
			return err
		}
	}
	// Every answer is read, a refused put's too, so the next round starts
	// with its own answers.
	var refused error
	for i := range lat {
		line, err := p.r.ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, "INSERTED ") && refused == nil {
			refused = fmt.Errorf("put: %q", strings.TrimSpace(line))
		}
		lat[i] = time.Since(sent[i])
	}
	return refused
}

func (c *beanstalkConn) Put(_ context.Context, payload []byte, delay time.Duration) error {
	c.dc.wait = 0
	_, err := c.tube.Put(payload, 1024, delay, 30*time.Second)
	return err
}

func (c *beanstalkConn) Take(_ context.Context, wait time.Duration) (Job, error) {
	c.dc.wait = wait
	id, body, err := c.set.Reserve(wait)
	if errors.Is(err, beanstalk.ErrTimeout) {
		return Job{}, ErrEmpty
	}
	if err != nil {
		return Job{}, err
	}
	return Job{Payload: body, Ref: id}, nil
}

func (c *beanstalkConn) Ack(_ context.Context, j Job) error {
	c.dc.wait = 0
	return c.c.Delete(j.Ref.(uint64))
}

package peers

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/chronoq/chronoq/internal/bench"
)

// natsTarget is a JetStream work-queue stream with file storage (the
// server is started with sync_interval: always, so a PubAck means the
// message was fsynced) and one durable pull consumer shared by all
// workers. put: Publish and wait for the PubAck; take: the next message
// of a pull iterator holding one message at a time; ack: DoubleAck (waits
// for the server to confirm the ack, like every other target's ack).
type natsTarget struct {
	addr, stream, subject string
	nc                    *nats.Conn
	js                    jetstream.JetStream
}

func openNATS(ctx context.Context, _ bench.Config, addr, run string) (bench.Target, error) {
	name := strings.ReplaceAll(run, "-", "_")
	t := &natsTarget{addr: addr, stream: name, subject: "bench." + name}
	var err error
	if t.nc, err = nats.Connect("nats://"+addr, nats.Timeout(5*time.Second)); err != nil {
		return nil, err
	}
	if t.js, err = jetstream.New(t.nc); err != nil {
		t.nc.Close()
		return nil, err
	}
	s, err := t.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: t.stream, Subjects: []string{t.subject},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: 1,
	})
	if err == nil {
		_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
			MaxAckPending: 100000, MaxWaiting: 4096,
		})
	}
	if err != nil {
		t.nc.Close()
		return nil, err
	}
	return t, nil
}

func (t *natsTarget) Addr() string { return t.addr }
func (t *natsTarget) Caps() bench.Caps {
	return bench.Caps{NoDelayReason: "JetStream has no per-message delay for work queues (2.12's message schedules are cron-like, whole seconds, one subject per schedule)"}
}

func (t *natsTarget) Close() error { t.nc.Close(); return nil }

func (t *natsTarget) Cleanup(ctx context.Context) error { return t.js.DeleteStream(ctx, t.stream) }

func (t *natsTarget) Connect(ctx context.Context) (bench.Conn, error) {
	nc, err := nats.Connect("nats://"+t.addr, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cons, err := js.Consumer(ctx, t.stream, "bench")
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsConn{t: t, nc: nc, js: js, cons: cons}, nil
}

type natsConn struct {
	t    *natsTarget
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
	it   jetstream.MessagesContext // made by the first take
}

func (c *natsConn) Close() error {
	if c.it != nil {
		c.it.Stop()
	}
	c.nc.Close()
	return nil
}

func (c *natsConn) Put(ctx context.Context, payload []byte, delay time.Duration) error {
	if delay > 0 {
		return bench.ErrUnsupported
	}
	ctx, cancel := context.WithTimeout(ctx, bench.OpTimeout)
	defer cancel()
	_, err := c.js.Publish(ctx, c.t.subject, payload)
	return err
}

func (c *natsConn) Take(_ context.Context, wait time.Duration) (bench.Job, error) {
	if c.it == nil {
		it, err := c.cons.Messages(jetstream.PullMaxMessages(1))
		if err != nil {
			return bench.Job{}, err
		}
		c.it = it
	}
	msg, err := c.it.Next(jetstream.NextMaxWait(wait))
	if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
		return bench.Job{}, bench.ErrEmpty
	}
	if err != nil {
		return bench.Job{}, err
	}
	return bench.Job{Payload: msg.Data(), Ref: msg}, nil
}

func (c *natsConn) Ack(ctx context.Context, j bench.Job) error {
	ctx, cancel := context.WithTimeout(ctx, bench.OpTimeout)
	defer cancel()
	return j.Ref.(jetstream.Msg).DoubleAck(ctx)
}

package peers

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/chronoq/chronoq/internal/bench"
)

// rabbitTarget is a quorum queue (replicated log, fsynced before confirms)
// with publisher confirms and manual acks. put: publish persistent and wait
// for the confirm; take: a consumer per connection with prefetch 1 (made
// by the first take); ack: basic.ack (AMQP 0-9-1 has no ack confirmation,
// so the ack's latency is only the client's write).
type rabbitTarget struct {
	addr, url, queue string
	conn             *amqp.Connection
}

func openRabbitMQ(_ context.Context, _ bench.Config, addr, run string) (bench.Target, error) {
	t := &rabbitTarget{addr: addr, url: "amqp://guest:guest@" + addr + "/", queue: run}
	var err error
	if t.conn, err = amqp.DialConfig(t.url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)}); err != nil {
		return nil, err
	}
	ch, err := t.conn.Channel()
	if err == nil {
		_, err = ch.QueueDeclare(t.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		ch.Close()
	}
	if err != nil {
		t.conn.Close()
		return nil, err
	}
	return t, nil
}

func (t *rabbitTarget) Addr() string { return t.addr }
func (t *rabbitTarget) Caps() bench.Caps {
	return bench.Caps{NoDelayReason: "RabbitMQ delays need the delayed-message exchange plugin, which the Debian package does not ship"}
}
func (t *rabbitTarget) Close() error { return t.conn.Close() }

func (t *rabbitTarget) Cleanup(context.Context) error {
	ch, err := t.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	_, err = ch.QueueDelete(t.queue, false, false, false)
	return err
}

func (t *rabbitTarget) Connect(context.Context) (bench.Conn, error) {
	conn, err := amqp.DialConfig(t.url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &rabbitConn{t: t, conn: conn, ch: ch}, nil
}

type rabbitConn struct {
	t          *rabbitTarget
	conn       *amqp.Connection
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
}

func (c *rabbitConn) Close() error { return c.conn.Close() }

func (c *rabbitConn) Put(ctx context.Context, payload []byte, delay time.Duration) error {
	if delay > 0 {
		return bench.ErrUnsupported
	}
	ctx, cancel := context.WithTimeout(ctx, bench.OpTimeout)
	defer cancel()
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, "", c.t.queue, false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, ContentType: "application/octet-stream", Body: payload})
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("publish nacked")
	}
	return nil
}

func (c *rabbitConn) Take(ctx context.Context, wait time.Duration) (bench.Job, error) {
	if c.deliveries == nil {
		if err := c.ch.Qos(1, 0, false); err != nil {
			return bench.Job{}, err
		}
		d, err := c.ch.Consume(c.t.queue, "", false, false, false, false, nil)
		if err != nil {
			return bench.Job{}, err
		}
		c.deliveries = d
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case d, ok := <-c.deliveries:
		if !ok {
			return bench.Job{}, fmt.Errorf("consumer closed")
		}
		return bench.Job{Payload: d.Body, Ref: d}, nil
	case <-timer.C:
		return bench.Job{}, bench.ErrEmpty
	case <-ctx.Done():
		return bench.Job{}, ctx.Err()
	}
}

func (c *rabbitConn) Ack(_ context.Context, j bench.Job) error {
	return j.Ref.(amqp.Delivery).Ack(false)
}

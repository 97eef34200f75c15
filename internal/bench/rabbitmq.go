package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
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

func openRabbitMQ(_ context.Context, _ Config, addr, run string) (Target, error) {
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
func (t *rabbitTarget) Caps() Caps {
	return Caps{NoDelayReason: "RabbitMQ delays need the delayed-message exchange plugin, which the Debian package does not ship"}
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

func (t *rabbitTarget) Connect(context.Context) (Conn, error) {
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
		return ErrUnsupported
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
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

func (c *rabbitConn) Take(ctx context.Context, wait time.Duration) (Job, error) {
	if c.deliveries == nil {
		if err := c.ch.Qos(1, 0, false); err != nil {
			return Job{}, err
		}
		d, err := c.ch.Consume(c.t.queue, "", false, false, false, false, nil)
		if err != nil {
			return Job{}, err
		}
		c.deliveries = d
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case d, ok := <-c.deliveries:
		if !ok {
			return Job{}, fmt.Errorf("consumer closed")
		}
		return Job{Payload: d.Body, ref: d}, nil
	case <-timer.C:
		return Job{}, errEmpty
	case <-ctx.Done():
		return Job{}, ctx.Err()
	}
}

func (c *rabbitConn) Ack(_ context.Context, j Job) error {
	return j.ref.(amqp.Delivery).Ack(false)
}

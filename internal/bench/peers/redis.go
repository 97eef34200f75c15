package peers

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/bench"
)

// redisTarget is lmstfy's layout on Redis: a job body key per job, a ZSET
// timer (score: due time in ms) for delayed and reserved jobs, and a LIST
// ready queue; a Lua pump moves due jobs from the timer to the ready queue
// (dropping those whose body was deleted, i.e. acked). lmstfy runs the pump
// in its server; here the bench runs it, every 10 ms (lmstfy ticks every
// second; the shorter tick gives Redis its best lateness). Operations, each
// one round trip where lmstfy needs one or more:
//
//	put:  MULTI; SET body; LPUSH ready | ZADD timer due; EXEC
//	take: BRPOP ready, then MULTI; ZADD timer now+ttr (the reservation); GET body; EXEC
//	ack:  DEL body
type redisTarget struct {
	addr                         string
	prefix, ready, timer, bodies string
	pump                         *redis.Client
	stop                         chan struct{}
	wg                           sync.WaitGroup
	seq                          atomic.Uint64
}

const redisPumpEvery = 10 * time.Millisecond

var redisPump = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  if redis.call('EXISTS', ARGV[3] .. id) == 1 then
    redis.call('LPUSH', KEYS[2], id)
  end
end
return #due
`)

func openRedis(ctx context.Context, _ bench.Config, addr, run string) (bench.Target, error) {
	p := "chronoq-" + run + ":"
	t := &redisTarget{addr: addr, prefix: p, ready: p + "ready", timer: p + "timer", bodies: p + "job:",
		pump: redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1}), stop: make(chan struct{})}
	if err := t.pump.Ping(ctx).Err(); err != nil {
		t.pump.Close()
		return nil, err
	}
	if err := redisPump.Load(ctx, t.pump).Err(); err != nil {
		t.pump.Close()
		return nil, err
	}
	t.wg.Add(1)
	go t.runPump()
	return t, nil
}

func (t *redisTarget) runPump() {
	defer t.wg.Done()
	tick := time.NewTicker(redisPumpEvery)
	defer tick.Stop()
	const batch = 1000
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), bench.OpTimeout)
			n, err := redisPump.Run(ctx, t.pump, []string{t.timer, t.ready},
				time.Now().UnixMilli(), batch, t.bodies).Int()
			cancel()
			if err != nil || n < batch {
				break
			}
		}
	}
}

func (t *redisTarget) Addr() string     { return t.addr }
func (t *redisTarget) Caps() bench.Caps { return bench.Caps{DelayResolution: time.Millisecond} }

func (t *redisTarget) Close() error {
	close(t.stop)
	t.wg.Wait()
	return t.pump.Close()
}

// Cleanup unlinks the run's keys.
func (t *redisTarget) Cleanup(ctx context.Context) error {
	iter := t.pump.Scan(ctx, 0, t.prefix+"*", 1000).Iterator()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := t.pump.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

func (t *redisTarget) Connect(ctx context.Context) (bench.Conn, error) {
	c := redis.NewClient(&redis.Options{Addr: t.addr, PoolSize: 1, MinIdleConns: 1,
		ReadTimeout: bench.OpTimeout, WriteTimeout: bench.OpTimeout})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return &redisConn{t: t, c: c}, nil
}

type redisConn struct {
	t *redisTarget
	c *redis.Client
}

func (c *redisConn) Close() error { return c.c.Close() }

func (c *redisConn) Put(ctx context.Context, payload []byte, delay time.Duration) error {
	id := strconv.FormatUint(c.t.seq.Add(1), 36)
	_, err := c.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, c.t.bodies+id, payload, 0)
		if delay > 0 {
			p.ZAdd(ctx, c.t.timer, redis.Z{Score: float64(time.Now().Add(delay).UnixMilli()), Member: id})
		} else {
			p.LPush(ctx, c.t.ready, id)
		}
		return nil
	})
	return err
}

func (c *redisConn) Take(ctx context.Context, wait time.Duration) (bench.Job, error) {
	kv, err := c.c.BRPop(ctx, wait, c.t.ready).Result()
	if errors.Is(err, redis.Nil) {
		return bench.Job{}, bench.ErrEmpty
	}
	if err != nil {
		return bench.Job{}, err
	}
	id := kv[1]
	var body *redis.StringCmd
	_, err = c.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, c.t.timer, redis.Z{Score: float64(time.Now().Add(30 * time.Second).UnixMilli()), Member: id})
		body = p.Get(ctx, c.t.bodies+id)
		return nil
	})
	if err != nil {
		return bench.Job{}, err
	}
	b, err := body.Bytes()
	if err != nil {
		return bench.Job{}, err
	}
	return bench.Job{Payload: b, Ref: id}, nil
}

func (c *redisConn) Ack(ctx context.Context, j bench.Job) error {
	return c.c.Del(ctx, c.t.bodies+j.Ref.(string)).Err()
}

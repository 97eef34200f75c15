package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/chronoq/chronoq/client"
)

// cliContext is cancelled by Ctrl-C, so a long take --wait can be
// interrupted without leaving the terminal stuck.
func cliContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

func cliPut(args []string) error {
	c := newCLICmd("put", "QUEUE [PAYLOAD|@FILE|-] [flags]",
		"Put a job into QUEUE and print its id.\n\n"+
			"The payload is the argument, a file (@FILE) or stdin (-). It is sent as JSON when it\n"+
			"parses as JSON, else as bytes (payload_base64); --binary forces bytes",
		`chronoq put emails '{"to":"a@b.c"}' --delay 10s --key user:42 --tag user_id=42`)
	var delay, ttl, ttr cliDuration
	var at cliTime
	priority, tries := newUint32Flag(), newUint32Flag()
	tags := cliTags{}
	c.fs.Var(&delay, "delay", "activate after this `duration` (e.g. 10s, 1h30m, or seconds)")
	c.fs.Var(&at, "at", "activate at this RFC 3339 `time`")
	c.fs.Var(priority, "priority", "`priority`, lower first (default: the queue's)")
	c.fs.Var(&ttl, "ttl", "lifetime from the put, a `duration` (default: the queue's; 0: none)")
	c.fs.Var(&ttr, "ttr", "time to run of each reservation, a `duration` (default: the queue's)")
	c.fs.Var(tries, "tries", "`n` deliveries before dead, 0 = unlimited (default: the queue's)")
	key := c.fs.String("key", "", "per-key FIFO ordering key")
	c.fs.Var(tags, "tag", "tag `name=value` (repeatable)")
	replyTo := c.fs.String("reply-to", "", "queue that receives the ack's result")
	cron := c.fs.String("cron", "", `cron spec ("0 8 * * *", "@every 5m"); re-armed on each ack`)
	id := c.fs.String("id", "", "client job id (a put with an existing id is a duplicate)")
	idem := c.fs.String("idempotency-key", "", "dedup key (default: a random one, so retries never duplicate)")
	binary := c.fs.Bool("binary", false, "send the payload as bytes even if it parses as JSON")
	pos, err := c.parse(args, 1, 2)
	if err != nil {
		return cliDone(err)
	}
	if len(pos) < 2 {
		return errors.New("put: give a payload: an argument, @FILE, or - for stdin (null for none)")
	}
	p := client.PutOptions{
		ID: *id, Delay: delay.v, At: at.v, Priority: priority.u32(), TTL: ttl.ptr(), TTR: ttr.v,
		Tries: tries.u32(), Key: *key, Tags: tags.orNil(), ReplyTo: *replyTo, Cron: *cron, IdempotencyKey: *idem,
	}
	if p.Payload, p.PayloadBytes, err = cliPayload(pos[1], *binary); err != nil {
		return err
	}
	ctx, cancel := cliContext()
	defer cancel()
	res, err := c.client().Put(ctx, pos[0], p)
	if err != nil {
		return err
	}
	if c.conn.json {
		return cliJSON(res)
	}
	if res.Duplicate {
		fmt.Fprintf(cliErr, "duplicate: the queue already has this job (state %s)\n", res.State)
	}
	fmt.Fprintln(cliOut, res.ID)
	return nil
}

func cliTake(args []string) error {
	c := newCLICmd("take", "QUEUE... [flags]",
		"Reserve jobs and print them with the receipts that ack and nack need.\n\n"+
			"Several queues are tried in the order given",
		`chronoq take emails --max 10 --wait 20s --json`)
	maxJobs := c.fs.Int("max", 1, "jobs at most (1-1000)")
	var ttr, wait cliDuration
	c.fs.Var(&ttr, "ttr", "TTR of this reservation, a `duration` (default: each job's)")
	c.fs.Var(&wait, "wait", "wait this `duration` for a job (at most 60s; default: answer at once)")
	pos, err := c.parse(args, 1, -1)
	if err != nil {
		return cliDone(err)
	}
	ctx, cancel := cliContext()
	defer cancel()
	cl := c.client()
	o := client.TakeOptions{Max: *maxJobs, TTR: ttr.v, Wait: wait.v}
	var jobs []*client.Job
	if len(pos) == 1 {
		jobs, err = cl.Take(ctx, pos[0], o)
	} else {
		jobs, err = cl.TakeMulti(ctx, pos, o)
	}
	if err != nil {
		return err
	}
	if jobs == nil {
		jobs = []*client.Job{}
	}
	if c.conn.json {
		return cliJSON(map[string][]*client.Job{"jobs": jobs})
	}
	if len(jobs) == 0 {
		fmt.Fprintln(cliErr, "no job ready")
		return nil
	}
	return cliJobsTable(jobs, true)
}

func cliAck(args []string) error {
	c := newCLICmd("ack", "QUEUE ID RECEIPT [flags]",
		"Finish a reserved job and print its new state.\n\n"+
			"--result takes JSON text, @FILE or - for stdin",
		`chronoq ack emails 01JD3W0Q8Z6M1N2P3Q4R5S6T7V 01JD3W1A2B3C4D5E6F7G8H9J0K --result '{"sent":true}'`)
	result := c.fs.String("result", "", "`result`: JSON text, @FILE, or - for stdin")
	var resched cliDuration
	var reschedAt cliTime
	c.fs.Var(&resched, "reschedule", "keep the job and run it again after this `duration`")
	c.fs.Var(&reschedAt, "reschedule-at", "keep the job and run it again at this RFC 3339 `time`")
	pos, err := c.parse(args, 3, 3)
	if err != nil {
		return cliDone(err)
	}
	var o client.AckOptions
	if *result != "" {
		raw, err := cliJSONArg("result", *result)
		if err != nil {
			return err
		}
		o.Result = raw
	}
	if resched.set || !reschedAt.v.IsZero() {
		o.Reschedule = &client.Reschedule{Delay: resched.v, At: reschedAt.v}
	}
	ctx, cancel := cliContext()
	defer cancel()
	res, err := c.client().Ack(ctx, pos[0], pos[1], pos[2], &o)
	if err != nil {
		return err
	}
	return c.answer(res, res.State)
}

func cliNack(args []string) error {
	c := newCLICmd("nack", "QUEUE ID RECEIPT [flags]",
		"Give a reserved job back for a retry and print its new state.\n\n"+
			"Without --delay the queue's backoff decides when it comes back",
		`chronoq nack emails 01JD3W0Q8Z6M1N2P3Q4R5S6T7V 01JD3W1A2B3C4D5E6F7G8H9J0K --delay 5s --error "smtp timeout"`)
	var delay cliDuration
	c.fs.Var(&delay, "delay", "retry after exactly this `duration` (0s: at once)")
	msg := c.fs.String("error", "", "error `text`, kept as the job's last_error")
	pos, err := c.parse(args, 3, 3)
	if err != nil {
		return cliDone(err)
	}
	ctx, cancel := cliContext()
	defer cancel()
	st, err := c.client().Nack(ctx, pos[0], pos[1], pos[2], &client.NackOptions{Delay: delay.ptr(), Error: *msg})
	if err != nil {
		return err
	}
	return c.answer(map[string]string{"state": st}, st)
}

func cliPeek(args []string) error {
	c := newCLICmd("peek", "QUEUE ID [flags]", "Show a job without changing it",
		`chronoq peek emails order-42`)
	pos, err := c.parse(args, 2, 2)
	if err != nil {
		return cliDone(err)
	}
	ctx, cancel := cliContext()
	defer cancel()
	j, err := c.client().Peek(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	if c.conn.json {
		return cliJSON(j)
	}
	return cliJobDetail(j)
}

func cliList(args []string) error {
	c := newCLICmd("list", "QUEUE [flags]",
		"List a queue's jobs, optionally filtered by state, key and tags",
		`chronoq list emails --state ready,delayed --tag user_id=42 --limit 50`)
	var states cliStates
	tags := cliTags{}
	c.fs.Var(&states, "state", "`states` to list, comma-separated (delayed, ready, blocked, reserved, dead, completed)")
	key := c.fs.String("key", "", "only jobs with this key")
	c.fs.Var(tags, "tag", "only jobs with tag `name=value` (repeatable)")
	limit := c.fs.Int("limit", 100, "list at most this many jobs (0: all)")
	pos, err := c.parse(args, 1, 1)
	if err != nil {
		return cliDone(err)
	}
	if *limit < 0 {
		return errors.New("--limit: must not be negative")
	}
	f := client.Filter{States: states, Key: *key, Tags: tags.orNil()}
	if *limit > 0 {
		f.Limit = min(*limit, 1000)
	} else {
		f.Limit = 1000
	}
	ctx, cancel := cliContext()
	defer cancel()
	it := c.client().List(ctx, pos[0], f)
	jobs := []*client.Job{}
	for (*limit == 0 || len(jobs) < *limit) && it.Next(ctx) {
		jobs = append(jobs, it.Job())
	}
	if err := it.Err(); err != nil {
		return err
	}
	if c.conn.json {
		return cliJSON(map[string][]*client.Job{"jobs": jobs})
	}
	return cliJobsTable(jobs, false)
}

func cliCancel(args []string) error {
	c := newCLICmd("cancel", "QUEUE [ID] [flags]",
		"Delete one job, or the jobs matching a filter.\n\n"+
			"A reserved job needs --receipt. With a filter, every matching job of QUEUE is deleted\n"+
			"(--all-queues: of the whole namespace, no QUEUE); without --state, reserved jobs are spared",
		`chronoq cancel emails --state delayed --tag user_id=42`)
	receipt := c.fs.String("receipt", "", "receipt of a reserved job")
	var states cliStates
	tags := cliTags{}
	c.fs.Var(&states, "state", "only jobs in these `states`, comma-separated")
	key := c.fs.String("key", "", "only jobs with this key")
	c.fs.Var(tags, "tag", "only jobs with tag `name=value` (repeatable)")
	all := c.fs.Bool("all-queues", false, "cancel matching jobs in every queue of the namespace")
	pos, err := c.parse(args, 0, 2)
	if err != nil {
		return cliDone(err)
	}
	f := client.Filter{States: states, Key: *key, Tags: tags.orNil()}
	filtered := len(states) > 0 || *key != "" || len(tags) > 0
	ctx, cancel := cliContext()
	defer cancel()
	cl := c.client()
	switch {
	case *all:
		if len(pos) != 0 {
			return errors.New("cancel: --all-queues takes no QUEUE or ID")
		}
		if !filtered {
			return errors.New("cancel: give a filter: --state, --key or --tag")
		}
		return c.deleted(cl.CancelByFilter(ctx, "", f))
	case len(pos) == 2:
		if filtered {
			return errors.New("cancel: give either an ID or filters, not both")
		}
		if err := cl.Cancel(ctx, pos[0], pos[1], *receipt); err != nil {
			return err
		}
		return c.answer(map[string]int{"deleted": 1}, "deleted 1")
	case len(pos) == 1:
		if !filtered {
			return errors.New("cancel: give a job ID or a filter (--state, --key, --tag)")
		}
		return c.deleted(cl.CancelByFilter(ctx, pos[0], f))
	}
	return fmt.Errorf("usage: chronoq cancel %s (see chronoq cancel --help)", c.synopsis)
}

// deleted prints a {"deleted":N} answer.
func (c *cliCmd) deleted(n int, err error) error {
	if err != nil {
		return err
	}
	return c.answer(map[string]int{"deleted": n}, fmt.Sprintf("deleted %d", n))
}

func cliRespawn(args []string) error {
	c := newCLICmd("respawn", "QUEUE [ID...] [flags]",
		"Make dead jobs ready again (attempt 0).\n\n"+
			"Respawns the given ids, or the --limit oldest; --purge deletes the dead jobs instead",
		`chronoq respawn emails --limit 100`)
	limit := c.fs.Int("limit", 0, "respawn the N oldest dead jobs")
	purge := c.fs.Bool("purge", false, "delete every dead job of QUEUE instead")
	pos, err := c.parse(args, 1, -1)
	if err != nil {
		return cliDone(err)
	}
	ctx, cancel := cliContext()
	defer cancel()
	cl := c.client()
	if *purge {
		if len(pos) > 1 || *limit != 0 {
			return errors.New("respawn: --purge takes no ids or --limit")
		}
		return c.deleted(cl.PurgeDead(ctx, pos[0]))
	}
	if len(pos) == 1 && *limit <= 0 {
		return errors.New("respawn: give job ids or --limit N")
	}
	if len(pos) > 1 && *limit != 0 {
		return errors.New("respawn: give either ids or --limit, not both")
	}
	n, err := cl.Respawn(ctx, pos[0], client.RespawnOptions{Limit: *limit, IDs: pos[1:]})
	if err != nil {
		return err
	}
	return c.answer(map[string]int{"respawned": n}, fmt.Sprintf("respawned %d", n))
}

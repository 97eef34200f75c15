package main

import (
	"errors"
	"fmt"
	"sort"

	"github.com/chronoq/chronoq/client"
)

func cliStats(args []string) error {
	c := newCLICmd("stats", "[QUEUE...] [flags]",
		"Show queues with their job counts as a table (--json for scripts).\n\n"+
			"Without QUEUE arguments, every queue of the namespace",
		`chronoq stats --ns billing`)
	pos, err := c.parse(args, 0, -1)
	if err != nil {
		return cliDone(err)
	}
	ctx, cancel := cliContext()
	defer cancel()
	cl := c.client()
	var qs []client.Queue
	if len(pos) == 0 {
		if qs, err = cl.ListQueues(ctx); err != nil {
			return err
		}
		sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	} else {
		for _, name := range pos {
			q, err := cl.GetQueue(ctx, name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			qs = append(qs, *q)
		}
	}
	if qs == nil {
		qs = []client.Queue{}
	}
	if c.conn.json {
		return cliJSON(map[string][]client.Queue{"queues": qs})
	}
	return cliStatsTable(qs)
}

const cliQueueSynopsis = "create|get|pause|resume|purge|delete NAME [flags]"

func cliQueue(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(cliOut, `Usage: chronoq queue `+cliQueueSynopsis+`

Manage a queue:
  create NAME     create a queue, or change the settings given as flags (alias: configure)
  get NAME        show its settings and counts
  list            all queues with counts (same as chronoq stats)
  pause NAME      stop handing out jobs (puts are still accepted)
  resume NAME     hand out jobs again
  purge NAME      delete every job, reserved ones included
  delete NAME     delete the queue and its jobs

Example:
  chronoq queue create emails --ttr 1m --tries 5 --retain-results 1h

"chronoq queue SUBCOMMAND --help" shows its flags.
`)
		if len(args) == 0 {
			return errors.New("queue: give a subcommand")
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "create", "configure":
		return cliQueueCreate(sub, rest)
	case "list":
		return cliStats(rest)
	case "get", "pause", "resume", "purge", "delete":
	default:
		return fmt.Errorf("queue: unknown subcommand %q (want create, get, list, pause, resume, purge or delete)", sub)
	}
	desc := map[string]string{
		"get":    "Show a queue's settings and job counts",
		"pause":  "Pause a queue: it accepts puts and hands out nothing",
		"resume": "Resume a paused queue",
		"purge":  "Delete every job of a queue, reserved ones included",
		"delete": "Delete a queue and all its jobs",
	}[sub]
	c := newCLICmd("queue "+sub, "NAME [flags]", desc, "chronoq queue "+sub+" emails")
	pos, err := c.parse(rest, 1, 1)
	if err != nil {
		return cliDone(err)
	}
	ctx, cancel := cliContext()
	defer cancel()
	cl := c.client()
	var q *client.Queue
	switch sub {
	case "get":
		q, err = cl.GetQueue(ctx, pos[0])
	case "pause":
		q, err = cl.Pause(ctx, pos[0])
	case "resume":
		q, err = cl.Resume(ctx, pos[0])
	case "purge":
		return c.deleted(cl.PurgeQueue(ctx, pos[0]))
	case "delete":
		if err := cl.DeleteQueue(ctx, pos[0]); err != nil {
			return err
		}
		return c.answer(map[string]string{"deleted": pos[0]}, fmt.Sprintf("deleted queue %s", pos[0]))
	}
	if err != nil {
		return err
	}
	if c.conn.json {
		return cliJSON(q)
	}
	return cliQueueDetail(q)
}

func cliQueueCreate(sub string, args []string) error {
	c := newCLICmd("queue "+sub, "NAME [flags]",
		"Create a queue or change its settings.\n\n"+
			"Only the flags given are sent; the others keep their values",
		"chronoq queue "+sub+" emails --ttr 1m --tries 5 --backoff-initial 2s")
	var ttr, ttl, dedup, retain, bInit, bMax cliDuration
	tries, priority, maxPayload := newUint32Flag(), newUint32Flag(), newUint32Flag()
	maxJobs := &cliUint{}
	var bMult, bJitter cliFloat
	c.fs.Var(&ttr, "ttr", "default time to run, a `duration` (default 30s)")
	c.fs.Var(tries, "tries", "default `n` deliveries before dead, 0 = unlimited (default 25)")
	c.fs.Var(&ttl, "ttl", "default lifetime from put, a `duration`, 0 = none")
	c.fs.Var(priority, "priority", "default `priority` (default 1024)")
	c.fs.Var(maxJobs, "max-jobs", "`n` jobs the queue may hold, 0 = no limit")
	c.fs.Var(maxPayload, "max-payload", "`bytes` per payload")
	c.fs.Var(&dedup, "dedup-window", "how long idempotency keys are remembered, a `duration` (default 15m)")
	c.fs.Var(&retain, "retain-results", "keep acked jobs and their results this `duration` (default 0s)")
	keyMode := c.fs.String("key-mode", "", "per-key ordering: strict or exclusive")
	c.fs.Var(&bInit, "backoff-initial", "first nack retry delay, a `duration` (default 1s)")
	c.fs.Var(&bMax, "backoff-max", "largest nack retry delay, a `duration` (default 10m)")
	c.fs.Var(&bMult, "backoff-multiplier", "retry delay growth per attempt, a `factor` (default 2)")
	c.fs.Var(&bJitter, "backoff-jitter", "random spread of the retry delay, a `fraction` 0-1 (default 0.1)")
	pos, err := c.parse(args, 1, 1)
	if err != nil {
		return cliDone(err)
	}
	cfg := &client.QueueConfig{
		DefaultTTR: ttr.ptr(), DefaultTries: tries.u32(), DefaultTTL: ttl.ptr(), DefaultPriority: priority.u32(),
		MaxJobs: maxJobs.u64(), MaxPayload: maxPayload.u32(), DedupWindow: dedup.ptr(), RetainResults: retain.ptr(),
	}
	if *keyMode != "" {
		cfg.KeyMode = keyMode
	}
	if bInit.set || bMax.set || bMult.set || bJitter.set {
		cfg.Backoff = &client.Backoff{Initial: bInit.ptr(), Max: bMax.ptr(), Multiplier: bMult.ptr(), Jitter: bJitter.ptr()}
	}
	ctx, cancel := cliContext()
	defer cancel()
	q, err := c.client().ConfigureQueue(ctx, pos[0], cfg)
	if err != nil {
		return err
	}
	if c.conn.json {
		return cliJSON(q)
	}
	if q.Created {
		fmt.Fprintf(cliErr, "created queue %s\n", q.Name)
	} else {
		fmt.Fprintf(cliErr, "updated queue %s\n", q.Name)
	}
	return cliQueueDetail(q)
}

func cliNamespace(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(cliOut, `Usage: chronoq ns create NAME [--no-auto-create] | chronoq ns list

Manage namespaces on the admin listener (--admin-url, CHRONOQ_ADMIN_URL).

Example:
  chronoq ns create billing --token $ADMIN_TOKEN
`)
		if len(args) == 0 {
			return errors.New("ns: give a subcommand: create or list")
		}
		return nil
	}
	switch args[0] {
	case "create":
		c := newCLICmd("ns create", "NAME [flags]",
			"Create a namespace on the admin listener (creating an existing one is not an error)",
			"chronoq ns create billing --no-auto-create")
		noAuto := c.fs.Bool("no-auto-create", false, "refuse puts into queues that were not created first")
		pos, err := c.parse(args[1:], 1, 1)
		if err != nil {
			return cliDone(err)
		}
		ctx, cancel := cliContext()
		defer cancel()
		ns, err := c.client().CreateNamespace(ctx, pos[0], !*noAuto)
		if err != nil {
			return err
		}
		return c.answer(ns, fmt.Sprintf("%s (auto_create_queues %t)", ns.Name, ns.AutoCreateQueues))
	case "list":
		c := newCLICmd("ns list", "[flags]", "List the namespaces (admin listener)", "chronoq ns list --json")
		if _, err := c.parse(args[1:], 0, 0); err != nil {
			return cliDone(err)
		}
		ctx, cancel := cliContext()
		defer cancel()
		nss, err := c.client().ListNamespaces(ctx)
		if err != nil {
			return err
		}
		if nss == nil {
			nss = []client.Namespace{}
		}
		if c.conn.json {
			return cliJSON(map[string][]client.Namespace{"namespaces": nss})
		}
		w := cliTable()
		cliRow(w, "NAMESPACE", "AUTO_CREATE_QUEUES")
		for _, ns := range nss {
			cliRow(w, ns.Name, fmt.Sprint(ns.AutoCreateQueues))
		}
		return w.Flush()
	}
	return fmt.Errorf("ns: unknown subcommand %q (want create or list)", args[0])
}

func cliToken(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(cliOut, `Usage: chronoq token create NAMESPACE [--description TEXT] | chronoq token revoke NAMESPACE TOKEN

Create or revoke namespace tokens on the admin listener (--admin-url,
CHRONOQ_ADMIN_URL); needs the admin token when the server has one.

Example:
  chronoq token create billing --description "billing workers" --token $ADMIN_TOKEN
`)
		if len(args) == 0 {
			return errors.New("token: give a subcommand: create or revoke")
		}
		return nil
	}
	switch args[0] {
	case "create":
		c := newCLICmd("token create", "NAMESPACE [flags]",
			"Create a token for a namespace and print it (it is shown only once)",
			`chronoq token create billing --description "billing workers"`)
		desc := c.fs.String("description", "", "what the token is for")
		pos, err := c.parse(args[1:], 1, 1)
		if err != nil {
			return cliDone(err)
		}
		ctx, cancel := cliContext()
		defer cancel()
		tok, err := c.client().CreateToken(ctx, pos[0], *desc)
		if err != nil {
			return err
		}
		return c.answer(map[string]string{"token": tok}, tok)
	case "revoke":
		c := newCLICmd("token revoke", "NAMESPACE TOKEN [flags]", "Revoke a namespace token",
			"chronoq token revoke billing cq_4f9a0c2e...")
		pos, err := c.parse(args[1:], 2, 2)
		if err != nil {
			return cliDone(err)
		}
		ctx, cancel := cliContext()
		defer cancel()
		if err := c.client().RevokeToken(ctx, pos[0], pos[1]); err != nil {
			return err
		}
		return c.answer(map[string]bool{"revoked": true}, "revoked")
	}
	return fmt.Errorf("token: unknown subcommand %q (want create or revoke)", args[0])
}

package e2e

import (
	"encoding/base64"
	"reflect"
	"testing"
)

// TestRestartPersistence puts jobs in every state, stops the server
// (SIGTERM, then in a second run SIGKILL), starts it again on the same data
// directory twice, and expects every job, queue and namespace exactly as
// before: same id, state, payload, attempt and every other field; the
// reservation's receipt still valid; dedup still answering duplicates.
func TestRestartPersistence(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sigterm", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			restartScenario(t, mode == "sigterm")
		})
	}
}

func restartScenario(t *testing.T, graceful bool) {
	dir := t.TempDir()
	s := startServer(t, dir)
	q, pq := "persist", "persist-paused"
	s.expect(201, "PUT", qp(q), map[string]any{"retain_results": "1h", "default_priority": 500, "backoff": map[string]any{"initial": "3s"}})
	s.expect(201, "PUT", qp(pq), map[string]any{})
	s.put(pq, map[string]any{"payload": "in paused queue", "id": "job-paused"})
	s.expect(200, "POST", qp(pq)+"/pause", nil)
	s.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "persist-ns", "auto_create_queues": false})

	// Reserved, dead, nacked, completed: each put with priority 0 and
	// taken at once.
	s.put(q, map[string]any{"payload": map[string]any{"s": "reserved"}, "id": "job-reserved", "priority": 0, "key": "kr", "tags": map[string]string{"t": "res"}})
	res := s.take(q, map[string]any{"max": 1, "ttr": "1h"})
	if len(res) != 1 {
		t.Fatal("no job to reserve")
	}
	receipt := jstr(res[0], "receipt")
	s.put(q, map[string]any{"payload": "dead", "id": "job-dead", "priority": 0})
	j := s.takeOne(q)
	s.expect(200, "POST", jobActp(q, "job-dead", "bury"), map[string]any{"receipt": jstr(j, "receipt"), "reason": "broken input"})
	s.put(q, map[string]any{"payload": "nacked", "id": "job-nacked", "priority": 0})
	j = s.takeOne(q)
	s.expect(200, "POST", jobActp(q, "job-nacked", "nack"), map[string]any{"receipt": jstr(j, "receipt"), "delay": "1h", "error": "smtp timeout"})
	s.put(q, map[string]any{"payload": "completed", "id": "job-completed", "priority": 0})
	j = s.takeOne(q)
	s.ack(q, j, map[string]any{"result": map[string]any{"ok": 1}})
	s.put(q, map[string]any{"payload": "rescheduled", "id": "job-resched", "priority": 0})
	j = s.takeOne(q)
	s.ack(q, j, map[string]any{"reschedule": map[string]any{"delay": "2h"}})

	bin := make([]byte, 300)
	for i := range bin {
		bin[i] = byte(255 - i)
	}
	ids := []string{"job-reserved", "job-dead", "job-nacked", "job-completed", "job-resched"}
	ids = append(ids,
		s.putID(q, map[string]any{"payload": map[string]any{"z": 1, "a": []int{1, 2}}, "id": "job-delayed", "delay": "1h", "key": "kd", "tags": map[string]string{"t": "d", "u": "1"}}),
		s.putID(q, map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(bin), "priority": 3, "tags": map[string]string{"t": "r"}}),
		s.putID(q, map[string]any{"payload": "head", "key": "kb"}),
		s.putID(q, map[string]any{"payload": "blocked", "key": "kb"}),
		s.putID(q, map[string]any{"payload": "ttl", "ttl": "1h", "ttr": "12s", "tries": 4}),
		s.putID(q, map[string]any{"payload": "cron", "cron": "0 8 * * *"}),
		s.putID(q, map[string]any{"payload": nil, "idempotency_key": "idem-1", "reply_to": "replies"}),
		"job-paused",
	)
	if st := s.state(q, ids[8]); st != "blocked" {
		t.Errorf("setup: %s is %q, want blocked", ids[8], st)
	}

	snapshot := func(s *server) (map[string]map[string]any, map[string]map[string]any, []string) {
		t.Helper()
		jobs := map[string]map[string]any{}
		for _, id := range ids {
			qq := q
			if id == "job-paused" {
				qq = pq
			}
			jobs[id] = s.peek(qq, id)
		}
		queues := map[string]map[string]any{}
		for _, name := range []string{q, pq} {
			m, _ := s.expect(200, "GET", qp(name), nil)
			// oldest_ready_age (and any rates) move with the clock.
			queues[name] = map[string]any{"namespace": m["namespace"], "name": m["name"], "config": m["config"], "paused": m["paused"], "counts": m["counts"]}
		}
		listed := idsOf(s.listAll(q, "", 1000))
		return jobs, queues, listed
	}
	wantJobs, wantQueues, wantList := snapshot(s)
	if wantJobs["job-reserved"]["state"] != "reserved" || wantJobs["job-dead"]["state"] != "dead" || wantJobs["job-completed"]["state"] != "completed" ||
		wantJobs["job-nacked"]["state"] != "delayed" || wantJobs["job-resched"]["state"] != "delayed" || wantJobs["job-delayed"]["state"] != "delayed" {
		t.Errorf("setup states wrong: %v", wantJobs)
	}
	// The very last write before the stop must survive too.
	s.put("persist-last", map[string]any{"payload": "last", "id": "job-last", "delay": "1h"})

	for round := 1; round <= 2; round++ {
		if graceful {
			s.stop()
		} else {
			s.kill()
		}
		s = startServer(t, dir)
		gotJobs, gotQueues, gotList := snapshot(s)
		for _, id := range ids {
			if !reflect.DeepEqual(gotJobs[id], wantJobs[id]) {
				t.Errorf("round %d: job %s after restart\n got %v\nwant %v", round, id, gotJobs[id], wantJobs[id])
			}
		}
		for name := range wantQueues {
			if !reflect.DeepEqual(gotQueues[name], wantQueues[name]) {
				t.Errorf("round %d: queue %s after restart\n got %v\nwant %v", round, name, gotQueues[name], wantQueues[name])
			}
		}
		if !equalStrings(gotList, wantList) {
			t.Errorf("round %d: listing after restart %v, want %v", round, gotList, wantList)
		}
		if p := s.peek("persist-last", "job-last"); jstr(p, "payload") != "last" || jstr(p, "state") != "delayed" {
			t.Errorf("round %d: the last put before the stop: %v", round, p)
		}
		m, _ := s.expectAdmin(200, "GET", "/admin/namespaces", nil)
		found := false
		for _, e := range jarr(m, "namespaces") {
			if jstr(e, "name") == "persist-ns" {
				found = true
				if v, _ := jbool(e, "auto_create_queues"); v {
					t.Errorf("round %d: persist-ns lost auto_create_queues false", round)
				}
			}
		}
		if !found {
			t.Errorf("round %d: namespace persist-ns lost: %v", round, m)
		}
		// Dedup state survives.
		dm, _ := s.expect(200, "POST", jobsp(q), map[string]any{"payload": "again", "id": "job-delayed"})
		if d, _ := jbool(dm, "duplicate"); !d {
			t.Errorf("round %d: client-id dedup lost: %v", round, dm)
		}
		dm, _ = s.expect(200, "POST", jobsp(q), map[string]any{"payload": "again", "idempotency_key": "idem-1"})
		if d, _ := jbool(dm, "duplicate"); !d || jstr(dm, "id") != ids[11] {
			t.Errorf("round %d: idempotency dedup lost: %v", round, dm)
		}
		// The paused queue hands out nothing.
		if jobs := s.take(pq, map[string]any{"max": 10}); len(jobs) != 0 {
			t.Errorf("round %d: paused queue handed out %v after restart", round, jobs)
		}
	}

	// The reservation made before the restarts still holds its receipt.
	m := s.ack(q, map[string]any{"id": "job-reserved", "receipt": receipt}, nil)
	if jstr(m, "state") != "completed" {
		t.Errorf("ack with the pre-restart receipt: %v", m)
	}
	// New server ids do not collide with old ones and keep increasing.
	nid := s.putID(q, map[string]any{"payload": "new"})
	for _, id := range ids {
		if id == nid {
			t.Errorf("new id %s collides", nid)
		}
	}
	if !ulidRe.MatchString(nid) || nid <= ids[6] {
		t.Errorf("new id %s after restart should be a ULID greater than %s", nid, ids[6])
	}
	// The ready ones are served, the blocked one is not.
	got := ids2set(s.take(q, map[string]any{"max": 100}))
	for _, id := range []string{ids[6], ids[7], ids[9], ids[11], nid} {
		if !got[id] {
			t.Errorf("ready job %s not handed out after restart (got %v)", id, got)
		}
	}
	if got[ids[8]] {
		t.Errorf("blocked job handed out after restart")
	}
	s.stop()
}

func ids2set(jobs []any) map[string]bool {
	out := map[string]bool{}
	for _, j := range jobs {
		out[jstr(j, "id")] = true
	}
	return out
}

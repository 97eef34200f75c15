package cluster_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestWebSocketConsumerThroughFollower: a push consumer connected to a
// follower is forwarded to the leader and gets the jobs put there.
func TestWebSocketConsumerThroughFollower(t *testing.T) {
	c := startCluster(t)
	lead := c.leader(15 * time.Second)
	follower := c.nodes[int(lead.id)%3]
	var ws *websocket.Conn
	var frame []byte
	read := func() map[string]json.RawMessage {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		frame = b
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("frame %s: %v", b, err)
		}
		return m
	}
	send := func(v string) {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	// A leader change right after start (a loaded machine) answers
	// not_leader for a moment: the client connects again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, resp, err := websocket.DefaultDialer.Dial("ws://"+follower.http+"/v1/ws", nil)
		if err != nil {
			// 503 (Retry-After) until the follower knows a leader that
			// has caught up with the log.
			if resp == nil || resp.StatusCode != 503 || time.Now().After(deadline) {
				t.Fatalf("dial the follower's /v1/ws: %v (%v)", err, resp)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		ws = conn
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		send(`{"id":1,"connect":{}}`)
		m1 := read()
		send(`{"id":2,"consume":{"queues":["pushq"],"prefetch":1,"ttr":"60s"}}`)
		m2 := read()
		if m1["result"] != nil && m2["result"] != nil {
			break
		}
		ws.Close()
		if time.Now().After(deadline) {
			t.Fatalf("connect/consume through the follower: %s", frame)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer ws.Close()
	lead = c.leader(5 * time.Second)
	if code, body, err := post(lead.http, "/v1/ns/default/queues/pushq/jobs", map[string]any{"id": "pushed", "payload": 1}); err != nil || code != 201 {
		t.Fatalf("put: %d %s %v", code, body, err)
	}
	for {
		m := read()
		if m["job"] == nil {
			continue
		}
		var j struct{ ID, Receipt string }
		json.Unmarshal(m["job"], &j)
		if j.ID != "pushed" {
			t.Fatalf("pushed job %s, want pushed", j.ID)
		}
		send(fmt.Sprintf(`{"id":3,"ack":{"queue":"pushq","id":"pushed","receipt":%q}}`, j.Receipt))
		break
	}
	for {
		m := read()
		if id := string(m["id"]); id == "3" {
			if m["error"] != nil {
				t.Fatalf("ack through the follower: %s", m["error"])
			}
			break
		}
	}
	r, err := client.Get("http://" + follower.http + "/v1/ns/default/queues/pushq/jobs/pushed")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 404 {
		t.Fatalf("acked job still there: %d", r.StatusCode)
	}
}

// pushConsumer is a WebSocket push consumer of queue q through node addr
// that connects again (through the same node) whenever its connection
// ends, as a client does on a 4xxx close.
type pushConsumer struct {
	t      *testing.T
	addr   string
	q      string
	got    chan string // ids of jobs pushed, each acked
	closes chan int    // close codes seen
	stop   chan struct{}
	done   chan struct{}
}

func startPushConsumer(t *testing.T, addr, q string) *pushConsumer {
	pc := &pushConsumer{t: t, addr: addr, q: q, got: make(chan string, 100), closes: make(chan int, 100),
		stop: make(chan struct{}), done: make(chan struct{})}
	go pc.run()
	t.Cleanup(func() {
		close(pc.stop)
		<-pc.done
	})
	return pc
}

func (pc *pushConsumer) run() {
	defer close(pc.done)
	for {
		select {
		case <-pc.stop:
			return
		default:
		}
		pc.session()
		time.Sleep(50 * time.Millisecond)
	}
}

// session serves one connection until it ends.
func (pc *pushConsumer) session() {
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+pc.addr+"/v1/ws", nil)
	if err != nil {
		return // 503 while the cluster settles: dial again
	}
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-pc.stop:
		case <-ended:
		}
		ws.Close()
	}()
	send := func(v string) bool { return ws.WriteMessage(websocket.TextMessage, []byte(v)) == nil }
	if !send(`{"id":1,"connect":{}}`) || !send(fmt.Sprintf(`{"id":2,"consume":{"queues":[%q],"prefetch":1,"ttr":"60s"}}`, pc.q)) {
		return
	}
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				pc.closes <- ce.Code
			}
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil {
			return
		}
		if id := string(m["id"]); (id == "1" || id == "2") && m["error"] != nil {
			return // not served (not_leader): connect again
		}
		if m["job"] == nil {
			continue
		}
		var j struct{ ID, Receipt string }
		json.Unmarshal(m["job"], &j)
		if !send(fmt.Sprintf(`{"id":3,"ack":{"queue":%q,"id":%q,"receipt":%q}}`, pc.q, j.ID, j.Receipt)) {
			return
		}
		pc.got <- j.ID
	}
}

// putUntil puts job id through node addr, retrying 503s for up to 10 s.
func putUntil(t *testing.T, addr, q, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := post(addr, "/v1/ns/default/queues/"+q+"/jobs", map[string]any{"id": id, "payload": 1})
		if err == nil && (code == 201 || code == 200) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("put %s through %s: %d %s %v", id, addr, code, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPushConsumerAndLongPollAcrossLeaderChange: a WebSocket push consumer
// and a long-polling take, both through a follower, keep getting jobs
// after leadership moves: the old leader closes its sessions with 4006
// (leader_changed), the consumer connects again through the same
// follower and lands on the new leader; the long-poll ends and the next
// one reaches the new leader.
func TestPushConsumerAndLongPollAcrossLeaderChange(t *testing.T) {
	c := startCluster(t)
	c.leader(15 * time.Second)
	lead := c.settled(10 * time.Second)
	follower := c.nodes[int(lead.id)%3]
	next := c.nodes[(int(lead.id)+1)%3]
	pc := startPushConsumer(t, follower.http, "pushq")
	putUntil(t, follower.http, "pushq", "before")
	select {
	case id := <-pc.got:
		if id != "before" {
			t.Fatalf("pushed %s, want before", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no job pushed through the follower")
	}

	longPoll := &http.Client{Timeout: 30 * time.Second}
	take := func() ([]string, error) {
		resp, err := longPoll.Post("http://"+follower.http+"/v1/ns/default/queues/pollq/take", "application/json",
			strings.NewReader(`{"max":1,"ttr":"60s","wait":"10s"}`))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var r struct{ Jobs []struct{ ID string } }
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
			return nil, fmt.Errorf("take: status %d, %v", resp.StatusCode, err)
		}
		var ids []string
		for _, j := range r.Jobs {
			ids = append(ids, j.ID)
		}
		return ids, nil
	}
	parked := make(chan error, 1)
	go func() {
		ids, err := take()
		if err == nil && len(ids) > 0 {
			err = fmt.Errorf("the parked long-poll got %v before any put", ids)
		}
		parked <- err
	}()
	time.Sleep(200 * time.Millisecond) // the long-poll parks on the leader

	if code, body, err := post(lead.admin, "/cluster/transfer-leader", map[string]any{"to": next.id}); err != nil || code != 200 {
		t.Fatalf("transfer-leader to %d: %d %s %v", next.id, code, body, err)
	}
	select {
	case code := <-pc.closes:
		if code != 4006 {
			t.Fatalf("the consumer's connection closed with %d, want 4006 (leader_changed)", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the old leader kept the consumer's session")
	}
	select {
	case err := <-parked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long-poll parked on the old leader did not end")
	}
	putUntil(t, follower.http, "pushq", "after")
	select {
	case id := <-pc.got:
		if id != "after" {
			t.Fatalf("pushed %s, want after", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no job pushed after the leader change")
	}
	putUntil(t, next.http, "pollq", "polled")
	ids, err := take()
	if err != nil || len(ids) != 1 || ids[0] != "polled" {
		t.Fatalf("long-poll through the follower after the leader change: %v %v", ids, err)
	}
}

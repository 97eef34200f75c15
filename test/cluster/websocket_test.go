package cluster_test

import (
	"encoding/json"
	"fmt"
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
			t.Fatalf("dial the follower's /v1/ws: %v (%v)", err, resp)
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

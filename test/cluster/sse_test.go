package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	name, id string
	data     map[string]json.RawMessage
}

// sseStream reads the events of one /v1/sse request.
type sseStream struct {
	last   sseEvent // the last event next skipped
	events chan sseEvent
	cancel context.CancelFunc
	done   chan struct{}
}

// openSSE starts GET url with hc and delivers its events until closed. A
// status other than 200 fails the test.
func openSSE(t *testing.T, hc *http.Client, url string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != 200 {
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b.String())
	}
	s := &sseStream{events: make(chan sseEvent, 256), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	<-s.done
}

// next waits up to d for the next event named name (others are skipped);
// ok is false when the stream ended or the time ran out.
func (s *sseStream) next(name string, d time.Duration) (sseEvent, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, open := <-s.events:
			if !open {
				return sseEvent{}, false
			}
			if ev.name == name {
				return ev, true
			}
			s.last = ev
		case <-timer.C:
			return sseEvent{}, false
		}
	}
}

func jsonString(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// TestSSEThroughFollower: an SSE subscriber connected to a follower is
// forwarded to the leader and receives what is published there.
func TestSSEThroughFollower(t *testing.T) {
	c := startCluster(t)
	c.leader(15 * time.Second)
	lead := c.settled(10 * time.Second)
	follower := c.nodes[int(lead.id)%3]
	sse := openSSE(t, &http.Client{}, "http://"+follower.http+"/v1/sse?channel=default/news")
	if _, ok := sse.next("subscribed", 10*time.Second); !ok {
		t.Fatal("no subscribed event through the follower")
	}
	if code, body, err := post(lead.http, "/v1/ns/default/channels/news/publish", map[string]any{"data": "hi"}); err != nil || code != 200 {
		t.Fatalf("publish on the leader: %d %s %v", code, body, err)
	}
	ev, ok := sse.next("pub", 10*time.Second)
	if !ok || jsonString(ev.data["data"]) != "hi" {
		t.Fatalf("SSE through the follower: %+v %v", ev, ok)
	}
}

// settled waits until every live node names the same leader, and returns
// it: a node that does not know the leader yet serves a request itself.
func (c *clusterT) settled(within time.Duration) *node {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var lead uint64
		agree := true
		for _, n := range c.nodes {
			if n.cmd == nil {
				continue
			}
			st, err := n.status()
			if err != nil || st.Leader == 0 || lead != 0 && st.Leader != lead {
				agree = false
				break
			}
			lead = st.Leader
		}
		if agree && lead != 0 {
			return c.nodes[lead-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, n := range c.nodes {
		st, err := n.status()
		c.t.Logf("node %d: %+v %v; output:\n%s", n.id, st, err, n.out.String())
	}
	c.t.Fatalf("the nodes did not agree on a leader within %s", within)
	return nil
}

func put(addr, path string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("PUT", "http://"+addr+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		buf.WriteString(sc.Text())
	}
	return resp.StatusCode, []byte(buf.String()), nil
}

// TestSSEDurableChannelAcrossKill: an SSE subscriber of a durable channel
// through a follower; the leader is killed with SIGKILL and more is
// published on the new leader; the subscriber reconnects with its last
// event id and recovers exactly what it missed, in the same epoch.
func TestSSEDurableChannelAcrossKill(t *testing.T) {
	c := startCluster(t)
	c.leader(15 * time.Second)
	lead := c.settled(10 * time.Second)
	if code, body, err := put(lead.admin, "/admin/namespaces/web", map[string]any{"channel_history": map[string]any{"durable": true, "size": 100}}); err != nil || code != 200 && code != 201 {
		t.Fatalf("make namespace web durable: %d %s %v", code, body, err)
	}
	follower := c.nodes[int(lead.id)%3]
	other := c.nodes[(int(lead.id)+1)%3]
	sse := openSSE(t, &http.Client{}, "http://"+follower.http+"/v1/sse?channel=web/news")
	sub, ok := sse.next("subscribed", 10*time.Second)
	if !ok {
		t.Fatal("no subscribed event")
	}
	epoch := jsonString(sub.data["epoch"])
	var lastID string
	for i := 1; i <= 3; i++ {
		if code, body, err := post(follower.http, "/v1/ns/web/channels/news/publish", map[string]any{"data": i}); err != nil || code != 200 {
			t.Fatalf("publish %d: %d %s %v", i, code, body, err)
		}
		ev, ok := sse.next("pub", 10*time.Second)
		if !ok {
			t.Fatalf("publication %d not received (last event %+v)", i, sse.last)
		}
		lastID = ev.id
	}
	sse.close()
	c.setLive(lead, false)
	c.kill(lead)
	deadline := time.Now().Add(10 * time.Second)
	for i := 4; i <= 5; {
		code, _, err := post(other.http, "/v1/ns/web/channels/news/publish", map[string]any{"data": i})
		if err == nil && code == 200 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %d after the kill: %d %v", i, code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var again *sseStream
	for {
		req, _ := http.NewRequest("GET", "http://"+follower.http+"/v1/sse?channel=web/news", nil)
		req.Header.Set("Last-Event-ID", lastID)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("SSE through the follower after the kill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	again = openSSE(t, &http.Client{}, "http://"+follower.http+"/v1/sse?channel=web/news&last_event_id="+lastID)
	sub, ok = again.next("subscribed", 10*time.Second)
	if !ok || string(sub.data["recovered"]) != "true" || jsonString(sub.data["epoch"]) != epoch {
		t.Fatalf("resubscribe after the kill: %+v (epoch before %s)", sub.data, epoch)
	}
	for want := 4; want <= 5; want++ {
		ev, ok := again.next("pub", 10*time.Second)
		if !ok || string(ev.data["data"]) != strconv.Itoa(want) || jsonString(ev.data["epoch"]) != epoch {
			t.Fatalf("recovered publication %d: %+v %v", want, ev.data, ok)
		}
	}
}

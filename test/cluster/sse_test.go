package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
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
	c.t.Fatalf("the nodes did not agree on a leader within %s", within)
	return nil
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

type histAnswer struct {
	Publications []struct {
		Offset int64           `json:"offset"`
		Data   json.RawMessage `json:"data"`
	} `json:"publications"`
	Offset    int64  `json:"offset"`
	Epoch     string `json:"epoch"`
	Recovered bool   `json:"recovered"`
}

func (s *server) history(path, query string) histAnswer {
	s.t.Helper()
	_, raw := s.expect(200, "GET", path+"/history?"+query, nil)
	var h histAnswer
	if err := json.Unmarshal(raw, &h); err != nil {
		s.t.Fatalf("history %s?%s: %v: %s", path, query, err, raw)
	}
	return h
}

func (h histAnswer) data() string {
	var out []string
	for _, p := range h.Publications {
		out = append(out, fmt.Sprintf("%d=%s", p.Offset, p.Data))
	}
	return strings.Join(out, " ")
}

// TestDurableChannelHistory: a namespace with durable channel history keeps
// its publications, offsets and epoch across a graceful stop and a SIGKILL
// (every publication that was answered survives); a memory-only namespace
// gets a new epoch, so old positions answer recovered:false.
func TestDurableChannelHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir)
	m, _ := s.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "web", "channel_history": map[string]any{"durable": true, "size": 5}})
	if h, _ := m["channel_history"].(map[string]any); h == nil || h["durable"] != true || jint(h, "size") != 5 {
		t.Fatalf("namespace answer %v, want channel_history {durable:true, size:5}", m)
	}
	// PUT merges: size stays, ttl changes
	m, _ = s.expectAdmin(200, "PUT", "/admin/namespaces/web", map[string]any{"channel_history": map[string]any{"durable": true, "size": 5, "ttl": "1h"}})
	if h, _ := m["channel_history"].(map[string]any); h == nil || jstr(h, "ttl") != "1h0m0s" {
		t.Fatalf("after PUT: %v", m)
	}
	if m, raw := s.expectAdmin(400, "PUT", "/admin/namespaces/web", map[string]any{"channel_history": map[string]any{"size": 100001}}); !strings.Contains(string(raw), "channel_history.size") {
		t.Errorf("size over the limit: %v, want an error naming channel_history.size", m)
	}

	durable := "/v1/ns/web/channels/feed"
	memory := "/v1/ns/default/channels/feed"
	var epoch, memEpoch string
	for i := 1; i <= 7; i++ {
		m, _ := s.expect(200, "POST", durable+"/publish", map[string]any{"data": i})
		if jint(m, "offset") != int64(i) {
			t.Fatalf("durable publication %d: offset %v", i, m["offset"])
		}
		epoch = jstr(m, "epoch")
		m, _ = s.expect(200, "POST", memory+"/publish", map[string]any{"data": i})
		memEpoch = jstr(m, "epoch")
	}
	want := "3=3 4=4 5=5 6=6 7=7" // size 5
	if h := s.history(durable, "since=0&epoch="+url.QueryEscape(epoch)); h.Recovered {
		t.Fatalf("since=0 fell out of a history of 5, yet recovered: %+v", h)
	}
	if h := s.history(durable, "since=2&epoch="+url.QueryEscape(epoch)); !h.Recovered || h.data() != want {
		t.Fatalf("durable history before restart: recovered %v %q, want %q", h.Recovered, h.data(), want)
	}

	for round, kill := range []bool{false, true} {
		if kill {
			s.kill()
		} else {
			s.stop()
		}
		s = startServer(t, dir)
		h := s.history(durable, "since=4&epoch="+url.QueryEscape(epoch))
		var after4 []string
		for _, p := range strings.Fields(want) {
			if p >= "5=" { // offsets here are single digits
				after4 = append(after4, p)
			}
		}
		if !h.Recovered || h.Epoch != epoch || h.Offset != int64(7+round) || h.data() != strings.Join(after4, " ") {
			t.Fatalf("round %d: durable history after restart: recovered %v epoch %q (want %q) offset %d data %q",
				round, h.Recovered, h.Epoch, epoch, h.Offset, h.data())
		}
		mh := s.history(memory, "since=3&epoch="+url.QueryEscape(memEpoch))
		if mh.Recovered || mh.Epoch == memEpoch || len(mh.Publications) != 0 {
			t.Fatalf("round %d: memory-only history after restart: recovered %v epoch %q (old %q)", round, mh.Recovered, mh.Epoch, memEpoch)
		}
		memEpoch = mh.Epoch
		// offsets carry on from the log, not from 1
		m, _ := s.expect(200, "POST", durable+"/publish", map[string]any{"data": 8 + round})
		if jint(m, "offset") != int64(8+round) || jstr(m, "epoch") != epoch {
			t.Fatalf("round %d: publication after restart %v, want offset %d epoch %s", round, m, 8+round, epoch)
		}
		want = fmt.Sprintf("%s %d=%d", strings.Join(strings.Fields(want)[1:], " "), 8+round, 8+round)
	}
}

// TestJobNotifyEvents: a job put with notify publishes its lifecycle on the
// channel; a history long-poll wakes up for it.
func TestJobNotifyEvents(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir())
	s.badRequest("POST", qp("n")+"/jobs", map[string]any{"payload": 1, "notify": "no/slash"}, "notify")
	ch := "/v1/ns/default/channels/" + url.PathEscape("jobs#u1")
	start := s.history(ch, "since=0")

	id := s.putID("n", map[string]any{"payload": 1, "notify": "jobs#u1", "tries": 3})
	if got := jstr(s.peek("n", id), "notify"); got != "jobs#u1" {
		t.Fatalf("job object notify = %q", got)
	}

	// a long-poll waiting for the first event is woken by the take
	type polled struct {
		h   histAnswer
		err error
	}
	done := make(chan polled, 1)
	go func() {
		code, _, raw := s.quiet().do("GET", ch+"/history?since=0&epoch="+url.QueryEscape(start.Epoch)+"&wait=20s", nil)
		var h histAnswer
		err := json.Unmarshal(raw, &h)
		if code != 200 && err == nil {
			err = fmt.Errorf("status %d: %s", code, raw)
		}
		done <- polled{h, err}
	}()
	time.Sleep(100 * time.Millisecond) // let the poll park (a late park still passes: it finds the event in history)
	j := s.takeOne("n")
	select {
	case p := <-done:
		if p.err != nil || len(p.h.Publications) == 0 || !strings.Contains(string(p.h.Publications[0].Data), `"reserved"`) {
			t.Fatalf("long-poll answer %+v err %v, want the reserved event", p.h, p.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("history long-poll not woken by a publication")
	}
	s.expect(200, "POST", jobActp("n", id, "nack"), map[string]any{"receipt": jstr(j, "receipt"), "error": "flaky", "delay": "0s"})
	j = s.takeOne("n")
	s.ack("n", j, map[string]any{"result": map[string]any{"url": "/x.csv"}})

	h := s.history(ch, "since=0&epoch="+url.QueryEscape(start.Epoch))
	var got []string
	for _, p := range h.Publications {
		var ev map[string]any
		if err := json.Unmarshal(p.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if jstr(ev, "id") != id || jstr(ev, "queue") != "n" || jstr(ev, "namespace") != "default" {
			t.Errorf("event %s: wrong job", p.Data)
		}
		s := jstr(ev, "event") + ":" + jstr(ev, "state")
		if e := jstr(ev, "error"); e != "" {
			s += ":" + e
		}
		if r, ok := ev["result"]; ok {
			b, _ := json.Marshal(r)
			s += "=" + string(b)
		}
		got = append(got, s)
	}
	want := `reserved:reserved nacked:ready:flaky reserved:reserved completed:deleted={"url":"/x.csv"}`
	if strings.Join(got, " ") != want {
		t.Fatalf("events:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// TestDurablePublicationsSurviveKill: publishers run concurrently into a
// durable channel, the server is SIGKILLed at a random moment, and every
// publication whose answer arrived is found after the restart at the
// offset it was given, with its data, in the same epoch; offsets go on
// without reuse. Three cycles on one data directory.
func TestDurablePublicationsSurviveKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir)
	s.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "dur", "channel_history": map[string]any{"durable": true, "size": 100000, "ttl": "-1"}})
	path := "/v1/ns/dur/channels/feed"
	acked := map[int64]string{} // offset -> data
	epoch := ""
	var mu sync.Mutex
	for cycle := 0; cycle < 3; cycle++ {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		client := newClient(5 * time.Second)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					data := fmt.Sprintf(`"c%d-w%d-%d"`, cycle, w, i)
					code, raw, err := s.try(client, s.httpAddr, "POST", path+"/publish", `{"data":`+data+`}`)
					if err != nil || code != 200 {
						return // the kill: this one's fate is unknown
					}
					var m struct {
						Offset int64  `json:"offset"`
						Epoch  string `json:"epoch"`
					}
					if json.Unmarshal(raw, &m) != nil {
						return
					}
					mu.Lock()
					if prev, dup := acked[m.Offset]; dup {
						t.Errorf("offset %d handed out twice: %s and %s", m.Offset, prev, data)
					}
					acked[m.Offset] = data
					if epoch == "" {
						epoch = m.Epoch
					} else if m.Epoch != epoch {
						t.Errorf("epoch changed from %s to %s", epoch, m.Epoch)
					}
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(200+100*cycle) * time.Millisecond)
		s.kill()
		close(stop)
		wg.Wait()
		s = startServer(t, dir)
		h := s.history(path, "since=0&epoch="+url.QueryEscape(epoch)+"&limit=1000")
		got := map[int64]string{}
		for since := int64(0); ; {
			h = s.history(path, fmt.Sprintf("since=%d&epoch=%s&limit=1000", since, url.QueryEscape(epoch)))
			if !h.Recovered {
				t.Fatalf("cycle %d: history since %d not recovered after the kill (epoch %s, server epoch %s)", cycle, since, epoch, h.Epoch)
			}
			if len(h.Publications) == 0 {
				break
			}
			for _, p := range h.Publications {
				got[p.Offset] = string(p.Data)
				since = p.Offset
			}
		}
		mu.Lock()
		for off, data := range acked {
			if got[off] != data {
				t.Errorf("cycle %d: acknowledged publication %d = %s lost or changed (now %q)", cycle, off, data, got[off])
			}
		}
		n := len(acked)
		mu.Unlock()
		if t.Failed() {
			return
		}
		t.Logf("cycle %d: %d acknowledged publications all present; %d held", cycle, n, len(got))
	}
}

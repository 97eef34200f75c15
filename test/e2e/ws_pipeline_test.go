package e2e

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Puts pipelined over a WebSocket — answered together after one
// fdatasync (docs/realtime.md) — are as durable as puts sent one at a
// time: every put the server answered is there after a SIGKILL, with its
// payload.
func TestPipelinedWSPutsSurviveKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir)
	acked := map[string]string{} // job id -> payload
	var mu sync.Mutex
	for cycle := 0; cycle < 3; cycle++ {
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			c, _, err := websocket.DefaultDialer.Dial("ws://"+s.httpAddr+"/v1/ws", nil)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				c.SetReadDeadline(time.Now().Add(30 * time.Second))
				if c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{}}`)) != nil {
					return
				}
				var m struct {
					ID     int             `json:"id"`
					Error  json.RawMessage `json:"error"`
					Result struct{ ID string }
				}
				if c.ReadJSON(&m) != nil || m.Error != nil {
					return
				}
				for id, round := 2, 0; ; round++ {
					payloads := map[int]string{}
					for k := 0; k < 16; k, id = k+1, id+1 {
						p := fmt.Sprintf(`"c%d-w%d-%d"`, cycle, w, id)
						payloads[id] = p
						if c.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"id":%d,"put":{"queue":"wsp","payload":%s}}`, id, p)) != nil {
							return // the kill
						}
					}
					for range payloads {
						if c.ReadJSON(&m) != nil {
							return // the kill: these puts' fates are unknown
						}
						if m.Error != nil || payloads[m.ID] == "" {
							t.Errorf("answer %d: %s", m.ID, m.Error)
							return
						}
						mu.Lock()
						acked[m.Result.ID] = payloads[m.ID]
						mu.Unlock()
					}
				}
			}(w)
		}
		time.Sleep(time.Duration(300+150*cycle) * time.Millisecond)
		s.kill()
		wg.Wait()
		s = startServer(t, dir)
		stored := map[string]string{}
		for cursor := ""; ; {
			code, m, raw := s.do("GET", "/v1/ns/default/queues/wsp/jobs?limit=1000&cursor="+cursor, nil)
			if code != 200 {
				t.Fatalf("cycle %d: list: %d %s", cycle, code, raw)
			}
			jobs, _ := m["jobs"].([]any)
			for _, j := range jobs {
				job := j.(map[string]any)
				p, _ := json.Marshal(job["payload"])
				stored[job["id"].(string)] = string(p)
			}
			if cursor, _ = m["next_cursor"].(string); cursor == "" {
				break
			}
		}
		mu.Lock()
		for id, payload := range acked {
			if stored[id] != payload {
				t.Fatalf("cycle %d: acknowledged put %s (%s) lost or changed: %q", cycle, id, payload, stored[id])
			}
		}
		t.Logf("cycle %d: %d acknowledged pipelined puts, all present", cycle, len(acked))
		mu.Unlock()
	}
	if len(acked) == 0 {
		t.Fatal("no put was acknowledged")
	}
}

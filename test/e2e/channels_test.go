package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
)

// TestChannels covers publish and history (docs/api.md, Channels): offsets from 1, since
// exclusive, limit, epoch checks.
func TestChannels(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir())
	ch := "/v1/ns/default/channels/news"

	var epoch string
	data := []string{`{"n":1}`, `"two"`, `[3,{"x":null}]`, `4`}
	for i, d := range data {
		m, _ := s.expect(200, "POST", ch+"/publish", `{"data":`+d+`}`)
		if jint(m, "offset") != int64(i+1) {
			t.Errorf("publication %d: offset %v, want %d", i, m["offset"], i+1)
		}
		e := jstr(m, "epoch")
		if e == "" || (epoch != "" && e != epoch) {
			t.Errorf("publication %d: epoch %q (first %q)", i, e, epoch)
		}
		if epoch == "" {
			epoch = e
		}
	}
	type pub struct {
		Offset int64           `json:"offset"`
		Data   json.RawMessage `json:"data"`
		Time   string          `json:"time"`
	}
	type hist struct {
		Publications []pub  `json:"publications"`
		Offset       int64  `json:"offset"`
		Epoch        string `json:"epoch"`
		Recovered    *bool  `json:"recovered"`
	}
	history := func(query string) hist {
		t.Helper()
		_, raw := s.expect(200, "GET", ch+"/history?"+query, nil)
		var h hist
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatalf("history %s: %v: %s", query, err, raw)
		}
		if h.Recovered == nil {
			t.Errorf("history %s: no recovered field: %s", query, raw)
		}
		return h
	}
	check := func(query string, from, to int64) {
		t.Helper()
		h := history(query)
		if h.Recovered == nil || !*h.Recovered || h.Offset != int64(len(data)) || h.Epoch != epoch {
			t.Errorf("history ?%s: recovered %v offset %d epoch %q; want true, %d, %q", query, h.Recovered, h.Offset, h.Epoch, len(data), epoch)
		}
		var got []int64
		for _, p := range h.Publications {
			got = append(got, p.Offset)
			if p.Offset >= 1 && p.Offset <= int64(len(data)) && !jsonEqual(p.Data, []byte(data[p.Offset-1])) {
				t.Errorf("history ?%s: offset %d data %s, want %s", query, p.Offset, p.Data, data[p.Offset-1])
			}
			if !timeRe.MatchString(p.Time) {
				t.Errorf("publication time %q", p.Time)
			}
		}
		var want []int64
		for o := from; o <= to; o++ {
			want = append(want, o)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("history ?%s: offsets %v, want %v", query, got, want)
		}
	}
	e := url.QueryEscape(epoch)
	check("since=0&epoch="+e, 1, 4)
	check("since=0", 1, 4)
	check("since=1&epoch="+e, 2, 4)
	check("since=3&epoch="+e, 4, 4)
	check("since=4&epoch="+e, 1, 0)
	check("since=0&epoch="+e+"&limit=2", 1, 2)
	check("since=1&epoch="+e+"&limit=1", 2, 2)

	h := history("since=1&epoch=not-the-epoch")
	if h.Recovered == nil || *h.Recovered || len(h.Publications) != 0 || h.Offset != 4 || h.Epoch != epoch {
		t.Errorf("history with a wrong epoch: %+v; want recovered false, no publications, offset 4, epoch %q", h, epoch)
	}

	// Channels are separate.
	m, _ := s.expect(200, "POST", "/v1/ns/default/channels/other/publish", map[string]any{"data": 1})
	if jint(m, "offset") != 1 {
		t.Errorf("first publication on another channel: offset %v, want 1", m["offset"])
	}
	s.badRequest("POST", ch+"/publish", map[string]any{"data": 1, "bogus": 2}, "bogus")
	s.badRequest("GET", ch+"/history?since=abc", nil, "since")
}

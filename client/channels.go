package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/chronoq/chronoq/wire"
)

// PublishResult is where a publication landed in its channel.
type PublishResult wire.PublishAnswer

// Publish sends data (anything json.Marshal takes; json.RawMessage as is)
// to channel ch. Not retried: a retry could publish twice.
func (c *Client) Publish(ctx context.Context, ch string, data any) (*PublishResult, error) {
	if ch == "" {
		return nil, errors.New("chronoq: channel name is empty")
	}
	raw, err := marshalValue(data)
	if err != nil {
		return nil, fmt.Errorf("chronoq: publish data: %w", err)
	}
	var out PublishResult
	path := c.nsPath() + "/channels/" + url.PathEscape(ch) + "/publish"
	if _, err := c.do(ctx, request{method: http.MethodPost, path: path, body: map[string]json.RawMessage{"data": raw}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// HistoryOptions select publications: those after offset Since
// (exclusive) of epoch Epoch, at most Limit (0: the server's 100).
type HistoryOptions struct {
	Since uint64
	Epoch string
	Limit int
}

// Publication is one message of a channel.
type Publication struct {
	Offset uint64
	Data   json.RawMessage
	Time   time.Time
}

func (p *Publication) UnmarshalJSON(b []byte) error {
	var w wire.Publication
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	t, err := parseTime(w.Time)
	if err != nil {
		return fmt.Errorf("publication %d: time: %w", w.Offset, err)
	}
	*p = Publication{Offset: w.Offset, Data: w.Data, Time: t}
	return nil
}

// History is a channel's history answer. Recovered false means the epoch
// changed or Since fell out of history: Publications is then empty and the
// caller should resynchronise from Offset.
type History struct {
	Publications []Publication `json:"publications"`
	Offset       uint64        `json:"offset"`
	Epoch        string        `json:"epoch"`
	Recovered    bool          `json:"recovered"`
}

// History reads channel ch's publications after o.Since.
func (c *Client) History(ctx context.Context, ch string, o HistoryOptions) (*History, error) {
	if ch == "" {
		return nil, errors.New("chronoq: channel name is empty")
	}
	v := url.Values{}
	if o.Since > 0 {
		v.Set("since", strconv.FormatUint(o.Since, 10))
	}
	if o.Epoch != "" {
		v.Set("epoch", o.Epoch)
	}
	if o.Limit > 0 {
		v.Set("limit", strconv.Itoa(o.Limit))
	}
	var out History
	path := c.nsPath() + "/channels/" + url.PathEscape(ch) + "/history"
	if _, err := c.do(ctx, request{method: http.MethodGet, path: path, query: v, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

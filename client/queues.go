package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// CreateQueue creates queue name with cfg (nil: the namespace defaults), or
// updates it if it exists: the server's PUT merges, so this is the same
// call as ConfigureQueue. Queue.Created tells which happened.
func (c *Client) CreateQueue(ctx context.Context, name string, cfg *QueueConfig) (*Queue, error) {
	return c.ConfigureQueue(ctx, name, cfg)
}

// ConfigureQueue sets the non-nil fields of cfg on queue name, creating the
// queue if needed; fields left nil keep their values.
func (c *Client) ConfigureQueue(ctx context.Context, name string, cfg *QueueConfig) (*Queue, error) {
	if err := c.checkQueue(name); err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = &QueueConfig{}
	}
	var q Queue
	res, err := c.do(ctx, request{method: http.MethodPut, path: c.queuePath(name), body: cfg, retry: true}, &q)
	if err != nil {
		return nil, err
	}
	q.Created = res.status == http.StatusCreated
	return &q, nil
}

// GetQueue returns queue name with live counts.
func (c *Client) GetQueue(ctx context.Context, name string) (*Queue, error) {
	if err := c.checkQueue(name); err != nil {
		return nil, err
	}
	var q Queue
	if _, err := c.do(ctx, request{method: http.MethodGet, path: c.queuePath(name), retry: true}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// ListQueues returns every queue of the namespace, fetching page after
// page (the server answers at most 1000 queues a page).
func (c *Client) ListQueues(ctx context.Context) ([]Queue, error) {
	var all []Queue
	cursor := ""
	for {
		p, err := c.ListQueuesPage(ctx, 0, cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Queues...)
		// A server that answered an empty page with a cursor would loop us.
		if p.NextCursor == "" || len(p.Queues) == 0 {
			return all, nil
		}
		cursor = p.NextCursor
	}
}

// QueuePage is one page of queues, in name order; NextCursor is empty on
// the last.
type QueuePage struct {
	Queues     []Queue `json:"queues"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// ListQueuesPage fetches one page of at most limit queues (0: the server's
// default, 1000) starting at cursor ("" for the first page).
func (c *Client) ListQueuesPage(ctx context.Context, limit int, cursor string) (*QueuePage, error) {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	var page QueuePage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: c.nsPath() + "/queues", query: v, retry: true}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Pause stops queue name from handing out jobs; puts are still accepted.
// Pausing twice is harmless, so the call is retried like a PUT.
func (c *Client) Pause(ctx context.Context, name string) (*Queue, error) {
	return c.queueAction(ctx, name, "pause")
}

// Resume lets a paused queue hand out jobs again.
func (c *Client) Resume(ctx context.Context, name string) (*Queue, error) {
	return c.queueAction(ctx, name, "resume")
}

func (c *Client) queueAction(ctx context.Context, name, action string) (*Queue, error) {
	if err := c.checkQueue(name); err != nil {
		return nil, err
	}
	var q Queue
	if _, err := c.do(ctx, request{method: http.MethodPost, path: c.queuePath(name) + "/" + action, retry: true}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// PurgeQueue deletes every job of queue name, reserved ones included, and
// returns how many.
func (c *Client) PurgeQueue(ctx context.Context, name string) (int, error) {
	if err := c.checkQueue(name); err != nil {
		return 0, err
	}
	var out struct {
		Deleted int `json:"deleted"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: c.queuePath(name) + "/purge"}, &out)
	return out.Deleted, err
}

// DeleteQueue deletes queue name and its jobs.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	if err := c.checkQueue(name); err != nil {
		return err
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: c.queuePath(name), retry: true}, nil)
	return err
}

package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
)

// These calls go to the admin listener (WithAdminURL) and need the admin
// token when the server has one.

// CreateNamespace creates namespace name; creating an existing one is not
// an error and answers it as it is. With autoCreateQueues false, puts into
// missing queues are refused instead of creating them.
func (c *Client) CreateNamespace(ctx context.Context, name string, autoCreateQueues bool) (*Namespace, error) {
	if name == "" {
		return nil, errors.New("chronoq: namespace name is empty")
	}
	var out Namespace
	body := Namespace{Name: name, AutoCreateQueues: autoCreateQueues}
	if _, err := c.do(ctx, request{method: http.MethodPost, admin: true, path: "/admin/namespaces", body: body, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListNamespaces returns every namespace.
func (c *Client) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	var out struct {
		Namespaces []Namespace `json:"namespaces"`
	}
	if _, err := c.do(ctx, request{method: http.MethodGet, admin: true, path: "/admin/namespaces", retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Namespaces, nil
}

// CreateToken creates a token for namespace ns. The server shows it only in
// this answer.
func (c *Client) CreateToken(ctx context.Context, ns, description string) (string, error) {
	if ns == "" {
		return "", errors.New("chronoq: namespace name is empty")
	}
	body := map[string]string{}
	if description != "" {
		body["description"] = description
	}
	var out struct {
		Token string `json:"token"`
	}
	path := "/admin/namespaces/" + url.PathEscape(ns) + "/tokens"
	if _, err := c.do(ctx, request{method: http.MethodPost, admin: true, path: path, body: body}, &out); err != nil {
		return "", err
	}
	return out.Token, nil
}

// RevokeToken revokes a namespace token.
func (c *Client) RevokeToken(ctx context.Context, ns, token string) error {
	if ns == "" || token == "" {
		return errors.New("chronoq: RevokeToken needs a namespace and a token")
	}
	path := "/admin/namespaces/" + url.PathEscape(ns) + "/tokens/" + url.PathEscape(token)
	_, err := c.do(ctx, request{method: http.MethodDelete, admin: true, path: path, retry: true}, nil)
	return err
}

// Healthz checks that the main listener answers GET /healthz with 200.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/healthz"}, nil)
	return err
}

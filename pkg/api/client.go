package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// UnreachableError says the server could not be reached or answered with a
// server error (CLI exit code 4).
type UnreachableError struct {
	Server string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("server %s unreachable: %v", e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Client talks to manent-server.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client for the server at base (e.g. http://127.0.0.1:8080)
// authenticating with token. A nil hc uses a client with a 30 s timeout.
func NewClient(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

// Server returns the base URL.
func (c *Client) Server() string { return c.base }

// Token returns the bearer token the client sends.
func (c *Client) Token() string { return c.token }

// Submit sends a descriptor (YAML or JSON bytes). dryRun runs every check
// without enqueueing (`manent validate`).
func (c *Client) Submit(ctx context.Context, descriptor []byte, dryRun bool) (*SubmitResult, error) {
	path := "/api/v1/deployments"
	if dryRun {
		path += "?dry_run=true"
	}
	var out SubmitResult
	err := c.do(ctx, http.MethodPost, path, "application/yaml", bytes.NewReader(descriptor), &out)
	return &out, err
}

// Deployment returns one deploy with its steps.
func (c *Client) Deployment(ctx context.Context, id string) (*manent.Deployment, error) {
	var out manent.Deployment
	err := c.do(ctx, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id), "", nil, &out)
	return &out, err
}

// Steps returns every recorded step of a deploy.
func (c *Client) Steps(ctx context.Context, id string) ([]manent.Step, error) {
	var out StepsResult
	err := c.do(ctx, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id)+"/steps", "", nil, &out)
	return out.Steps, err
}

// Logs returns the log lines of a deploy recorded so far.
func (c *Client) Logs(ctx context.Context, id string) (*LogsResult, error) {
	var out LogsResult
	err := c.do(ctx, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id)+"/logs", "", nil, &out)
	return &out, err
}

// List returns one page of deploys, newest first.
func (c *Client) List(ctx context.Context, o ListOptions) (*ListResult, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("application", o.Application)
	set("environment", o.Environment)
	set("state", o.State)
	set("cursor", o.Cursor)
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	path := "/api/v1/deployments"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out ListResult
	err := c.do(ctx, http.MethodGet, path, "", nil, &out)
	return &out, err
}

// Cancel asks the server to cancel a deploy and returns it as it is then.
func (c *Client) Cancel(ctx context.Context, id string) (*manent.Deployment, error) {
	var out manent.Deployment
	err := c.do(ctx, http.MethodPost, "/api/v1/deployments/"+url.PathEscape(id)+"/cancel", "", nil, &out)
	return &out, err
}

// Inventory returns the current release and last failure per application/environment.
func (c *Client) Inventory(ctx context.Context) (*InventoryResult, error) {
	var out InventoryResult
	err := c.do(ctx, http.MethodGet, "/api/v1/inventory", "", nil, &out)
	return &out, err
}

// Wait polls the deploy until it is final or ctx ends. It returns the last
// deploy seen; a ctx deadline gives that deploy and ctx.Err().
func (c *Client) Wait(ctx context.Context, id string, every time.Duration) (*manent.Deployment, error) {
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	var last *manent.Deployment
	for {
		d, err := c.Deployment(ctx, id)
		if err != nil {
			if ctx.Err() != nil && last != nil {
				return last, ctx.Err()
			}
			return d, err
		}
		last = d
		if d.State.Final() {
			return d, nil
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Client) do(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return &manent.Error{Code: manent.EInvalid, Message: fmt.Sprintf("bad server address %q", c.base), Err: err}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &UnreachableError{Server: c.base, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &UnreachableError{Server: c.base, Err: fmt.Errorf("read response: %w", err)}
	}
	if resp.StatusCode >= 400 {
		return problemError(c.base, resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return &UnreachableError{Server: c.base, Err: fmt.Errorf("decode response: %w", err)}
		}
	}
	return nil
}

// problemError turns an HTTP error answer into a *manent.Error (4xx) or an
// *UnreachableError (5xx).
func problemError(server string, status int, body []byte) error {
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Title == "" {
		p.Title = http.StatusText(status)
		p.Detail = strings.TrimSpace(string(body))
	}
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if status >= 500 {
		return &UnreachableError{Server: server, Err: fmt.Errorf("%d %s", status, msg)}
	}
	return &manent.Error{Code: CodeForStatus(status), Message: msg, Fields: p.Errors}
}

// CodeForStatus maps an HTTP status to a domain error code.
func CodeForStatus(status int) manent.Code {
	switch status {
	case http.StatusUnauthorized:
		return manent.EUnauthorized
	case http.StatusForbidden:
		return manent.EForbidden
	case http.StatusNotFound:
		return manent.ENotFound
	case http.StatusConflict:
		return manent.EConflict
	case http.StatusRequestEntityTooLarge:
		return manent.ETooLarge
	case http.StatusTooManyRequests:
		return manent.ETooManyRequests
	case http.StatusServiceUnavailable:
		return manent.EUnavailable
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusUnsupportedMediaType:
		return manent.EInvalid
	}
	if status >= 500 {
		return manent.EInternal
	}
	return manent.EInvalid
}

// StatusForCode maps a domain error code to an HTTP status.
func StatusForCode(c manent.Code) int {
	switch c {
	case manent.EInvalid:
		return http.StatusUnprocessableEntity
	case manent.EUnauthorized:
		return http.StatusUnauthorized
	case manent.EForbidden:
		return http.StatusForbidden
	case manent.ENotFound:
		return http.StatusNotFound
	case manent.EConflict:
		return http.StatusConflict
	case manent.ETooLarge:
		return http.StatusRequestEntityTooLarge
	case manent.ETooManyRequests:
		return http.StatusTooManyRequests
	case manent.EUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// IsUnreachable reports whether err means the server was unreachable or failed.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}

// Approve approves a deploy waiting for approvals. planDigest, when set, is
// the digest the approver reviewed: the server refuses it if the plan changed.
func (c *Client) Approve(ctx context.Context, id, comment, planDigest string) (*manent.Deployment, error) {
	return c.decide(ctx, id, "approve", comment, planDigest)
}

// Reject rejects a deploy waiting for approvals.
func (c *Client) Reject(ctx context.Context, id, comment string) (*manent.Deployment, error) {
	return c.decide(ctx, id, "reject", comment, "")
}

func (c *Client) decide(ctx context.Context, id, verdict, comment, planDigest string) (*manent.Deployment, error) {
	body, _ := json.Marshal(map[string]string{"comment": comment, "plan_digest": planDigest})
	var out manent.Deployment
	err := c.do(ctx, http.MethodPost, "/api/v1/deployments/"+url.PathEscape(id)+"/"+verdict, "application/json", bytes.NewReader(body), &out)
	return &out, err
}

// Schedules lists the recurring deploys.
func (c *Client) Schedules(ctx context.Context) (*SchedulesResult, error) {
	var out SchedulesResult
	err := c.do(ctx, http.MethodGet, "/api/v1/schedules", "", nil, &out)
	return &out, err
}

// DeleteSchedule stops a recurring deploy.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/schedules/"+url.PathEscape(id), "", nil, nil)
}

// Audit returns a page of the audit log, newest first (before: a seq, 0 for
// the newest; action: "" for all).
func (c *Client) Audit(ctx context.Context, action string, before int64, limit int) (*AuditResult, error) {
	q := url.Values{}
	if action != "" {
		q.Set("action", action)
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/v1/audit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out AuditResult
	err := c.do(ctx, http.MethodGet, path, "", nil, &out)
	return &out, err
}

// Workers lists the workers sharing the server's database (SPEC §11.3).
func (c *Client) Workers(ctx context.Context) (*WorkersResult, error) {
	var out WorkersResult
	err := c.do(ctx, http.MethodGet, "/api/v1/workers", "", nil, &out)
	return &out, err
}

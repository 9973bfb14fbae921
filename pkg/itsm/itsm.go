// Package itsm is manent's change-management client: a Provider opens a
// change for a deploy, reports its approval and closes it with the outcome.
// HTTP speaks the small JSON protocol of docs/itsm.md, which the reference
// server in pkg/itsm/reference implements.
//
// Requests go through a pkg/egress client: only to the configured ITSM's
// origin, no redirects, the address dialed checked.
//
// It imports pkg/egress, pkg/manent (clipping quoted answers), pkg/plugin
// (permanent errors) and pkg/urlpolicy.
package itsm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// Change states.
const (
	Pending  = "pending"
	Approved = "approved"
	Rejected = "rejected"
	Closed   = "closed"
	// Cancelled is not in the protocol's table, but ITSMs name it: like
	// Closed, the change will not be approved.
	Cancelled = "cancelled"
)

// MaxID is the longest change id accepted from an ITSM.
const MaxID = 256

// Request opens a change for a deploy.
type Request struct {
	DeployID    string `json:"deploy_id"`
	Application string `json:"application"`
	Environment string `json:"environment"`
	Version     string `json:"version"`
	Requester   string `json:"requester"`
	Summary     string `json:"summary"`
}

// Change is a change ticket.
type Change struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	URL     string `json:"url,omitempty"`
	By      string `json:"by,omitempty"`
	Outcome string `json:"outcome,omitempty"`
}

// Provider is an ITSM.
type Provider interface {
	Open(ctx context.Context, r Request) (Change, error)
	Get(ctx context.Context, id string) (Change, error)
	Close(ctx context.Context, id, outcome string) error
}

// HTTP is a Provider over HTTP: POST {URL}/changes, GET {URL}/changes/{id},
// POST {URL}/changes/{id}/close.
type HTTP struct {
	URL   string
	Token string
	// Client sends the requests; nil means a pkg/egress client that may
	// reach URL's scheme, host and port only (the operator named them, so
	// the host may be private), follows no redirect and gives each request
	// 30 s.
	Client *http.Client

	once   sync.Once
	client *http.Client
}

func (h *HTTP) httpClient() *http.Client {
	h.once.Do(func() {
		h.client = h.Client
		if h.client == nil {
			h.client = egress.New(egress.Policy{
				Outbound: urlpolicy.Outbound{Use: "ITSM request", Key: "itsm.url", Allow: egress.Origins(h.URL)},
				Timeout:  30 * time.Second,
			})
		}
	})
	return h.client
}

func (h *HTTP) do(ctx context.Context, method, path string, body any, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(h.URL, "/")+path, rd)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	if dep, ok := body.(Request); ok {
		req.Header.Set("Idempotency-Key", dep.DeployID)
	}
	resp, err := h.httpClient().Do(req)
	if err != nil {
		if egress.IsRefused(err) {
			return nil, plugin.Permanent(h.redact(fmt.Errorf("itsm: %w", err)))
		}
		return nil, h.redact(fmt.Errorf("itsm: %w", err))
	}
	defer resp.Body.Close()
	// At most maxAnswer is read: a larger answer is an error, not a
	// truncated body read as JSON.
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	quoted := func(n int) string { return manent.ClipText(strings.TrimSpace(string(b)), n) }
	switch {
	case len(b) > maxAnswer:
		return nil, h.redact(fmt.Errorf("itsm: %s %s: HTTP %d with an answer of more than 1 MiB (not read): %s", method, path, resp.StatusCode, quoted(200)))
	case rerr != nil && resp.StatusCode < 300:
		return nil, h.redact(fmt.Errorf("itsm: %s %s: HTTP %d, then reading the answer failed after %d bytes: %v", method, path, resp.StatusCode, len(b), rerr))
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// The client follows no redirect: the ITSM (or a proxy, a login
		// page) sent manent elsewhere, which only the operator can judge.
		return nil, plugin.Permanent(h.redact(fmt.Errorf("itsm: %s %s: HTTP %d redirected to %s; manent follows no redirect from the ITSM: set itsm.url to the address that answers the protocol (docs/itsm.md)",
			method, path, resp.StatusCode, manent.ClipText(resp.Header.Get("Location"), 300))))
	case resp.StatusCode >= 400:
		msg := fmt.Sprintf("itsm: %s %s: HTTP %d: %s", method, path, resp.StatusCode, quoted(500))
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			msg += " (Retry-After: " + manent.ClipText(ra, 40) + ")"
		}
		err := h.redact(errors.New(msg))
		if resp.StatusCode < 500 && resp.StatusCode != 408 && resp.StatusCode != 429 {
			return nil, plugin.Permanent(err)
		}
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			ct := resp.Header.Get("Content-Type")
			if ct == "" {
				ct = "no Content-Type"
			}
			return b, h.redact(fmt.Errorf("itsm: %s %s: HTTP %d with an answer that is not the JSON of the protocol (%s; %s): %s",
				method, path, resp.StatusCode, manent.ClipText(ct, 80), err, quoted(300)))
		}
	}
	return b, nil
}

// maxAnswer is the largest answer read from an ITSM.
const maxAnswer = 1 << 20

// redact removes the ITSM token from err's text (an ITSM's error page may
// echo the request's headers); err is returned as it is when it holds no
// token.
func (h *HTTP) redact(err error) error {
	if h.Token == "" || !strings.Contains(err.Error(), h.Token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), h.Token, "[redacted]"))
}

// Open opens (or, for the same deploy, returns) a change. An answer
// without a change id (or with one longer than MaxID, or one that cannot be
// in the URL of a poll or close: unaskable) is a protocol error,
// permanent: the change could be neither followed nor closed.
func (h *HTTP) Open(ctx context.Context, r Request) (Change, error) {
	var c Change
	b, err := h.do(ctx, http.MethodPost, "/changes", r, &c)
	if err != nil {
		return Change{}, err
	}
	if c.ID == "" || len(c.ID) > MaxID || unaskable(c.ID) != "" {
		what := "no change id"
		switch {
		case len(c.ID) > MaxID:
			what = fmt.Sprintf("a change id of %d bytes (at most %d)", len(c.ID), MaxID)
		case c.ID != "":
			what = fmt.Sprintf("the change id %q, which manent cannot ask about (%s: it would be in the URL of GET /changes/{id})", c.ID, unaskable(c.ID))
		}
		return Change{}, plugin.Permanent(h.redact(fmt.Errorf(`itsm: POST /changes answered %s: %s; the ITSM must answer {"id": "<change id>", "state": "pending"} (docs/itsm.md)`,
			what, manent.ClipText(strings.TrimSpace(string(b)), 200))))
	}
	return c, nil
}

// unaskable says why id cannot be put in the path of GET /changes/{id}
// and POST /changes/{id}/close ("" when it can): pkg/egress refuses a
// request URL whose path holds a control character or a ".." segment, and
// a "." segment would name another path. An id is escaped in the URL, but
// the path checked is the unescaped one.
func unaskable(id string) string {
	if strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return "it holds a control character"
	}
	for _, seg := range strings.Split(id, "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("it holds a %q path segment", seg)
		}
	}
	return ""
}

// Get returns a change.
func (h *HTTP) Get(ctx context.Context, id string) (Change, error) {
	var c Change
	_, err := h.do(ctx, http.MethodGet, "/changes/"+url.PathEscape(id), nil, &c)
	return c, err
}

// Close closes a change with the deploy's outcome.
func (h *HTTP) Close(ctx context.Context, id, outcome string) error {
	_, err := h.do(ctx, http.MethodPost, "/changes/"+url.PathEscape(id)+"/close", map[string]string{"outcome": outcome}, nil)
	return err
}

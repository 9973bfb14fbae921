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
			return nil, plugin.Permanent(fmt.Errorf("itsm: %w", err))
		}
		return nil, fmt.Errorf("itsm: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		err := fmt.Errorf("itsm: %s %s: HTTP %d: %s", method, path, resp.StatusCode, manent.ClipText(strings.TrimSpace(string(b)), 500))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != 408 && resp.StatusCode != 429 {
			return nil, plugin.Permanent(err)
		}
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return b, fmt.Errorf("itsm: decode %s: %w", path, err)
		}
	}
	return b, nil
}

// Open opens (or, for the same deploy, returns) a change. An answer
// without a change id (or with one longer than MaxID) is a protocol error,
// permanent: the change could be neither followed nor closed.
func (h *HTTP) Open(ctx context.Context, r Request) (Change, error) {
	var c Change
	b, err := h.do(ctx, http.MethodPost, "/changes", r, &c)
	if err != nil {
		return Change{}, err
	}
	if c.ID == "" || len(c.ID) > MaxID {
		what := "no change id"
		if c.ID != "" {
			what = fmt.Sprintf("a change id of %d bytes (at most %d)", len(c.ID), MaxID)
		}
		return Change{}, plugin.Permanent(fmt.Errorf(`itsm: POST /changes answered %s: %s; the ITSM must answer {"id": "<change id>", "state": "pending"} (docs/itsm.md)`,
			what, manent.ClipText(strings.TrimSpace(string(b)), 200)))
	}
	return c, nil
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

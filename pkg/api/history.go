package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// History, rollback and DORA (SPEC §11.5).

// HistoryEntry is one deploy of an environment's history.
type HistoryEntry struct {
	ID         string       `json:"id"`
	Version    string       `json:"version"`
	State      manent.State `json:"state"`
	Requester  string       `json:"requester"`
	CreatedAt  time.Time    `json:"created_at"`
	FinishedAt *time.Time   `json:"finished_at"`
	Error      string       `json:"error"`
	Rollback   string       `json:"rollback"`
	// RollbackOf is set on a deploy made by `manent rollback`: the deploy it
	// went back from.
	RollbackOf string `json:"rollback_of,omitempty"`
	// RollbackFrom is set on a rollback: the deploy whose release it
	// deployed again (its version and descriptor); absent on a rollback
	// an earlier release submitted, which did not record it.
	RollbackFrom string `json:"rollback_from,omitempty"`
	// Current marks the deploy whose release is the environment's current one.
	Current bool `json:"current"`
}

// HistoryResult answers GET /api/v1/environments/{application}/{environment}/history:
// the environment's deploys, newest first, one page at a time.
type HistoryResult struct {
	Application string `json:"application"`
	Environment string `json:"environment"`
	// Current is the environment's current release (null before the first).
	Current    *manent.Release `json:"current"`
	Items      []HistoryEntry  `json:"items"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// CurrentResult answers GET /api/v1/environments/{application}/{environment}/current:
// the current release and the effective deploy it was deployed with.
type CurrentResult struct {
	Application string          `json:"application"`
	Environment string          `json:"environment"`
	Release     *manent.Release `json:"release"`
	// Effective is the deploy as admitted (the descriptor merged with the
	// environment configuration), as `validate` prints it.
	Effective map[string]any `json:"effective"`
}

// EffectiveResult answers GET /api/v1/deployments/{id}/effective: the
// effective deploy a deploy was admitted with — what `manent diff` shows of
// the current release, for any deploy.
type EffectiveResult struct {
	ID          string `json:"id"`
	Application string `json:"application"`
	Environment string `json:"environment"`
	Version     string `json:"version"`
	// Effective is the deploy as admitted (the descriptor merged with the
	// environment configuration, credentials redacted), as `validate`
	// prints it.
	Effective map[string]any `json:"effective"`
}

// RollbackRequest is the body of POST
// /api/v1/environments/{application}/{environment}/rollback.
type RollbackRequest struct {
	// To is the version to go back to (empty: the release that was current
	// before the current one).
	To string `json:"to,omitempty"`
}

// RollbackResult answers a rollback (202): the new deploy, the deploy it goes
// back from and the one whose descriptor it deploys again.
type RollbackResult struct {
	ID         string       `json:"id"`
	State      manent.State `json:"state"`
	Version    string       `json:"version"`
	RollbackOf string       `json:"rollback_of"`
	// From is the deploy whose release (and stored descriptor) is deployed again.
	From   string `json:"from"`
	Notice string `json:"notice,omitempty"`
}

// DORA is GET /api/v1/metrics/dora (SPEC §11.5 [contract]): null where there
// is no sample.
type DORA struct {
	Window               string              `json:"window"`
	Application          string              `json:"application"`
	Environment          string              `json:"environment"`
	DeploymentFrequency  DeploymentFrequency `json:"deployment_frequency"`
	LeadTimeSeconds      LeadTime            `json:"lead_time_seconds"`
	ChangeFailureRate    ChangeFailureRate   `json:"change_failure_rate"`
	TimeToRestoreSeconds TimeToRestore       `json:"time_to_restore_seconds"`
	// Partial is set when retention.deploys removed deploys of the scope
	// that finished inside the window: the figures count only what it kept.
	Partial *DORAPartial `json:"partial,omitempty"`
}

// DORAPartial says a DORA window reaches back into history retention
// removed: deploys that finished up to RemovedThrough are gone, except
// those retention keeps (each environment's current release, the one
// before it, its last failure).
type DORAPartial struct {
	RemovedThrough time.Time `json:"removed_through"`
	Message        string    `json:"message"`
}

// DeploymentFrequency counts the deploys that ran in the window.
type DeploymentFrequency struct {
	Deploys int     `json:"deploys"`
	PerDay  float64 `json:"per_day"`
}

// LeadTime is from source.committed_at to the end of SUCCESS deploys.
type LeadTime struct {
	Median  *float64 `json:"median"`
	P90     *float64 `json:"p90"`
	Samples int      `json:"samples"`
}

// ChangeFailureRate is failed / total (null when total is 0).
type ChangeFailureRate struct {
	Failed int      `json:"failed"`
	Total  int      `json:"total"`
	Rate   *float64 `json:"rate"`
}

// TimeToRestore is from a failed deploy's end to the next SUCCESS, or
// to the end of its own automatic rollback when that completed.
// Unrestored counts the failures of the window that nothing has restored
// yet: an outage still open gives no sample, and is no good news.
type TimeToRestore struct {
	Median     *float64 `json:"median"`
	Samples    int      `json:"samples"`
	Unrestored int      `json:"unrestored"`
}

// Page sizes the server accepts: ?limit= of the deploy list and history
// (MaxPage) and of the audit log (MaxAuditPage).
const (
	MaxPage      = 500
	MaxAuditPage = 1000
)

// DefaultDORAWindow is the window of GET /api/v1/metrics/dora without ?window=.
const DefaultDORAWindow = "30d"

var windowRE = regexp.MustCompile(`^(-?)([0-9]+)([hdw])$`)

// maxDORAWindow is the longest DORA window: ten years.
const maxDORAWindow = 10 * 365 * 24 * time.Hour

// ParseDORAWindow reads a DORA window: <n>h, <n>d or <n>w, at most ten
// years. The server and the CLI (before it sends) use it. A refusal says
// what is wrong (not a number of hours, days or weeks; negative; zero;
// longer than ten years) and quotes the value clipped.
func ParseDORAWindow(s string) (time.Duration, error) {
	quoted := strconv.Quote(manent.ClipText(s, 64))
	m := windowRE.FindStringSubmatch(s)
	if m == nil || m[1] == "" && len(m[2]) > 1 && m[2][0] == '0' && strings.Trim(m[2], "0") != "" {
		return 0, manent.Errorf(manent.EInvalid, "window %s: want a number of hours, days or weeks such as 12h, 30d or 4w", quoted)
	}
	if m[1] == "-" {
		return 0, manent.Errorf(manent.EInvalid, "window %s is negative: a window reaches back from now, such as 12h, 30d or 4w", quoted)
	}
	if strings.Trim(m[2], "0") == "" {
		return 0, manent.Errorf(manent.EInvalid, "window %s holds no time: want at least 1h", quoted)
	}
	unit := map[string]time.Duration{"h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[3]]
	n, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil || n > int64(maxDORAWindow/unit) {
		return 0, manent.Errorf(manent.EInvalid, "window %s is longer than ten years: at most %dh, %dd or %dw",
			quoted, maxDORAWindow/time.Hour, maxDORAWindow/(24*time.Hour), maxDORAWindow/(7*24*time.Hour))
	}
	return time.Duration(n) * unit, nil
}

// DORAOptions select GET /api/v1/metrics/dora.
type DORAOptions struct {
	Application string
	Environment string
	// Window is "30d" (days) or "12h" (hours); empty: the server's 30d.
	Window string
}

func envPath(application, environment, tail string) string {
	return "/api/v1/environments/" + url.PathEscape(application) + "/" + url.PathEscape(environment) + "/" + tail
}

// History returns one page of an environment's deploys, newest first.
func (c *Client) History(ctx context.Context, application, environment string, limit int, cursor string) (*HistoryResult, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := envPath(application, environment, "history")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out HistoryResult
	err := c.do(ctx, http.MethodGet, path, "", nil, &out)
	return &out, err
}

// Current returns an environment's current release with its effective deploy.
func (c *Client) Current(ctx context.Context, application, environment string) (*CurrentResult, error) {
	var out CurrentResult
	err := c.do(ctx, http.MethodGet, envPath(application, environment, "current"), "", nil, &out)
	return &out, err
}

// Effective returns the effective deploy deploy id was admitted with.
func (c *Client) Effective(ctx context.Context, id string) (*EffectiveResult, error) {
	var out EffectiveResult
	err := c.do(ctx, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id)+"/effective", "", nil, &out)
	return &out, err
}

// Rollback submits a new deploy of an earlier release (see RollbackRequest).
// It is sent once: a rollback is a submission.
func (c *Client) Rollback(ctx context.Context, application, environment string, req RollbackRequest) (*RollbackResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out RollbackResult
	_, err = c.send(ctx, request{method: http.MethodPost, path: envPath(application, environment, "rollback"),
		contentType: "application/json", body: body}, &out)
	return &out, err
}

// RollbackIdempotent is Rollback with an Idempotency-Key (SPEC §11.1): the
// server answers a repeat of the key with the first rollback's deploy, so
// the request is retried like a read after a dropped connection or a
// 503/429. replayed says the answer was such a repeat.
func (c *Client) RollbackIdempotent(ctx context.Context, application, environment string, req RollbackRequest, key string) (res *RollbackResult, replayed bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, false, err
	}
	var out RollbackResult
	h, err := c.send(ctx, request{method: http.MethodPost, path: envPath(application, environment, "rollback"),
		contentType: "application/json", body: body, idempotent: true, header: http.Header{IdempotencyKeyHeader: {key}}}, &out)
	if h != nil {
		replayed = h.Get(IdempotentReplayedHeader) == "true"
	}
	return &out, replayed, err
}

// DORA returns the four DORA figures.
func (c *Client) DORA(ctx context.Context, o DORAOptions) (*DORA, error) {
	q := url.Values{}
	for k, v := range map[string]string{"application": o.Application, "environment": o.Environment, "window": o.Window} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/api/v1/metrics/dora"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out DORA
	err := c.do(ctx, http.MethodGet, path, "", nil, &out)
	return &out, err
}

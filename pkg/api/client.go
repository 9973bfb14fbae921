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
	"syscall"
	"time"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/retry"
)

// UnreachableError says the server could not be reached: the connection
// was refused, dropped before an answer, or no answer came within the
// request timeout (CLI exit code 4, "unreachable").
type UnreachableError struct {
	Server string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("server %s unreachable: %v", e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ServerError says the server answered, but with a server error: a 5xx
// status, or an answer that is not what the API promises (CLI exit code 4,
// "server error"). It is not a sign that the server is down.
type ServerError struct {
	Server string
	// Status is the HTTP status (0 for an answer that could not be read as
	// the API's JSON).
	Status int
	// Message is the problem's detail (or title, or the body's text).
	Message string
	// RetryAfter is the server's Retry-After, 0 when it sent none.
	RetryAfter time.Duration
	Err        error
}

func (e *ServerError) Error() string {
	var b strings.Builder
	b.WriteString("server error")
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (the server asks to retry after %s)", e.RetryAfter)
	}
	return b.String()
}

func (e *ServerError) Unwrap() error { return e.Err }

// Default request settings of a Client (see Options).
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultRetries        = 4
	DefaultMaxRetryWait   = 30 * time.Second
)

// Options tune how a Client sends requests. The zero value means the defaults.
type Options struct {
	// RequestTimeout bounds each HTTP request, from sending it to reading
	// the whole answer (DefaultRequestTimeout when 0; negative: no bound).
	// Event streams use it for their first answer only.
	RequestTimeout time.Duration
	// Retries is how many times a request that may be repeated safely is
	// sent again after a 429, 502, 503 or 504 answer or a dropped
	// connection (DefaultRetries when 0; negative: never).
	Retries int
	// MaxRetryWait bounds one wait between attempts: a Retry-After longer
	// than this is not waited for, the error is returned
	// (DefaultMaxRetryWait when 0).
	MaxRetryWait time.Duration
}

func (o Options) withDefaults() Options {
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = DefaultMaxRetryWait
	}
	return o
}

// Client talks to manent-server.
type Client struct {
	base  string
	token string
	http  *http.Client
	opts  Options
}

// NewClient returns a client for the server at base (e.g. http://127.0.0.1:8080)
// authenticating with token, with the default Options. A nil hc uses
// http.DefaultTransport.
func NewClient(base, token string, hc *http.Client) *Client {
	return NewClientWith(base, token, hc, Options{})
}

// NewClientWith is NewClient with explicit Options.
func NewClientWith(base, token string, hc *http.Client, o Options) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc, opts: o.withDefaults()}
}

// RequestTimeout returns the bound of one request (≤ 0: none).
func (c *Client) RequestTimeout() time.Duration { return c.opts.RequestTimeout }

// Server returns the base URL.
func (c *Client) Server() string { return c.base }

// Token returns the bearer token the client sends.
func (c *Client) Token() string { return c.token }

// Submit sends a descriptor (YAML or JSON bytes). dryRun runs every check
// without enqueueing (`manent validate`). A dry run is retried like a read;
// a real submission without an idempotency key is sent once (see
// SubmitIdempotent).
func (c *Client) Submit(ctx context.Context, descriptor []byte, dryRun bool) (*SubmitResult, error) {
	path := "/api/v1/deployments"
	if dryRun {
		path += "?dry_run=true"
	}
	var out SubmitResult
	_, err := c.send(ctx, request{method: http.MethodPost, path: path, contentType: "application/yaml",
		body: descriptor, idempotent: dryRun}, &out)
	return &out, err
}

// IdempotencyKeyHeader and IdempotentReplayedHeader are the headers of
// idempotent submission (SPEC §11.1 [contract]).
const (
	IdempotencyKeyHeader     = "Idempotency-Key"
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// SubmitIdempotent submits a descriptor with an Idempotency-Key: the server
// answers the same key (from the same identity, within 24 h) with the first
// answer again, so the request is retried after a dropped connection or a
// 503 without ever creating two deploys. replayed reports whether the answer
// was such a repeat (Idempotent-Replayed: true).
func (c *Client) SubmitIdempotent(ctx context.Context, descriptor []byte, key string) (res *SubmitResult, replayed bool, err error) {
	var out SubmitResult
	h, err := c.send(ctx, request{method: http.MethodPost, path: "/api/v1/deployments", contentType: "application/yaml",
		body: descriptor, idempotent: true, header: http.Header{IdempotencyKeyHeader: {key}}}, &out)
	if h != nil {
		replayed = h.Get(IdempotentReplayedHeader) == "true"
	}
	return &out, replayed, err
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
	all := &LogsResult{}
	err := c.EachLogsPage(ctx, id, func(page *LogsResult) error {
		all.Lines = append(all.Lines, page.Lines...)
		all.State = page.State
		all.LogsRemovedFrom = page.LogsRemovedFrom
		return nil
	})
	return all, err
}

// EachLogsPage calls fn with each page of a deploy's log, in order, until
// the last one or fn's error.
func (c *Client) EachLogsPage(ctx context.Context, id string, fn func(*LogsResult) error) error {
	var after int64
	for {
		page, err := c.LogsPage(ctx, id, after, 0)
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		if page.NextAfter <= after {
			return nil
		}
		after = page.NextAfter
	}
}

// LogsPage returns one page of a deploy's log: the lines after the line
// numbered after, at most limit of them (0: the server's default,
// MaxLogPage). NextAfter is set when the log goes on.
func (c *Client) LogsPage(ctx context.Context, id string, after int64, limit int) (*LogsResult, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/v1/deployments/" + url.PathEscape(id) + "/logs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out LogsResult
	err := c.do(ctx, http.MethodGet, path, "", nil, &out)
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
	// Sent again only after a refusal that says when to come back (429,
	// 503 with Retry-After: nothing was done); after a dropped answer a
	// second cancel could find the deploy CANCELLED by the first and
	// answer 409.
	_, err := c.send(ctx, request{method: http.MethodPost, path: "/api/v1/deployments/" + url.PathEscape(id) + "/cancel",
		refusedAgain: true}, &out)
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

// do sends one API request; reads (GET, DELETE) are retried as send says.
func (c *Client) do(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	_, err := c.send(ctx, request{method: method, path: path, contentType: contentType, body: body,
		idempotent: method == http.MethodGet || method == http.MethodDelete}, out)
	return err
}

// request is one API call.
type request struct {
	method, path, contentType string
	body                      []byte
	header                    http.Header
	// idempotent: sending it twice does no more than sending it once, so it
	// is retried after a dropped connection or a 429/502/503/504.
	idempotent bool
	// refusedAgain: sent again after a 429 or 503 that carries a
	// Retry-After — the server refused it without acting and said when to
	// come back — but not after a dropped connection, a 502/504 or a 503
	// without Retry-After (a proxy's), after which it may have acted.
	refusedAgain bool
}

// send sends req and decodes a 2xx answer into out, returning the answer's
// header. Failures: *UnreachableError (no connection, dropped, no answer
// within the request timeout), *ServerError (5xx, unreadable answer),
// *manent.Error (4xx), ctx.Err().
//
// Retries are bounded: at most Options.Retries more attempts, each after
// the server's Retry-After (when it sent one and it is at most
// Options.MaxRetryWait) or an exponential backoff (200 ms doubling, at most
// 5 s). An idempotent request is retried after a 429, 502, 503 or 504 and
// after a connection error; a refusedAgain request after a 429 or 503 with
// a Retry-After; any request is retried when the connection was refused
// (nothing was sent). A request that timed out is not sent again.
func (c *Client) send(ctx context.Context, req request, out any) (http.Header, error) {
	var h http.Header
	p := RetryPolicy
	p.Attempts = max(c.opts.Retries, 0) + 1
	err := p.Do(ctx, func(int) error {
		var (
			retryAfter time.Duration
			again      bool
			err        error
		)
		h, retryAfter, again, err = c.once(ctx, req, out)
		switch {
		case err == nil:
			return nil
		case !again || ctx.Err() != nil:
			return retry.Stop(err)
		case retryAfter > c.opts.MaxRetryWait:
			return retry.Stop(err)
		case retryAfter > 0:
			return retry.After(err, retryAfter)
		}
		return err
	})
	return h, err
}

// RetryPolicy is the backoff between two attempts of a request when the
// server sent no Retry-After: 200 ms doubling, at most 5 s, ±20 % jitter.
// Its Attempts come from Options.Retries.
var RetryPolicy = retry.Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}

// once sends req once. retry says whether sending it again may help and is
// safe; retryAfter is the server's Retry-After (0 when none).
func (c *Client) once(ctx context.Context, req request, out any) (h http.Header, retryAfter time.Duration, retry bool, err error) {
	actx := ctx
	if c.opts.RequestTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(actx, req.method, c.base+req.path, body)
	if err != nil {
		return nil, 0, false, &manent.Error{Code: manent.EInvalid, Message: fmt.Sprintf("bad server address %q", c.base), Err: err}
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	hr.Header.Set("Accept", "application/json")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	// noAnswer classifies a failure to get (all of) an answer.
	noAnswer := func(what string, err error) (http.Header, time.Duration, bool, error) {
		if ctx.Err() != nil {
			return nil, 0, false, ctx.Err()
		}
		if actx.Err() != nil {
			return nil, 0, false, &UnreachableError{Server: c.base, Err: fmt.Errorf("no answer within %s (the request timeout)", c.opts.RequestTimeout)}
		}
		refused := errors.Is(err, syscall.ECONNREFUSED)
		return nil, 0, refused || req.idempotent, &UnreachableError{Server: c.base, Err: fmt.Errorf("%s%w", what, err)}
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return noAnswer("", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return noAnswer("read response: ", err)
	}
	if resp.StatusCode >= 400 {
		ra := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		perr := answerError(c.base, resp, data)
		var se *ServerError
		if errors.As(perr, &se) {
			se.RetryAfter = ra
		}
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			return resp.Header, ra, req.idempotent || (req.refusedAgain && ra > 0), perr
		case http.StatusBadGateway, http.StatusGatewayTimeout:
			return resp.Header, ra, req.idempotent, perr
		}
		return resp.Header, 0, false, perr
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "json") {
				// A 200 page from something else (a proxy's sign-in page,
				// another service): say so briefly, as for an error answer.
				na := &NotAPIAnswerError{Status: resp.StatusCode, ContentType: ct, Excerpt: excerpt(data, maxExcerpt)}
				if resp.Request != nil {
					na.Method, na.URL = resp.Request.Method, resp.Request.URL.Redacted()
				}
				return resp.Header, 0, false, &ServerError{Server: c.base, Err: na}
			}
			return resp.Header, 0, false, &ServerError{Server: c.base, Status: 0, Message: fmt.Sprintf("undecodable answer to %s %s (HTTP %d)", req.method, req.path, resp.StatusCode), Err: err}
		}
	}
	return resp.Header, 0, false, nil
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP
// date; 0 when absent or unreadable. "0" is read as a minimal wait.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs <= 0 {
			return 50 * time.Millisecond
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 50*time.Millisecond)
	}
	return 0
}

// answerError turns an HTTP error answer (status >= 400) into a
// *manent.Error (4xx) or a *ServerError (5xx): with the problem's detail
// when the body is the API's problem document, else wrapping a
// *NotAPIAnswerError that says so briefly (no error page printed whole).
func answerError(server string, resp *http.Response, body []byte) error {
	status := resp.StatusCode
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Title == "" {
		na := &NotAPIAnswerError{Status: status, ContentType: resp.Header.Get("Content-Type"), Excerpt: excerpt(body, maxExcerpt)}
		if resp.Request != nil {
			na.Method, na.URL = resp.Request.Method, resp.Request.URL.Redacted()
		}
		if status >= 500 {
			return &ServerError{Server: server, Status: status, Err: na}
		}
		return &manent.Error{Code: CodeForStatus(status), Message: fmt.Sprintf("%d %s", status, http.StatusText(status)), Err: na}
	}
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if status >= 500 {
		return &ServerError{Server: server, Status: status, Message: msg}
	}
	return &manent.Error{Code: CodeForStatus(status), Message: msg, Fields: p.Errors}
}

// NotAPIAnswerError says an error answer is not the manent API's (a
// problem+json document): --server likely points at something else, such
// as a proxy's or another service's HTML error page. It is wrapped in the
// error the status gives (*manent.Error for 4xx, *ServerError for 5xx).
type NotAPIAnswerError struct {
	Status      int
	Method, URL string
	// ContentType is the answer's Content-Type, "" when it had none.
	ContentType string
	// Excerpt is the start of the body on one line (whitespace runs made
	// one space), at most 200 characters, ending with "…" when cut.
	Excerpt string
}

// maxExcerpt bounds NotAPIAnswerError.Excerpt, in characters.
const maxExcerpt = 200

func (e *NotAPIAnswerError) Error() string {
	var b strings.Builder
	b.WriteString("the answer")
	if e.URL != "" {
		fmt.Fprintf(&b, " to %s %s", e.Method, e.URL)
	}
	b.WriteString(" is not a manent API answer (")
	if e.ContentType == "" {
		b.WriteString("no Content-Type")
	} else {
		fmt.Fprintf(&b, "Content-Type %q", e.ContentType)
	}
	b.WriteString(", not application/problem+json or JSON)")
	if e.Excerpt == "" {
		b.WriteString("; empty body")
	} else {
		b.WriteString(`; it begins: "` + e.Excerpt + `"`)
	}
	return b.String()
}

// excerpt returns the start of body as one line: runs of white space
// (newlines included) made one space, cut to at most max characters with
// "…" added when something was left out.
func excerpt(body []byte, limit int) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "\uFFFD")), " ")
	n := 0
	for i := range s {
		if n == limit {
			return strings.TrimRight(s[:i], " ") + "…"
		}
		n++
	}
	return s
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
	case manent.ETooSlow:
		return http.StatusRequestTimeout
	case manent.ETooManyRequests:
		return http.StatusTooManyRequests
	case manent.EUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// IsUnreachable reports whether err means the server could not be reached
// (no connection, dropped, no answer in time).
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}

// IsServerError reports whether err is a server error: a 5xx answer or an
// answer that is not the API's.
func IsServerError(err error) bool {
	var s *ServerError
	return errors.As(err, &s)
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

// ApproveWave approves the rollout wave of a deploy waiting for its
// approval; refused (409) when the deploy waits for something else.
func (c *Client) ApproveWave(ctx context.Context, id, wave, comment string) (*manent.Deployment, error) {
	return c.decideWave(ctx, id, "approve", &wave, comment, "")
}

// RejectWave rejects the rollout wave of a deploy waiting for its
// approval; refused (409) when the deploy waits for something else.
func (c *Client) RejectWave(ctx context.Context, id, wave, comment string) (*manent.Deployment, error) {
	return c.decideWave(ctx, id, "reject", &wave, comment, "")
}

// DecideWaiting sends verdict ("approve" or "reject") pinned to what the
// deploy waits for when it is read first: the approval of the rollout
// wave that waits for one, else the deploy's own approval; a deploy that
// waits for neither, or that the token may not read (deployment.approve
// without deployment.read), gets the verdict unpinned, for the server to
// decide (refused, 409, when this identity already gave that verdict on
// something else in the deploy: it then names the wave to send). Pinned, a verdict sent again after a refusal whose
// answer came after the commit (a 503 with Retry-After) is answered with
// what was recorded, and never counts for what the deploy waits for by
// then — unpinned, the retry of a recorded approval approved the wave the
// deploy had reached meanwhile. It returns the deploy and the wave decided
// on ("" for the deploy's own approval).
func (c *Client) DecideWaiting(ctx context.Context, id, verdict, comment, planDigest string) (*manent.Deployment, string, error) {
	var wave *string
	d, err := c.Deployment(ctx, id)
	switch {
	case manent.ErrorCode(err) == manent.EForbidden:
		// A token that may approve but not read deploys: the verdict
		// goes unpinned, as it did before it was pinned.
	case err != nil:
		return nil, "", err
	default:
		if d.State == manent.StateAwaitingApproval {
			wave = new(string)
		}
		for _, w := range d.Rollout {
			if w.State == manent.WaveAwaitingApproval {
				wave = &w.Name
				break
			}
		}
	}
	out, err := c.decideWave(ctx, id, verdict, wave, comment, planDigest)
	if wave == nil {
		return out, "", err
	}
	return out, *wave, err
}

func (c *Client) decide(ctx context.Context, id, verdict, comment, planDigest string) (*manent.Deployment, error) {
	return c.decideWave(ctx, id, verdict, nil, comment, planDigest)
}

// decideWave posts a verdict; wave, when set, pins it to that wave.
func (c *Client) decideWave(ctx context.Context, id, verdict string, wave *string, comment, planDigest string) (*manent.Deployment, error) {
	body, _ := json.Marshal(struct {
		Comment    string  `json:"comment"`
		PlanDigest string  `json:"plan_digest"`
		Wave       *string `json:"wave,omitempty"`
	}{comment, planDigest, wave})
	var out manent.Deployment
	// Sent again only after a refusal that says when to come back (429 of
	// limits.refusals_per_minute, 503 with Retry-After: nothing was
	// recorded), like Cancel. The server counts an identity's verdict once
	// (a second one is a 409 "already decided"), so a verdict cannot count
	// twice; still, after a dropped answer it is not sent again: the 409 of
	// a recorded verdict would read as a failure.
	_, err := c.send(ctx, request{method: http.MethodPost, path: "/api/v1/deployments/" + url.PathEscape(id) + "/" + verdict,
		contentType: "application/json", body: body, refusedAgain: true}, &out)
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

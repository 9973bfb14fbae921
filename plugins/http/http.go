// Package httpplugin is the `http` target plugin (SPEC §6): it drives a
// platform's deploy API. Each action POSTs the deploy context as JSON to a
// configured URL with an Idempotency-Key, then, when the platform answers
// with (or is configured with) a status URL, polls it until the platform
// says done or failed.
//
// Target configuration (`target.with`):
//
//	deploy_url:    https://platform.example/api/deploys        # required
//	status_url:    https://platform.example/api/deploys/{deploy_id}
//	activate_url:  …/activate     # optional; without it activation does nothing
//	health_url:    …/health       # optional; GET, 2xx is healthy
//	rollback_url:  …/rollback     # required for rollback:deploy and rollback:activation
//	live_url:      …/current      # optional; GET, what is live now (default: status_url)
//	method:        POST           # for deploy/activate/rollback calls
//	headers:       {Authorization: "Bearer …"}
//	timeout:       30s            # per call
//	poll_interval: 5s
//	poll_timeout:  10m
//	status_field:  state          # dotted path in the status document
//	done:          [done]         # values of status_field that end polling well
//	failed:        [failed]       # … and badly
//
// URLs may hold {deploy_id}, {application}, {environment}, {version} and
// {step}, and within a rollout wave (SPEC §11.6) {wave}, {wave_index},
// {targets} (comma-separated) and {percent}, each replaced by its value
// escaped as one opaque piece of the URL (escapeValue: a version "1&env=dev"
// adds no query parameter, ".." climbs no path level; outside a rollout the
// wave placeholders are empty; {percent} is 100 except in a percentage
// wave).
// The JSON body carries `rollout: {wave, index, targets, percent}` within
// a wave.
//
// Percentage rollouts (rollout.percentages) are accepted only when the
// platform is told the share: deploy_url uses {percent}, or
// `percentages: true` says the platform reads rollout.percent from the
// body. Otherwise submission refuses them (422): the platform would
// deploy everything at once.
//
// Outcomes: a 2xx is success; a 3xx (not followed) or a 4xx other than
// 408 and 429 is a permanent error (plugin.Permanent: the step fails at once); a 5xx, 408, 429, a
// timeout or a connection failure is retryable. A status document in a
// failed state is permanent: the platform said no. Every call carries
// `Idempotency-Key: <deploy id>:<step>`, so a retried or recovered step does
// not deploy twice on a platform that honours it.
//
// Calls go through the pkg/egress client given to New: a URL or address
// that `plugins.http_allow` refuses is a permanent error, and redirects are
// not followed (a 3xx is a permanent error naming where it leads).
//
// The package name avoids shadowing net/http; the directory is plugins/http.
// It imports pkg/egress, pkg/plugin and pkg/urlpolicy (Redact).
package httpplugin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// Defaults of `with`.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultPollInterval = 5 * time.Second
	DefaultPollTimeout  = 10 * time.Minute
)

// maxBody bounds how much of an answer is read.
const maxBody = 1 << 20

// Plugin is the http target.
type Plugin struct {
	client *http.Client
	// disabled: the server allows no call (plugins.http_allow is empty).
	disabled bool
}

// Disabled returns the plugin of a server whose plugins.http_allow is
// empty (local trial mode among them): every call would be refused, so
// Validate refuses the target at submission instead of the deploy failing
// at its deploy step.
func Disabled() *Plugin {
	return &Plugin{client: egress.Deny("http plugin call", "plugins.http_allow"), disabled: true}
}

// New returns the http plugin sending through client, a pkg/egress client
// with the policy of `plugins.http_allow` (target URLs come from
// descriptors); nil refuses every call.
func New(client *http.Client) *Plugin {
	if client == nil {
		client = egress.Deny("http plugin call", "plugins.http_allow")
	}
	return &Plugin{client: client}
}

type config struct {
	DeployURL, StatusURL, ActivateURL, HealthURL, RollbackURL, LiveURL string

	Method       string
	Headers      map[string]string
	Timeout      time.Duration
	PollInterval time.Duration
	PollTimeout  time.Duration
	StatusField  string
	Done, Failed []string
	// Percentages: the platform reads rollout.percent from the body.
	Percentages bool
}

func parse(with map[string]any) (config, error) {
	c := config{
		Method: http.MethodPost, Timeout: DefaultTimeout, PollInterval: DefaultPollInterval,
		PollTimeout: DefaultPollTimeout, StatusField: "state", Done: []string{"done"}, Failed: []string{"failed"},
	}
	s := plugin.ReadSettings(with, "percentages", "deploy_url", "status_url", "activate_url", "health_url", "rollback_url", "live_url", "method",
		"headers", "timeout", "poll_interval", "poll_timeout", "status_field", "done", "failed")
	urlKey := func(key string, dst *string) {
		if !s.String(key, dst) || *dst == "" {
			return
		}
		u, err := url.Parse(expand(*dst, plugin.Context{}))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			s.Fail(plugin.SettingPath(key), "with.%s %q must be an absolute http(s) URL", key, *dst)
		}
	}
	if v, ok := with["deploy_url"].(string); ok && v == "" {
		s.Fail("deploy_url", "with.deploy_url must not be empty: it is the URL each action calls")
	} else if s.Require("deploy_url") {
		urlKey("deploy_url", &c.DeployURL)
	}
	urlKey("status_url", &c.StatusURL)
	urlKey("activate_url", &c.ActivateURL)
	urlKey("health_url", &c.HealthURL)
	urlKey("rollback_url", &c.RollbackURL)
	urlKey("live_url", &c.LiveURL)
	if s.String("method", &c.Method) {
		c.Method = strings.ToUpper(c.Method)
		if !slices.Contains([]string{http.MethodPost, http.MethodPut, http.MethodPatch}, c.Method) {
			s.Fail("method", "with.method %q must be POST, PUT or PATCH", c.Method)
		}
	}
	s.String("status_field", &c.StatusField)
	s.Duration("timeout", &c.Timeout)
	s.Duration("poll_interval", &c.PollInterval)
	s.Duration("poll_timeout", &c.PollTimeout)
	if s.StringMap("headers", &c.Headers) {
		for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
			switch {
			case !validHeaderName(k):
				s.Fail(plugin.SettingPath("headers", k), "with.headers %q is not a header name (letters, digits and !#$%%&'*+-.^_`|~, no space or colon)", k)
			case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(k)):
				s.Fail(plugin.SettingPath("headers", k), "with.headers.%s is set by manent or the HTTP client (%s), not by the descriptor: remove it", k, strings.Join(reservedHeaders, ", "))
			case strings.ContainsFunc(c.Headers[k], func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
				s.Fail(plugin.SettingPath("headers", k), "with.headers.%s holds a line break or another control character: a header value is one line", k)
			}
		}
	}
	// A status value may be a number (200) or a boolean: compared as written.
	s.Strings("done", true, &c.Done)
	s.Strings("failed", true, &c.Failed)
	s.Bool("percentages", &c.Percentages)
	if err := s.Err(); err != nil {
		return c, fmt.Errorf("http: %w", err)
	}
	return c, nil
}

// reservedHeaders are the headers manent (Idempotency-Key) or net/http
// (Host, Content-Length, Transfer-Encoding, Connection) set on every call:
// with.headers cannot set them.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Idempotency-Key"}

// validHeaderName reports whether k is an HTTP header name (an RFC 9110
// token).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Validate checks `with`.
func (p *Plugin) Validate(with map[string]any) error {
	_, err := parse(with)
	if p.disabled {
		return errors.Join(err, fmt.Errorf("http: %w", plugin.Settingf("", "this server allows the http plugin to call nothing (plugins.http_allow is empty): ask its operators to allow your platform's URLs")))
	}
	return err
}

// HonoursPercentages: the platform is told the share when deploy_url
// uses {percent} or with.percentages is true.
func (p *Plugin) HonoursPercentages(with map[string]any) error {
	c, err := parse(with)
	if err != nil {
		return err
	}
	if c.Percentages || strings.Contains(c.DeployURL, "{percent}") {
		return nil
	}
	return errors.New("http: the platform is not told the wave's share: use {percent} in with.deploy_url, " +
		"or set with.percentages: true if it reads rollout.percent from the request body")
}

// expand replaces the placeholders of a configured URL.
func expand(raw string, pc plugin.Context) string {
	wave, index, targets, percent := "", "", "", "100"
	if ro := pc.Rollout(); ro != nil {
		wave, index, targets = ro.Wave, strconv.Itoa(ro.Index), strings.Join(ro.Targets, ",")
		if ro.Percent > 0 {
			percent = strconv.Itoa(ro.Percent)
		}
	}
	return strings.NewReplacer(
		"{deploy_id}", escapeValue(pc.DeployID),
		"{application}", escapeValue(pc.Application),
		"{environment}", escapeValue(pc.Environment),
		"{version}", escapeValue(pc.Version),
		"{step}", escapeValue(pc.Step),
		"{wave}", escapeValue(wave),
		"{wave_index}", index,
		"{targets}", escapeValue(targets),
		"{percent}", percent,
	).Replace(raw)
}

// escapeValue makes v one opaque piece of a URL, in a path segment or a
// query alike: every byte but letters, digits, '-', '_', '.' and '~' is
// %-escaped ('&', '=', '+', ';', '@', ':', '$' and '/' too, which a path
// escape keeps), and a value "." or ".." is escaped whole, so a version
// cannot add a query parameter ("1&env=dev") or climb a path level ("..").
func escapeValue(v string) string {
	if v == "." || v == ".." {
		return strings.Repeat("%2E", len(v))
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// request is the JSON body of every call.
type request struct {
	Action      string         `json:"action"`
	DeployID    string         `json:"deploy_id"`
	Application string         `json:"application"`
	Environment string         `json:"environment"`
	Version     string         `json:"version"`
	Step        string         `json:"step"`
	Artifact    string         `json:"artifact,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
	// Checkpoint is what Live reported before the deploy (rollbacks only).
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// Rollout is the wave the call is for, absent without a rollout.
	Rollout *plugin.Rollout `json:"rollout,omitempty"`
}

// answer is a call's outcome.
type answer struct {
	status   int
	header   http.Header
	body     []byte
	document map[string]any // the body, when a JSON object
}

// IdempotencyKey is the Idempotency-Key of a call.
func IdempotencyKey(pc plugin.Context) string { return pc.DeployID + ":" + pc.Step }

func (p *Plugin) call(ctx context.Context, c config, pc plugin.Context, method, rawURL string, body any) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, plugin.Permanent(fmt.Errorf("http: encode request: %w", err))
		}
		rd = bytes.NewReader(b)
	}
	target := expand(rawURL, pc)
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, plugin.Permanent(fmt.Errorf("http: %w", err))
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", IdempotencyKey(pc))
	resp, err := p.client.Do(req)
	if err != nil {
		// The message names the URL redacted; the transport's *url.Error
		// quotes it whole (an ?apikey= with it), so only its cause is kept.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("no answer within %s", c.Timeout)
		}
		logf(pc, "%s %s -> %v", method, urlpolicy.Redact(target), err)
		err = fmt.Errorf("http: %s %s: %w", method, urlpolicy.Redact(target), err)
		if egress.IsRefused(err) {
			return nil, plugin.Permanent(err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			// A platform that sends its answer slowly, or never ends it:
			// with.timeout bounds the whole call, body included.
			err = fmt.Errorf("no whole answer within %s (with.timeout): it answered %d %s, then its body did not end (%d bytes read)",
				c.Timeout, resp.StatusCode, http.StatusText(resp.StatusCode), len(data))
		} else {
			err = fmt.Errorf("read answer: %w", err)
		}
		logf(pc, "%s %s -> %v", method, urlpolicy.Redact(target), err)
		return nil, fmt.Errorf("http: %s %s: %w", method, urlpolicy.Redact(target), err)
	}
	a := &answer{status: resp.StatusCode, header: resp.Header, body: data}
	_ = json.Unmarshal(data, &a.document)
	logf(pc, "%s %s -> %d", method, urlpolicy.Redact(target), resp.StatusCode)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return a, nil
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// Not followed (the egress client follows none): a retry would be
		// redirected again.
		where := "nowhere (no Location)"
		if loc := resp.Header.Get("Location"); loc != "" {
			where = urlpolicy.Redact(resolve(target, loc))
		}
		return a, plugin.Permanent(fmt.Errorf("http: %s %s answered %d %s: it redirects to %s, and manent follows no redirect: set %s to the URL it should call",
			method, urlpolicy.Redact(target), resp.StatusCode, http.StatusText(resp.StatusCode), where, settingOf(c, rawURL)))
	}
	err = fmt.Errorf("http: %s %s answered %d %s%s", method, urlpolicy.Redact(target), resp.StatusCode,
		http.StatusText(resp.StatusCode), quote(data, resp.Header.Get("Content-Type")))
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout &&
		resp.StatusCode != http.StatusTooManyRequests {
		return a, plugin.Permanent(err)
	}
	return a, err
}

// settingOf names the setting rawURL comes from, for messages.
func settingOf(c config, rawURL string) string {
	for _, k := range []struct{ key, url string }{
		{"deploy_url", c.DeployURL}, {"activate_url", c.ActivateURL}, {"rollback_url", c.RollbackURL},
		{"health_url", c.HealthURL}, {"live_url", c.LiveURL}, {"status_url", c.StatusURL},
	} {
		if k.url != "" && k.url == rawURL {
			return "with." + k.key
		}
	}
	return "the platform's status URL (its Location or status_url answer)"
}

// act makes an action's call, then polls its status until it settles.
func (p *Plugin) act(ctx context.Context, pc plugin.Context, action, rawURL string, checkpoint json.RawMessage, pollConfigured bool) (plugin.Result, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	body := request{
		Action: action, DeployID: pc.DeployID, Application: pc.Application, Environment: pc.Environment,
		Version: pc.Version, Step: pc.Step, Artifact: pc.Artifact, Parameters: pc.Parameters, Checkpoint: checkpoint,
		Rollout: pc.Rollout(),
	}
	a, err := p.call(ctx, c, pc, c.Method, rawURL, body)
	if err != nil {
		return nil, err
	}
	res := plugin.Result{"status": a.status}
	if a.document != nil {
		res["response"] = a.document
	}
	statusURL := ""
	switch {
	case a.header.Get("Location") != "" && (a.status == http.StatusAccepted || a.status == http.StatusCreated):
		statusURL = resolve(expand(rawURL, pc), a.header.Get("Location"))
	case stringAt(a.document, "status_url") != "":
		statusURL = resolve(expand(rawURL, pc), stringAt(a.document, "status_url"))
	case pollConfigured && c.StatusURL != "":
		statusURL = c.StatusURL
	}
	if statusURL == "" {
		return res, nil
	}
	state, doc, err := p.poll(ctx, c, pc, statusURL)
	res["state"] = state
	if doc != nil {
		res["status_document"] = doc
	}
	return res, err
}

// poll GETs the status URL every PollInterval until status_field is one of
// Done or Failed, or PollTimeout passes. Transient failures and 404 (a
// status not created yet) keep polling.
func (p *Plugin) poll(ctx context.Context, c config, pc plugin.Context, statusURL string) (string, map[string]any, error) {
	deadline := time.Now().Add(c.PollTimeout)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastErr error
	last := ""
	for {
		select {
		case <-ctx.Done():
			return last, nil, ctx.Err()
		case <-timer.C:
		}
		a, err := p.call(ctx, c, pc, http.MethodGet, statusURL, nil)
		switch {
		case plugin.IsPermanent(err) && (a == nil || a.status != http.StatusNotFound):
			return last, nil, err
		case err != nil:
			lastErr = err
		default:
			state := stringAt(a.document, c.StatusField)
			if state != last {
				logf(pc, "status: %s", state)
				last = state
			}
			if slices.Contains(c.Done, state) {
				return state, a.document, nil
			}
			if slices.Contains(c.Failed, state) {
				msg := stringAt(a.document, "error")
				if msg == "" {
					msg = stringAt(a.document, "message")
				}
				if msg != "" {
					msg = ": " + oneLine(msg)
				}
				return state, a.document, plugin.Permanent(fmt.Errorf("http: the platform reports %s %q%s", c.StatusField, state, msg))
			}
		}
		if time.Now().Add(c.PollInterval).After(deadline) {
			if lastErr != nil && last == "" {
				return last, nil, fmt.Errorf("http: status not settled within %s: %w", c.PollTimeout, lastErr)
			}
			return last, nil, fmt.Errorf("http: status not settled within %s (last %s: %q)", c.PollTimeout, c.StatusField, last)
		}
		timer.Reset(c.PollInterval)
	}
}

// Live GETs live_url (or status_url) and returns its JSON document as the
// checkpoint; `{}` when neither is configured.
func (p *Plugin) Live(ctx context.Context, pc plugin.Context) (json.RawMessage, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	u := c.LiveURL
	if u == "" {
		u = c.StatusURL
	}
	if u == "" {
		return json.RawMessage(`{}`), nil
	}
	a, err := p.call(ctx, c, pc, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if !json.Valid(a.body) {
		return nil, plugin.Permanent(fmt.Errorf("http: %s did not answer JSON", urlpolicy.Redact(expand(u, pc))))
	}
	return json.RawMessage(bytes.TrimSpace(a.body)), nil
}

// Deploy calls deploy_url and polls the status until done.
func (p *Plugin) Deploy(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	return p.act(ctx, pc, "deploy", c.DeployURL, nil, true)
}

// Activate calls activate_url, if configured.
func (p *Plugin) Activate(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	if c.ActivateURL == "" {
		return plugin.Result{"skipped": "no activate_url: the deploy call activates"}, nil
	}
	return p.act(ctx, pc, "activate", c.ActivateURL, nil, false)
}

// Health GETs health_url, if configured: any 2xx is healthy; any other
// answer is a retryable failure (a release coming up answers 404 or 503).
func (p *Plugin) Health(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	if c.HealthURL == "" {
		return plugin.Result{"skipped": "no health_url"}, nil
	}
	a, err := p.call(ctx, c, pc, http.MethodGet, c.HealthURL, nil)
	if err != nil {
		var pe *plugin.PermanentError
		if errors.As(err, &pe) && !egress.IsRefused(err) {
			err = pe.Err // health may recover: let the step retry
		}
		return nil, err
	}
	return plugin.Result{"status": a.status}, nil
}

// RollbackDeploy calls rollback_url with action rollback:deploy and the checkpoint.
func (p *Plugin) RollbackDeploy(ctx context.Context, pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	return p.rollback(ctx, pc, "rollback:deploy", checkpoint)
}

// RollbackActivation calls rollback_url with action rollback:activation and the checkpoint.
func (p *Plugin) RollbackActivation(ctx context.Context, pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	return p.rollback(ctx, pc, "rollback:activation", checkpoint)
}

func (p *Plugin) rollback(ctx context.Context, pc plugin.Context, action string, checkpoint json.RawMessage) (plugin.Result, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	if c.RollbackURL == "" {
		return nil, plugin.Permanent(fmt.Errorf("http: cannot %s: with.rollback_url is not set", action))
	}
	if len(checkpoint) > 0 && !json.Valid(checkpoint) {
		return nil, plugin.Permanent(fmt.Errorf("http: bad checkpoint"))
	}
	return p.act(ctx, pc, action, c.RollbackURL, checkpoint, false)
}

// stringAt returns the string at a dotted path of doc ("" if none); numbers
// and booleans are formatted.
func stringAt(doc map[string]any, path string) string {
	var cur any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[k]
	}
	switch v := cur.(type) {
	case nil:
		return ""
	case string:
		return v
	case map[string]any, []any:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func resolve(base, ref string) string {
	b, err := url.Parse(base)
	if err != nil {
		return ref
	}
	r, err := url.Parse(ref)
	if err != nil {
		return ref
	}
	return b.ResolveReference(r).String()
}

// maxQuote is the most runes of an answer's text an error quotes.
const maxQuote = 200

// quote is what an error answer's body adds to the step's error, which
// anyone who may read the deploy sees: the title and detail of a
// problem+json (RFC 9457), else the error or message of a JSON document,
// else the first line of plain text — short, on one line, URLs without
// their user information and query, and credentials out (see oneLine). An
// HTML page or another document is named, not quoted: it would be noise,
// and may carry tokens or personal data.
func quote(b []byte, contentType string) string {
	text := strings.TrimSpace(string(b))
	if text == "" {
		return ""
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) == nil {
		title, detail := stringAt(doc, "title"), stringAt(doc, "detail")
		if detail == "" {
			detail = stringAt(doc, "error")
		}
		if detail == "" {
			detail = stringAt(doc, "error.message")
		}
		if detail == "" {
			detail = stringAt(doc, "message")
		}
		switch {
		case title != "" && detail != "":
			return ": " + oneLine(title+": "+detail)
		case title != "" || detail != "":
			return ": " + oneLine(title+detail)
		}
		return fmt.Sprintf(" (a JSON document of %d bytes without title, detail, error or message: not quoted)", len(b))
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	lower := strings.ToLower(text[:min(len(text), 512)])
	if strings.Contains(mt, "html") || strings.HasPrefix(lower, "<!doctype html") || strings.HasPrefix(lower, "<html") {
		return fmt.Sprintf(" (an HTML page of %d bytes: not quoted)", len(b))
	}
	if mt != "" && !strings.HasPrefix(mt, "text/") || !utf8.ValidString(text) {
		return fmt.Sprintf(" (%d bytes of %s: not quoted)", len(b), cmp.Or(mt, "binary data"))
	}
	line, _, _ := strings.Cut(text, "\n")
	return ": " + oneLine(line)
}

// oneLine makes s fit an error: control characters become spaces, URLs
// lose their user information and query (urlpolicy.Redact), the word
// after Bearer or Basic and the value of a key=value whose key names a
// credential (plugin.SensitiveKey) become "[redacted]", and it is cut at
// maxQuote runes.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	words := strings.Fields(s)
	for i, w := range words {
		switch {
		case strings.Contains(w, "://"):
			end := len(w)
			for end > 0 && strings.ContainsRune(".,;:)]}'\"", rune(w[end-1])) {
				end--
			}
			words[i] = urlpolicy.Redact(w[:end]) + w[end:]
		case i > 0 && (strings.EqualFold(words[i-1], "bearer") || strings.EqualFold(words[i-1], "basic")):
			words[i] = "[redacted]"
		default:
			if k, _, ok := strings.Cut(w, "="); ok && plugin.SensitiveKey(strings.Trim(k, `"'{(,`)) {
				words[i] = k + "=[redacted]"
			}
		}
	}
	s = strings.Join(words, " ")
	if r := []rune(s); len(r) > maxQuote {
		s = string(r[:maxQuote]) + "…"
	}
	return s
}

func logf(pc plugin.Context, format string, args ...any) {
	if pc.Log != nil {
		fmt.Fprintf(pc.Log, format+"\n", args...)
	}
}

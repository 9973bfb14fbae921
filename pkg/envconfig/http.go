package envconfig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/urlpolicy"
	"github.com/manent-io/manent/pkg/yamlvalue"
)

// DefaultTimeout bounds one HTTP request of the HTTP provider, body included.
const DefaultTimeout = 5 * time.Second

// HTTP asks a configuration service for an application's configuration in
// an environment: GET URL, with {environment} and {application} replaced,
// answered by a JSON document with the keys of Config (the same as the
// YAML files of Files; unknown keys are errors).
//
//   - 200: the configuration. Its ETag is the Revision (without one, the
//     SHA-256 of the body) and is sent back as If-None-Match next time.
//   - 304: the copy cached for that URL, with the same Revision.
//   - 404: no configuration for this environment (nil *Config, no error).
//   - a timeout, a connection that fails, 408, 429 or 5xx: an error that
//     matches ErrUnavailable.
//   - any other status, or a body that is not a valid configuration: an
//     error saying so.
//
// Use a *HTTP (it holds the cache); it is safe for concurrent use.
type HTTP struct {
	// URL is the template asked, for example
	// https://cfg.example/environments/{environment}?application={application}.
	URL string
	// Timeout bounds each request; zero means DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests; nil means a pkg/egress client that may
	// reach URL's scheme, host and port only (the operator named them, so
	// the host may be private) and follows no redirect.
	Client *http.Client

	once   sync.Once
	client *http.Client
	mu     sync.Mutex
	cache  map[string]cached // by expanded URL
}

type cached struct {
	etag string
	body []byte
}

func (h *HTTP) httpClient() *http.Client {
	h.once.Do(func() {
		h.client = h.Client
		if h.client == nil {
			h.client = egress.New(egress.Policy{Outbound: urlpolicy.Outbound{
				Use: "environment configuration", Key: "environments.url", Allow: egress.Origins(h.URL),
			}})
		}
	})
	return h.client
}

// Get asks the service for the configuration of application in environment.
func (h *HTTP) Get(ctx context.Context, application, environment string) (*Config, Revision, error) {
	rev := Revision{Source: redact(h.URL)}
	if err := checkNames(application, environment); err != nil {
		return nil, rev, err
	}
	// Names match [a-z0-9-], which needs no escaping in a path or a query.
	u := strings.NewReplacer("{environment}", environment, "{application}", application).Replace(h.URL)
	rev.Source = redact(u)

	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, rev, fmt.Errorf("environment configuration %s: %w", rev.Source, err)
	}
	req.Header.Set("Accept", "application/json")
	// Credentials in the URL go as basic auth, never in the URL itself
	// (the outbound client refuses URLs that carry them).
	if req.URL.User != nil {
		pw, _ := req.URL.User.Password()
		req.SetBasicAuth(req.URL.User.Username(), pw)
		req.URL.User = nil
	}
	h.mu.Lock()
	prev, hasPrev := h.cache[u]
	h.mu.Unlock()
	if hasPrev && prev.etag != "" {
		req.Header.Set("If-None-Match", prev.etag)
	}

	resp, err := h.httpClient().Do(req)
	if err != nil {
		return nil, rev, h.failure(ctx, rev.Source, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSize+1))
	if err != nil {
		return nil, rev, h.failure(ctx, rev.Source, err)
	}

	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotModified:
		if !hasPrev {
			return nil, rev, fmt.Errorf("environment configuration %s: 304 Not Modified, but nothing is cached", rev.Source)
		}
		cfg, err := parseJSON(rev.Source, prev.body)
		rev.Revision = revisionOf(prev.etag, prev.body)
		return cfg, rev, err
	case resp.StatusCode == http.StatusNotFound:
		h.store(u, nil)
		return nil, rev, nil
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests:
		return nil, rev, unavailable(rev.Source, fmt.Errorf("%s%s", resp.Status, snippet(body)))
	default:
		return nil, rev, fmt.Errorf("environment configuration %s: unexpected %s%s", rev.Source, resp.Status, snippet(body))
	}
	if len(body) > maxSize {
		return nil, rev, fmt.Errorf("environment configuration %s: the answer is larger than %d bytes", rev.Source, maxSize)
	}
	cfg, err := parseJSON(rev.Source, body)
	if err != nil {
		return nil, rev, err
	}
	etag := resp.Header.Get("ETag")
	h.store(u, &cached{etag: etag, body: body})
	rev.Revision = revisionOf(etag, body)
	return cfg, rev, nil
}

// failure classifies a failed exchange: the caller's own cancellation is
// returned as such; anything else (our timeout, a refused connection, a
// broken answer) means the source is unavailable.
func (h *HTTP) failure(ctx context.Context, source string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("environment configuration %s: %w", source, ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is in the message already
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s", h.timeout())
	}
	return unavailable(source, err)
}

func (h *HTTP) timeout() time.Duration {
	if h.Timeout <= 0 {
		return DefaultTimeout
	}
	return h.Timeout
}

func (h *HTTP) store(u string, c *cached) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c == nil {
		delete(h.cache, u)
		return
	}
	if h.cache == nil {
		h.cache = map[string]cached{}
	}
	h.cache[u] = *c
}

// parseJSON reads a configuration document.
func parseJSON(source string, body []byte) (*Config, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("environment configuration %s: the answer is not JSON: %v", source, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("environment configuration %s: the answer is not JSON: more than one value", source)
	}
	doc, err := floats(raw, "")
	if err != nil {
		return nil, fmt.Errorf("environment configuration %s: %w", source, err)
	}
	if ps := checkDocument(doc, false); len(ps) > 0 {
		return nil, fmt.Errorf("environment configuration %s: %s", source,
			describe(ps, func(problem) string { return "invalid configuration" }))
	}
	cfg, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("environment configuration %s: %w", source, err)
	}
	return cfg, nil
}

// floats turns the numbers of a document read with UseNumber into float64,
// as json.Unmarshal gives them, refusing an integer beyond ±2^53: it would
// reach the deploy with other digits (as a YAML file refuses it).
func floats(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			f, err := floats(e, path+"/"+k)
			if err != nil {
				return nil, err
			}
			x[k] = f
		}
	case []any:
		for i, e := range x {
			f, err := floats(e, fmt.Sprintf("%s/%d", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = f
		}
	case json.Number:
		if yamlvalue.InexactInteger(string(x)) {
			return nil, fmt.Errorf("%s: the integer %s cannot be kept exactly (it is beyond ±2^53); send it as a string", path, x)
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: %s is not a finite number", path, x)
		}
		return f, nil
	}
	return v, nil
}

// revisionOf is the ETag or, without one, the body's SHA-256.
func revisionOf(etag string, body []byte) string {
	if etag != "" {
		return etag
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// snippet quotes the start of an error answer for the message.
func snippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" || !utf8.ValidString(s) {
		return ""
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return ": " + s
}

// redact removes credentials from a URL for messages and revisions.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

package notify

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
	"sync"
	"time"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// DefaultTimeout bounds one delivery attempt when Sender.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// maxErrorBody is how much of a refusing receiver's body an error keeps.
const maxErrorBody = 512

// Sender makes one attempt to deliver a message. It is safe for concurrent use.
//
// The outcome of Send and PostJSON is nil for a 2xx answer. Otherwise the
// error says whether retrying can help: plugin.IsPermanent reports the
// refusals it cannot (a 4xx other than 408 and 429, a 3xx since redirects
// are not followed, a URL or address the callback policy refuses, a missing
// secret); every other error (a 5xx, 408, 429, a timeout, a connection
// failure, a DNS outage) is worth retrying. A non-2xx answer is an
// *HTTPError in the chain, for its status.
type Sender struct {
	// Policy is `callbacks.allow`. Send checks each callback URL against it
	// at send time (a policy narrowed since the submission applies), and
	// when Client is nil the sender sends through an egress client of
	// Policy, which checks the address actually dialed (DNS rebinding). The
	// zero Policy allows no callback.
	Policy urlpolicy.Callbacks
	// Client sends the requests. Nil means an egress client of Policy with
	// Timeout and no redirects. A client set here must be an egress client
	// too (it must not follow redirects and must enforce the address
	// policy).
	Client *http.Client
	// Secret is the signing key (ParseSecret). Send refuses to send an
	// unsigned callback; PostJSON does not sign.
	Secret []byte
	// Timeout bounds one attempt; 0 means DefaultTimeout.
	Timeout time.Duration
	// UserAgent is sent with every request; "" means "manent".
	UserAgent string

	// shown is what an error may quote of a URL (an attempt's error is
	// stored and shown to the deploy's readers): nil means the URL without
	// user information, query or fragment (a callback's); a chat sender
	// shows the origin only, since a webhook's path is its secret.
	shown  func(string) string
	once   sync.Once
	client *http.Client
}

// NewChatSender returns the Sender of chat messages to the given
// incoming-webhook URLs (SPEC §8 `chat`): it may reach those URLs' origins
// only — the operator named them, so they may be private hosts — follows no
// redirect, and checks the address dialed.
func NewChatSender(webhooks []string, timeout time.Duration) *Sender {
	s := &Sender{Timeout: timeout, shown: origin}
	s.Client = egress.New(egress.Policy{
		Outbound: urlpolicy.Outbound{Use: "chat message", Key: "chat", Allow: egress.Origins(webhooks...)},
		Timeout:  s.timeout(),
	})
	return s
}

// NewSender returns a Sender for callbacks allowed by policy, signed with
// secret, each attempt bounded by timeout (0: DefaultTimeout).
func NewSender(policy urlpolicy.Callbacks, secret []byte, timeout time.Duration) *Sender {
	return &Sender{Policy: policy, Secret: secret, Timeout: timeout}
}

func (s *Sender) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

func (s *Sender) httpClient() *http.Client {
	s.once.Do(func() {
		s.client = s.Client
		if s.client == nil {
			s.client = egress.New(egress.Policy{Outbound: s.Policy.Outbound(), Timeout: s.timeout()})
		}
	})
	return s.client
}

// HTTPError is a receiver's answer other than 2xx.
type HTTPError struct {
	Status int
	// Body is the start of the response body.
	Body string
	// RetryAfter is the receiver's Retry-After (in seconds form), 0 if none.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("receiver answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Status >= 300 && e.Status < 400 {
		msg += " (redirects are not followed)"
	}
	if b := strings.TrimSpace(e.Body); b != "" {
		msg += ": " + b
	}
	return msg
}

// Retryable reports whether an answer with this status is worth another
// attempt: 5xx, 408 Request Timeout and 429 Too Many Requests.
func Retryable(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

// Send delivers ev to url once, as a signed Standard Webhooks callback:
// headers webhook-id (id, the same on every retry of the event),
// webhook-timestamp (now) and webhook-signature, JSON body ev.
func (s *Sender) Send(ctx context.Context, url string, ev Event, id string) error {
	_, err := s.send(ctx, url, ev, id)
	return err
}

// send is Send that also returns the receiver's status (0 without an answer).
func (s *Sender) send(ctx context.Context, url string, ev Event, id string) (int, error) {
	if len(s.Secret) == 0 {
		return 0, plugin.Permanent(errors.New("no callback signing secret is configured (callbacks.secret_env): refusing to send an unsigned callback"))
	}
	if id == "" {
		return 0, plugin.Permanent(errors.New("callback without a webhook-id"))
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, plugin.Permanent(fmt.Errorf("encode event: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	if err := s.Policy.Check(ctx, url); err != nil {
		if manent.ErrorCode(err) == manent.EInvalid {
			return 0, plugin.Permanent(err)
		}
		return 0, s.transportError(ctx, err)
	}
	now := time.Now()
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, Sign(s.Secret, id, now, body))
	return s.post(ctx, url, body, h)
}

// PostJSON posts v as JSON to url once, unsigned and without resolving the
// host beforehand (it is for operator-configured endpoints such as chat
// webhooks); the egress client still checks the URL and the address
// dialed.
func (s *Sender) PostJSON(ctx context.Context, url string, v any) error {
	_, err := s.postJSON(ctx, url, v)
	return err
}

func (s *Sender) postJSON(ctx context.Context, url string, v any) (int, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return 0, plugin.Permanent(fmt.Errorf("encode message: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	return s.post(ctx, url, body, http.Header{})
}

func (s *Sender) post(ctx context.Context, target string, body []byte, h http.Header) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, plugin.Permanent(fmt.Errorf("bad URL: %w", s.hideURL(err)))
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	ua := s.UserAgent
	if ua == "" {
		ua = "manent"
	}
	req.Header.Set("User-Agent", ua)
	resp, err := s.httpClient().Do(req)
	if err != nil {
		return 0, s.transportError(ctx, s.hideURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return resp.StatusCode, nil
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	he := &HTTPError{Status: resp.StatusCode, Body: string(snippet), RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	if Retryable(resp.StatusCode) {
		return he.Status, he
	}
	return he.Status, plugin.Permanent(he)
}

// hideURL makes the URL a *url.Error in err quotes what an error may
// show of it (see Sender.shown), and returns err.
func (s *Sender) hideURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if s.shown != nil {
			ue.URL = s.shown(ue.URL)
		} else {
			ue.URL = urlpolicy.Redact(ue.URL)
		}
	}
	return err
}

// origin is rawURL's scheme and host followed by "/…" when it has more: what
// an error may show of a chat webhook, whose path is a secret.
func origin(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "(the webhook URL)"
	}
	shown := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		shown += "/…"
	}
	return shown
}

// transportError classifies a failure to get an answer.
func (s *Sender) transportError(ctx context.Context, err error) error {
	var ae *urlpolicy.AddressError
	if errors.As(err, &ae) {
		return plugin.Permanent(fmt.Errorf("callback refused by the callback policy: %w", ae))
	}
	if egress.IsRefused(err) {
		return plugin.Permanent(err)
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("no answer within %s: %w", s.timeout(), err)
	}
	return err
}

// retryAfter parses a Retry-After in seconds; an HTTP date or garbage is 0.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// testSecret is the secret of the Standard Webhooks test vector.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// verifyWebhook checks a request the way a receiver following the Standard
// Webhooks specification does, written from the specification and sharing
// no code with package notify: the key is the base64 after "whsec_", the
// signed content is "<webhook-id>.<webhook-timestamp>.<body>", the header
// holds space-separated "v1,<base64 HMAC-SHA256>" entries compared in
// constant time, and the timestamp must be within tolerance of now.
func verifyWebhook(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("bad secret: %w", err)
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("bad webhook-timestamp %q", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp %s is %s away from now", ts, d)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no valid signature")
}

// hit is one request a receiver saw.
type hit struct {
	ID        string
	Timestamp string
	Body      []byte
	Event     notify.Event
	VerifyErr error
	Path      string
}

// respondFunc answers the n-th request (1-based) of a webhook-id; ctx is
// the request's.
type respondFunc func(ctx context.Context, n int, h hit) int

// receiver is a callback receiver on httptest: it verifies every request,
// reports it on hits, then answers with respond.
type receiver struct {
	srv     *httptest.Server
	secret  string
	respond respondFunc
	hits    chan hit

	mu    sync.Mutex
	byID  map[string]int
	total []hit
}

func newReceiver(t *testing.T, secret string, respond respondFunc) *receiver {
	t.Helper()
	r := &receiver{secret: secret, respond: respond, hits: make(chan hit, 1000), byID: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	h := hit{
		ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"), Body: body, Path: req.URL.Path,
	}
	if r.secret != "" {
		h.VerifyErr = verifyWebhook(r.secret, req.Header, body, time.Now(), 5*time.Minute)
	}
	_ = json.Unmarshal(body, &h.Event)
	r.mu.Lock()
	r.byID[h.ID]++
	n := r.byID[h.ID]
	r.total = append(r.total, h)
	r.mu.Unlock()
	r.hits <- h
	status := http.StatusNoContent
	if r.respond != nil {
		status = r.respond(req.Context(), n, h)
	}
	w.WriteHeader(status)
}

func (r *receiver) url(path string) string { return r.srv.URL + path }

// count returns how many requests carried webhook-id id.
func (r *receiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

func (r *receiver) all() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.total...)
}

// next waits for the next request, failing the test after the deadline.
func (r *receiver) next(t *testing.T, within time.Duration) hit {
	t.Helper()
	select {
	case h := <-r.hits:
		return h
	case <-time.After(within):
		t.Fatalf("no request within %s", within)
		return hit{}
	}
}

// loopback is the callback policy of the tests: it names 127.0.0.1
// explicitly, the only way a loopback receiver is allowed.
func loopback() urlpolicy.Callbacks {
	return urlpolicy.Callbacks{Allow: []string{"http://127.0.0.1:*/**"}}
}

func mustSecret(t *testing.T, s string) []byte {
	t.Helper()
	key, err := notify.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func sampleEvent(typ notify.EventType) notify.Event {
	return notify.Event{
		Type: typ,
		Deployment: notify.DeploymentRef{
			ID: "dpl_01TEST", Application: "billing", Environment: "prod", Version: "1.4.2", State: "PENDING",
		},
		Timestamp: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
}

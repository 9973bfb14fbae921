package notify_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

func TestSenderClassifiesAnswers(t *testing.T) {
	tests := []struct {
		status        int
		wantErr       bool
		wantPermanent bool
	}{
		{200, false, false},
		{202, false, false},
		{204, false, false},
		{301, true, true},
		{307, true, true},
		{400, true, true},
		{401, true, true},
		{404, true, true},
		{410, true, true},
		{408, true, false},
		{429, true, false},
		{500, true, false},
		{502, true, false},
		{503, true, false},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			rcv := newReceiver(t, testSecret, func(context.Context, int, hit) int { return tt.status })
			s := notify.NewSender(loopback(), mustSecret(t, testSecret), time.Second)
			err := s.Send(context.Background(), rcv.url("/hook"), sampleEvent(notify.EventStarted), "dpl_01TEST.started.cb0")
			h := rcv.next(t, 5*time.Second)
			if h.VerifyErr != nil {
				t.Fatalf("receiver could not verify the callback: %v", h.VerifyErr)
			}
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("Send error = %v, want error %v", err, tt.wantErr)
			}
			if got := plugin.IsPermanent(err); got != tt.wantPermanent {
				t.Fatalf("permanent = %v, want %v (%v)", got, tt.wantPermanent, err)
			}
			var he *notify.HTTPError
			if tt.wantErr && (!errors.As(err, &he) || he.Status != tt.status) {
				t.Fatalf("error %v does not carry status %d", err, tt.status)
			}
		})
	}
}

func TestSenderHonoursRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte("slow down"))
	}))
	defer srv.Close()
	s := notify.NewSender(loopback(), mustSecret(t, testSecret), time.Second)
	err := s.Send(context.Background(), srv.URL, sampleEvent(notify.EventStarted), "x.started.cb0")
	var he *notify.HTTPError
	if !errors.As(err, &he) {
		t.Fatalf("Send error = %v, want an *HTTPError", err)
	}
	if he.RetryAfter != 7*time.Second || !strings.Contains(err.Error(), "slow down") {
		t.Fatalf("HTTPError = %+v (%v)", he, err)
	}
}

func TestSenderBodyAndHeaders(t *testing.T) {
	rcv := newReceiver(t, testSecret, nil)
	s := notify.NewSender(loopback(), mustSecret(t, testSecret), time.Second)
	ev := sampleEvent(notify.EventStep)
	started := ev.Timestamp.Add(-time.Minute)
	ev.Step = &notify.StepRef{Name: "deploy", State: "ERROR", Attempts: 3, Error: "exit status 1", StartedAt: &started, FinishedAt: &ev.Timestamp}
	if err := s.Send(context.Background(), rcv.url("/"), ev, "dpl_01TEST.step.deploy.cb0"); err != nil {
		t.Fatal(err)
	}
	h := rcv.next(t, 5*time.Second)
	if h.VerifyErr != nil {
		t.Fatal(h.VerifyErr)
	}
	if h.ID != "dpl_01TEST.step.deploy.cb0" {
		t.Fatalf("webhook-id = %q", h.ID)
	}
	for _, field := range []string{
		`"type":"step"`, `"deployment":{"id":"dpl_01TEST","application":"billing","environment":"prod","version":"1.4.2","state":"PENDING","error":"","rollback":""}`,
		`"step":{"name":"deploy","state":"ERROR","attempts":3,"error":"exit status 1","started_at":"2026-05-01T11:59:00Z","finished_at":"2026-05-01T12:00:00Z"}`,
		`"timestamp":"2026-05-01T12:00:00Z"`,
	} {
		if !strings.Contains(string(h.Body), field) {
			t.Errorf("body %s lacks %s", h.Body, field)
		}
	}
}

func TestSenderSlowReceiverTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	s := notify.NewSender(loopback(), mustSecret(t, testSecret), 100*time.Millisecond)
	start := time.Now()
	err := s.Send(context.Background(), srv.URL, sampleEvent(notify.EventStarted), "x.started.cb0")
	if err == nil || plugin.IsPermanent(err) {
		t.Fatalf("Send error = %v, want a retryable timeout", err)
	}
	if !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Fatalf("error = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Send took %s", d)
	}
}

// rebinding answers a public address first (the policy check) and
// loopback afterwards (the dial): a DNS rebinding attack.
type rebinding struct {
	mu sync.Mutex
	n  int
}

func (r *rebinding) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if r.n == 1 {
		return []net.IPAddr{{IP: net.ParseIP("93.184.216.34")}}, nil
	}
	return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}}, nil
}

func TestSenderRefusals(t *testing.T) {
	rcv := newReceiver(t, testSecret, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(rcv.srv.URL, "http://"))
	tests := []struct {
		name   string
		policy urlpolicy.Callbacks
		secret []byte
		url    string
		want   string
	}{
		{"loopback not named by the policy", urlpolicy.Callbacks{Allow: []string{"http://**"}}, mustSecret(t, testSecret), rcv.url("/"), "not a public address"},
		{"URL outside the allow-list", urlpolicy.Callbacks{Allow: []string{"https://ci.example/**"}}, mustSecret(t, testSecret), rcv.url("/"), "not allowed"},
		{"DNS rebinding caught at dial time", urlpolicy.Callbacks{Allow: []string{"http://*.example:*/**"}, Resolver: &rebinding{}}, mustSecret(t, testSecret), "http://hooks.example:" + port + "/", "refused by the callback policy"},
		{"no signing secret", loopback(), nil, rcv.url("/"), "unsigned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := notify.NewSender(tt.policy, tt.secret, time.Second)
			err := s.Send(context.Background(), tt.url, sampleEvent(notify.EventStarted), "x.started.cb0")
			if !plugin.IsPermanent(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Send error = %v, want a permanent error containing %q", err, tt.want)
			}
			if tt.name == "DNS rebinding caught at dial time" {
				var ae *urlpolicy.AddressError
				if !errors.As(err, &ae) {
					t.Fatalf("error %v is not an *urlpolicy.AddressError", err)
				}
			}
		})
	}
	if n := len(rcv.all()); n != 0 {
		t.Fatalf("the receiver got %d requests, want none", n)
	}
}

func TestSenderUnreachableIsRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	s := notify.NewSender(loopback(), mustSecret(t, testSecret), time.Second)
	err = s.Send(context.Background(), "http://"+addr+"/", sampleEvent(notify.EventStarted), "x.started.cb0")
	if err == nil || plugin.IsPermanent(err) {
		t.Fatalf("Send error = %v, want a retryable error", err)
	}
}

// An attempt's error is stored with the delivery and shown to everyone who
// may read the deploy (manent status), and logged: it names the receiver
// without what may be a secret. A chat webhook's whole path is its secret
// (Slack's /services/T…/B…/<token>); a callback URL loses its user
// information and query, as the delivery's URL does.
func TestSenderErrorsHideTheURLsSecrets(t *testing.T) {
	unreachable := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	for _, base := range []string{"http://" + unreachable(t), slow.URL} {
		hook := base + "/services/T0AAA/B0BBB/WEBHOOKSECRET"
		chat := &notify.Chat{Channels: map[string]string{"prod": hook}, Sender: notify.NewChatSender([]string{hook}, 200*time.Millisecond)}
		err := chat.Send(context.Background(), "prod", sampleEvent(notify.EventStarted))
		if err == nil || strings.Contains(err.Error(), "WEBHOOKSECRET") || strings.Contains(err.Error(), "T0AAA") {
			t.Fatalf("chat error = %v, want one that does not quote the webhook's path", err)
		}
		if !strings.Contains(err.Error(), base) {
			t.Fatalf("chat error = %v, want it to name the webhook's origin %s", err, base)
		}
		s := notify.NewSender(loopback(), mustSecret(t, testSecret), 200*time.Millisecond)
		err = s.Send(context.Background(), base+"/ci/hook?token=CALLBACKTOKEN", sampleEvent(notify.EventStarted), "x.started.cb0")
		if err == nil || strings.Contains(err.Error(), "CALLBACKTOKEN") {
			t.Fatalf("callback error = %v, want one without the URL's query", err)
		}
		if !strings.Contains(err.Error(), base+"/ci/hook") {
			t.Fatalf("callback error = %v, want it to name %s/ci/hook", err, base)
		}
	}
}

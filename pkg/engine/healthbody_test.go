package engine_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// A health check that never answers as expected says what the endpoint
// last answered after the status (`; response: …`), so that the deploy's
// error gives the cause without `logs`: the last lines of the start of
// the body, masked of the URL's credentials (an endpoint may echo them),
// a long one clipped.
func TestHealthCheckSaysWhatItAnswered(t *testing.T) {
	const token = "HEALTHTOKEN-8f2e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		switch r.URL.Path {
		case "/lines":
			_, _ = io.WriteString(w, "<html>\n\n<p>db: connection refused (token="+r.URL.Query().Get("access_token")+")</p>\n")
		case "/long":
			// One line, longer than what is kept, the token at its end.
			_, _ = io.WriteString(w, `{"status":"DOWN","detail":"`+strings.Repeat("x", 1024-30-len(`{"status":"DOWN","detail":"`))+r.URL.Query().Get("access_token")+strings.Repeat("y", 4096)+`"}`)
		}
	}))
	defer srv.Close()
	hc := egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Use: "health check", Key: "health.allow", Allow: []string{"http://127.0.0.1:*/**"}}})
	for path, want := range map[string]string{
		"/lines": "; response: <html> | <p>db: connection refused (token=***)</p>",
		"/long":  `; response: {"status":"DOWN","detail":"xxx`,
	} {
		url := srv.URL + path + "?access_token=" + token
		_, err := engine.CheckHealth(context.Background(), hc, []descriptor.HealthCheck{{URL: url, Retries: 1}}, time.Millisecond, io.Discard)
		if err == nil || !plugin.IsPermanent(err) {
			t.Fatalf("%s: %v, want a permanent failure", path, err)
		}
		got, ok := plugin.LastOutput(nil, err)
		if !ok || !strings.Contains(got, "got 503, want 200"+want) || strings.Contains(got, token) || strings.Contains(got, token[:8]) {
			t.Errorf("%s: the error says %q, want %q after the status, and no token", path, got, want)
		}
	}
}

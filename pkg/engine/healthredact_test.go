package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// A health check's URL may carry a credential (user information, an
// ?access_token=): the post-test step's log, its output and its error —
// stored, streamed and shown to every reader of the deploy — show the URL
// redacted as a deploy's settings are, whether the endpoint answered, failed
// or could not be reached.
func TestHealthCheckHidesTheURLsCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		switch {
		case r.URL.Path == "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case user != "probe" || pass != "HEALTHPASSWORD" || r.URL.Query().Get("access_token") != "HEALTHTOKEN":
			// The check itself is made with the credentials.
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	hc := egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Use: "health check", Key: "health.allow", Allow: []string{"http://127.0.0.1:*/**"}}})
	withCreds := func(base, path string) string {
		return strings.Replace(base, "http://", "http://probe:HEALTHPASSWORD@", 1) + path + "?access_token=HEALTHTOKEN&region=eu"
	}
	for _, url := range []string{withCreds(srv.URL, "/healthz"), withCreds(srv.URL, "/down"), withCreds("http://"+gone, "/healthz")} {
		var log bytes.Buffer
		res, err := engine.CheckHealth(context.Background(), hc, []descriptor.HealthCheck{{URL: url}}, time.Millisecond, &log)
		out, _ := json.Marshal(res)
		seen := log.String() + string(out)
		if err != nil {
			seen += err.Error()
		}
		for _, secret := range []string{"HEALTHPASSWORD", "HEALTHTOKEN"} {
			if strings.Contains(seen, secret) {
				t.Errorf("%s: the step shows %s:\nlog: %soutput: %s\nerror: %v", url, secret, log.String(), out, err)
			}
		}
		if strings.HasSuffix(url, "/healthz?access_token=HEALTHTOKEN&region=eu") && strings.Contains(url, srv.URL[len("http://"):]) && err != nil {
			t.Errorf("%s: %v, want the check made with the URL's credentials to pass", url, err)
		}
		if !strings.Contains(log.String(), "region=eu") {
			t.Errorf("%s: the log does not name the endpoint: %s", url, log.String())
		}
	}
}

package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
)

// openLimitedStream opens an event stream at url with token and returns its
// response once the headers are in; the caller closes the body.
func openLimitedStream(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		// The first frame is in: the stream holds its place.
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	return resp
}

// The event streams a least privileged token may hold open are bounded
// (limits.streams_per_identity), and so are all the server's
// (limits.streams): the next one is a 429 problem with Retry-After that
// names the limit, other identities keep theirs, and a closed stream gives
// its place back.
func TestEventStreamsAreBounded(t *testing.T) {
	t.Parallel()
	tokens := []auth.TokenConfig{
		{Name: "reader", SHA256: auth.HashToken("reader-token")},
		{Name: "other", SHA256: auth.HashToken("other-token")},
	}
	rules := []auth.RBACRule{{Subjects: []string{"token:reader", "token:other"}, Permissions: []string{"deployment.read"},
		Applications: []string{"*"}, Environments: []string{"*"}}}
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) {
		c.Limits.StreamsPerIdentity, c.Limits.Streams = 2, 3
	})
	c := api.NewClient(srv.URL, "admin-token", nil)
	id, _ := startGated(t, c, gatedStaging)
	deployURL := srv.URL + "/api/v1/deployments/" + id + "/events"
	globalURL := srv.URL + "/api/v1/events"

	refused := func(resp *http.Response, want string) {
		t.Helper()
		defer resp.Body.Close()
		var p struct{ Detail string }
		_ = json.NewDecoder(resp.Body).Decode(&p)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(p.Detail, want) {
			t.Fatalf("answer %d (Retry-After %q, %s) %q, want 429 naming %q", resp.StatusCode, resp.Header.Get("Retry-After"),
				resp.Header.Get("Content-Type"), p.Detail, want)
		}
	}
	// The reader's two streams: one deploy stream and the global one.
	a := openLimitedStream(t, deployURL, "reader-token")
	b := openLimitedStream(t, globalURL, "reader-token")
	for _, r := range []*http.Response{a, b} {
		if r.StatusCode != http.StatusOK {
			t.Fatalf("stream %d, want 200", r.StatusCode)
		}
	}
	refused(openLimitedStream(t, deployURL, "reader-token"), "token:reader has 2 event streams open, the most one identity may (limits.streams_per_identity)")
	refused(openLimitedStream(t, srv.URL+"/api/v1/deployments/"+id+"/logs?follow=true", "reader-token"), "limits.streams_per_identity")
	// Another identity has its own count, up to the server's total.
	o := openLimitedStream(t, deployURL, "other-token")
	if o.StatusCode != http.StatusOK {
		t.Fatalf("other's stream %d, want 200", o.StatusCode)
	}
	refused(openLimitedStream(t, deployURL, "other-token"), "the server has 3 event streams open, the most it serves (limits.streams)")
	// A closed stream gives its place back (when its handler has seen the
	// client go).
	a.Body.Close()
	enginetest.Eventually(t, 10*time.Second, func() bool {
		r := openLimitedStream(t, deployURL, "reader-token")
		if r.StatusCode == http.StatusOK {
			t.Cleanup(func() { r.Body.Close() })
			return true
		}
		r.Body.Close()
		return false
	}, "the reader's place given back")
	b.Body.Close()
	o.Body.Close()
}

package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/servertest"
)

// recorder is an httptest handler that answers each request with the next
// of its answers (the last one repeats) and records when requests came.
type recorder struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter, r *http.Request)
	times   []time.Time
	keys    []string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	n := len(rc.times)
	rc.times = append(rc.times, time.Now())
	rc.keys = append(rc.keys, r.Header.Get(api.IdempotencyKeyHeader))
	a := rc.answers[min(n, len(rc.answers)-1)]
	rc.mu.Unlock()
	a(w, r)
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.times)
}

func problem(status int, retryAfter, detail string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", api.ProblemContentType)
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"title":%q,"status":%d,"detail":%q}`, http.StatusText(status), status, detail)
	}
}

func okDeployment(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"dpl_1","state":"SUCCESS"}`)
}

func start(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// A 5xx is a server error with the server's message, never "unreachable".
func TestServerErrorIsNotUnreachable(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(500, "", "internal error; the server log has the details")}}
	c := api.NewClient(start(t, rc), "", nil)
	_, err := c.Deployment(context.Background(), "dpl_1")
	if !api.IsServerError(err) || api.IsUnreachable(err) {
		t.Fatalf("err = %T %v, want a *api.ServerError only", err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "server error: 500 Internal Server Error: internal error; the server log has the details") {
		t.Errorf("message %q", msg)
	}
	if rc.count() != 1 {
		t.Errorf("a 500 was sent %d times, want once (not retried)", rc.count())
	}
}

// An answer that is not the API's JSON is a server error too.
func TestUndecodableAnswerIsServerError(t *testing.T) {
	c := api.NewClient(start(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<html>proxy says hi</html>")
	})), "", nil)
	_, err := c.Deployment(context.Background(), "dpl_1")
	if !api.IsServerError(err) || api.IsUnreachable(err) {
		t.Fatalf("err = %T %v, want a *api.ServerError", err, err)
	}
}

// Nothing listening: unreachable.
func TestConnectionRefusedIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := api.NewClientWith("http://"+addr, "", nil, api.Options{Retries: 1})
	_, err = c.Deployment(context.Background(), "dpl_1")
	if !api.IsUnreachable(err) || api.IsServerError(err) {
		t.Fatalf("err = %T %v, want *api.UnreachableError", err, err)
	}
}

// A server that accepts and never answers costs one request timeout, not
// more: the request is not sent again.
func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}}}
	url := start(t, rc)
	defer close(release)
	c := api.NewClientWith(url, "", nil, api.Options{RequestTimeout: 200 * time.Millisecond})
	_, err := c.Deployment(context.Background(), "dpl_1")
	if !api.IsUnreachable(err) || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("err = %T %v, want unreachable: no answer within 200ms", err, err)
	}
	if rc.count() != 1 {
		t.Errorf("sent %d times, want once", rc.count())
	}
}

// 503 with Retry-After twice, then an answer: the read succeeds, and each
// retry came no earlier than the server asked.
func TestRetryHonoursRetryAfter(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){
		problem(503, "1", "database is locked; retry in 1s"),
		problem(503, "1", "database is locked; retry in 1s"),
		okDeployment,
	}}
	c := api.NewClient(start(t, rc), "", nil)
	d, err := c.Deployment(context.Background(), "dpl_1")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "dpl_1" || rc.count() != 3 {
		t.Fatalf("got %+v after %d requests, want dpl_1 after 3", d, rc.count())
	}
	for i := 1; i < 3; i++ {
		if gap := rc.times[i].Sub(rc.times[i-1]); gap < time.Second {
			t.Errorf("retry %d came %s after the 503, before its Retry-After of 1s", i, gap)
		}
	}
}

// Retries are bounded: Options.Retries more attempts, then the error.
func TestRetriesAreBounded(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(503, "0", "busy")}}
	c := api.NewClientWith(start(t, rc), "", nil, api.Options{Retries: 3})
	_, err := c.Deployment(context.Background(), "dpl_1")
	var se *api.ServerError
	if !errors.As(err, &se) || se.Status != 503 {
		t.Fatalf("err = %v, want the 503", err)
	}
	if rc.count() != 4 {
		t.Errorf("%d requests, want 4 (1 + 3 retries)", rc.count())
	}
}

// A Retry-After longer than MaxRetryWait is not waited for.
func TestLongRetryAfterIsNotWaited(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(503, "120", "disk full; retry in 120s")}}
	c := api.NewClient(start(t, rc), "", nil)
	_, err := c.Deployment(context.Background(), "dpl_1")
	var se *api.ServerError
	if !errors.As(err, &se) || se.RetryAfter != 120*time.Second {
		t.Fatalf("err = %#v, want a ServerError with RetryAfter 2m", err)
	}
	if rc.count() != 1 {
		t.Errorf("%d requests, want 1", rc.count())
	}
	if !strings.Contains(err.Error(), "retry after 2m0s") {
		t.Errorf("message %q does not say when to retry", err)
	}
}

// 429 is retried for reads; the final answer keeps its 4xx code.
func TestTooManyRequestsRetried(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(429, "0", "slow down"), okDeployment}}
	c := api.NewClient(start(t, rc), "", nil)
	if _, err := c.Deployment(context.Background(), "dpl_1"); err != nil {
		t.Fatal(err)
	}
	if rc.count() != 2 {
		t.Errorf("%d requests, want 2", rc.count())
	}
}

// A request that is not idempotent (approve, a submission without a key)
// is never sent twice after an answer; nor is a cancel after an answer
// that may come after it acted (a 502/504, a 503 without Retry-After: a
// proxy's).
func TestNonIdempotentNotRetried(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(503, "0", "busy"), okDeployment}}
	c := api.NewClient(start(t, rc), "", nil)
	if _, err := c.Submit(context.Background(), []byte("x: 1"), false); !api.IsServerError(err) && err != nil {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.Approve(context.Background(), "dpl_1", "", ""); err != nil {
		t.Fatalf("err = %v", err)
	}
	if rc.count() != 2 {
		t.Errorf("%d requests, want 2 (each sent once)", rc.count())
	}
	for _, a := range []func(http.ResponseWriter, *http.Request){problem(502, "1", "bad gateway"), problem(504, "1", "gateway timeout"), problem(503, "", "no upstream")} {
		rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){a, okDeployment}}
		c := api.NewClient(start(t, rc), "", nil)
		_, err := c.Cancel(context.Background(), "dpl_1")
		if !api.IsServerError(err) {
			t.Fatalf("err = %v, want the error answer", err)
		}
		if rc.count() != 1 {
			t.Errorf("cancel sent %d times after %v, want once", rc.count(), err)
		}
	}
}

// A cancel the server refused without acting, saying when to come back (a
// 429 of limits.refusals_per_minute, a 503 of a busy database), is sent
// again after its Retry-After, as a read would be: 'manent cancel' quoted
// the Retry-After and gave up.
func TestCancelRefusedWithRetryAfterIsSentAgain(t *testing.T) {
	for _, status := range []int{429, 503} {
		rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(status, "1", "busy; retry in 1s"), okDeployment}}
		c := api.NewClient(start(t, rc), "", nil)
		d, err := c.Cancel(context.Background(), "dpl_1")
		if err != nil || d.ID != "dpl_1" {
			t.Fatalf("%d then 202: got %+v, %v; want the deploy", status, d, err)
		}
		if rc.count() != 2 {
			t.Fatalf("%d then 202: %d requests, want 2", status, rc.count())
		}
		if gap := rc.times[1].Sub(rc.times[0]); gap < time.Second {
			t.Errorf("%d: the cancel came again %s after, before its Retry-After of 1s", status, gap)
		}
	}
	// Longer than MaxRetryWait: not waited; the error says when.
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(429, "45", "refused more than 60 times in a minute; retry in 45s")}}
	c := api.NewClient(start(t, rc), "", nil)
	if _, err := c.Cancel(context.Background(), "dpl_1"); err == nil || !strings.Contains(err.Error(), "retry in 45s") || rc.count() != 1 {
		t.Fatalf("a 45 s Retry-After: %v after %d requests, want the 429 at once", err, rc.count())
	}
}

// A verdict refused by limits.refusals_per_minute (429) or a busy
// database (503), both with Retry-After, was refused before anything was
// recorded: approve, reject and their wave forms are sent again, with the
// same body, after the wait — as cancel is. The server counts an
// identity's verdict once (ErrAlreadyDecided), so even a verdict that was
// recorded before a 503 cannot count twice.
func TestVerdictRefusedWithRetryAfterIsSentAgain(t *testing.T) {
	verdicts := []struct {
		name string
		send func(*api.Client) (*manent.Deployment, error)
	}{
		{"approve", func(c *api.Client) (*manent.Deployment, error) {
			return c.Approve(context.Background(), "dpl_1", "lgtm", "sha256:abc")
		}},
		{"reject", func(c *api.Client) (*manent.Deployment, error) {
			return c.Reject(context.Background(), "dpl_1", "no")
		}},
		{"approve wave", func(c *api.Client) (*manent.Deployment, error) {
			return c.ApproveWave(context.Background(), "dpl_1", "eu", "lgtm")
		}},
		{"reject wave", func(c *api.Client) (*manent.Deployment, error) {
			return c.RejectWave(context.Background(), "dpl_1", "eu", "no")
		}},
	}
	for i, v := range verdicts {
		status := []int{429, 503}[i%2]
		var bodies []string
		var mu sync.Mutex
		keep := func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
		}
		rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){
			func(w http.ResponseWriter, r *http.Request) {
				keep(w, r)
				problem(status, "1", "refused; retry in 1s")(w, r)
			},
			func(w http.ResponseWriter, r *http.Request) { keep(w, r); okDeployment(w, r) },
		}}
		c := api.NewClient(start(t, rc), "", nil)
		d, err := v.send(c)
		if err != nil || d.ID != "dpl_1" {
			t.Fatalf("%s: %d then 200: got %+v, %v; want the deploy", v.name, status, d, err)
		}
		if rc.count() != 2 {
			t.Fatalf("%s: %d then 200: %d requests, want 2", v.name, status, rc.count())
		}
		if gap := rc.times[1].Sub(rc.times[0]); gap < time.Second {
			t.Errorf("%s: sent again %s after, before its Retry-After of 1s", v.name, gap)
		}
		if bodies[0] == "" || bodies[0] != bodies[1] {
			t.Errorf("%s: bodies %q, want the same verdict twice", v.name, bodies)
		}
	}
	// A 503 without Retry-After (a proxy's: the server may have acted) and
	// a dropped answer are not sent again.
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(503, "", "bad gateway")}}
	c := api.NewClient(start(t, rc), "", nil)
	if _, err := c.Approve(context.Background(), "dpl_1", "", ""); err == nil || rc.count() != 1 {
		t.Fatalf("a 503 without Retry-After: %v after %d requests, want the error at once", err, rc.count())
	}
}

func descriptor(t *testing.T) []byte {
	t.Helper()
	art := filepath.Join(t.TempDir(), "app.txt")
	if err := os.WriteFile(art, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: 1.0.0\nartifact: {url: \"file://%s\"}\n", art))
}

// SubmitIdempotent through 503s and a connection lost after the commit:
// the retries carry the same key, the answer is the first deploy, and the
// server holds exactly one deploy.
func TestSubmitIdempotentSurvivesBusyAndDroppedAnswer(t *testing.T) {
	srv := servertest.Start(t)
	proxy := &servertest.SubmitFaults{Target: srv.URL, Busy: 2, Drops: 1}
	c := api.NewClient(start(t, proxy), srv.Token, nil)
	res, replayed, err := c.SubmitIdempotent(context.Background(), descriptor(t), "test-key-1")
	if err != nil {
		t.Fatal(err)
	}
	if !replayed {
		t.Errorf("the answer after the dropped connection is not marked Idempotent-Replayed")
	}
	keys := strings.Join(proxy.Keys(), ",")
	if keys != "test-key-1,test-key-1,test-key-1,test-key-1" {
		t.Errorf("keys sent: %s, want test-key-1 four times (2 busy, 1 dropped, 1 answered)", keys)
	}
	list, err := srv.Client().List(context.Background(), api.ListOptions{Application: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].ID != res.ID {
		var ids []string
		for _, d := range list.Items {
			ids = append(ids, d.ID)
		}
		t.Fatalf("server holds deploys %v, want exactly %s", ids, res.ID)
	}
	// The same key with another body is refused, not a second deploy.
	_, _, err = c.SubmitIdempotent(context.Background(), append(descriptor(t), "# changed\n"...), "test-key-1")
	if manent.ErrorCode(err) != manent.EInvalid {
		t.Errorf("same key, other body: err = %v, want 422", err)
	}
}

// nginxNotFound is what an nginx in front of nothing (or of another
// service) answers: an HTML page, not a problem+json document.
const nginxNotFound = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n" +
	"<hr><center>nginx/1.25.3</center>\r\n" + "<!-- a padding to prevent the browser's own error page -->\r\n" +
	"<!-- a padding to prevent the browser's own error page -->\r\n<!-- a padding to prevent the browser's own error page -->\r\n</body>\r\n</html>\r\n"

// An error answer that is not the API's (an HTML page from a proxy or
// another service) says so in one short line: the status, the method and
// URL, the Content-Type, and at most 200 characters of the body, on one
// line; the code (and so the CLI's exit code) is the status's as before.
func TestNotAPIErrorAnswerIsShort(t *testing.T) {
	for _, tt := range []struct {
		status int
		check  func(error) bool
	}{
		{404, func(err error) bool { return manent.ErrorCode(err) == manent.ENotFound && !api.IsServerError(err) }},
		{502, api.IsServerError},
	} {
		rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(tt.status)
			fmt.Fprint(w, nginxNotFound)
		}}}
		url := start(t, rc)
		c := api.NewClientWith(url, "", nil, api.Options{Retries: -1})
		_, err := c.Deployment(context.Background(), "dpl_1")
		if !tt.check(err) {
			t.Errorf("%d: err = %T %v, want the same kind as before", tt.status, err, err)
			continue
		}
		var na *api.NotAPIAnswerError
		if !errors.As(err, &na) || na.Status != tt.status || na.ContentType != "text/html" {
			t.Errorf("%d: err = %#v, want a *api.NotAPIAnswerError", tt.status, err)
		}
		msg := err.Error()
		for _, want := range []string{
			fmt.Sprintf("%d %s", tt.status, http.StatusText(tt.status)),
			"GET " + url + "/api/v1/deployments/dpl_1",
			"not a manent API answer",
			"text/html",
			"application/problem+json",
			"<html> <head><title>404 Not Found</title></head>",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%d: message %q lacks %q", tt.status, msg, want)
			}
		}
		if strings.ContainsAny(msg, "\r\n") {
			t.Errorf("%d: message spans several lines: %q", tt.status, msg)
		}
		if n := utf8.RuneCountInString(na.Excerpt); n > 201 || strings.Contains(msg, "</html>") {
			t.Errorf("%d: message holds more than 200 characters of the body: %q", tt.status, msg)
		}
		if !strings.HasSuffix(na.Excerpt, "…") {
			t.Errorf("%d: excerpt %q does not say it was cut", tt.status, na.Excerpt)
		}
	}
}

// A problem+json answer keeps its detail; a short empty answer says it was empty.
func TestNotAPIErrorAnswerEmptyBody(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter, *http.Request){func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	}}}
	c := api.NewClient(start(t, rc), "", nil)
	_, err := c.Deployment(context.Background(), "dpl_1")
	var na *api.NotAPIAnswerError
	if !errors.As(err, &na) || manent.ErrorCode(err) != manent.ENotFound {
		t.Fatalf("err = %T %v, want a 404 *api.NotAPIAnswerError", err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "no Content-Type") || !strings.Contains(msg, "empty body") {
		t.Errorf("message %q", msg)
	}
	rc = &recorder{answers: []func(http.ResponseWriter, *http.Request){problem(404, "", "deploy dpl_1 not found")}}
	c = api.NewClient(start(t, rc), "", nil)
	_, err = c.Deployment(context.Background(), "dpl_1")
	if errors.As(err, &na) || manent.ErrorCode(err) != manent.ENotFound || err.Error() != "deploy dpl_1 not found" {
		t.Errorf("problem+json: err = %T %q, want the problem's detail as before", err, err)
	}
}

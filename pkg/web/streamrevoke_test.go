package web_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/web"
)

// liveStream is an event stream of the UI a browser holds open with a
// session cookie; its lines are read in the background.
type liveStream struct {
	what  string
	lines chan string // closed when the stream ends
	err   error       // why it ended; read after lines is closed
	seen  []string    // lines taken from lines
}

// openLive GETs path on base with only the session cookie and checks the
// stream opened.
func openLive(t *testing.T, what, base, cookie, path string) *liveStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(&http.Cookie{Name: "manent_session", Value: cookie})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("%s: GET %s: %d %s", what, path, resp.StatusCode, b)
	}
	s := &liveStream{what: what, lines: make(chan string, 4096)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if line != "" && err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				s.err = err
				close(s.lines)
				return
			}
			s.lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	s.waitLine(t, func(l string) bool { return l == "retry: 1000" })
	return s
}

// waitLine reads until a line satisfies ok, failing if the stream ends or
// 30 s pass first.
func (s *liveStream) waitLine(t *testing.T, ok func(string) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, open := <-s.lines:
			if !open {
				t.Fatalf("%s: ended (%v) before the line expected; read %q", s.what, s.err, s.seen)
			}
			s.seen = append(s.seen, l)
			if ok(l) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no such line within 30 s; read %q", s.what, s.seen)
		}
	}
}

// waitEnd waits (30 s at most) for the server to end the stream and checks
// it ended cleanly after a last comment saying why.
func (s *liveStream) waitEnd(t *testing.T, why string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, open := <-s.lines:
			if open {
				s.seen = append(s.seen, l)
				continue
			}
			if !errors.Is(s.err, io.EOF) {
				t.Errorf("%s: ended with %v, want a clean end (EOF)", s.what, s.err)
			}
			var last string
			for i := len(s.seen) - 1; i >= 0; i-- {
				if strings.HasPrefix(s.seen[i], ":") {
					last = s.seen[i]
					break
				}
			}
			if last != ": stream ended: "+why {
				t.Errorf("%s: last comment %q, want %q", s.what, last, ": stream ended: "+why)
			}
			return
		case <-deadline:
			t.Fatalf("%s: still open 30 s after its session ended", s.what)
		}
	}
}

// open reports whether the stream is still open, reading what has come.
func (s *liveStream) open() bool {
	for {
		select {
		case l, open := <-s.lines:
			if !open {
				return false
			}
			s.seen = append(s.seen, l)
		default:
			return true
		}
	}
}

// rechecked waits until the open streams' sessions were checked n more
// times.
func rechecked(t *testing.T, n int64) {
	t.Helper()
	from := web.SessionRechecks()
	enginetest.Eventually(t, 30*time.Second, func() bool { return web.SessionRechecks() >= from+n },
		"%d more re-checks of the open streams' sessions", n)
}

// secondWorker starts another worker of s's PostgreSQL database behind the
// same address (sharing the session key).
func secondWorker(t *testing.T, s *uiServer, db string) *uiServer {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(s.DataDir, node.WebKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return startUI(t, func(c *node.Config) {
		c.Database, c.ExecutorID = db, "webtest-2"
		if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.DataDir, node.WebKeyFile), key, 0o600); err != nil {
			t.Fatal(err)
		}
	})
}

// A stream opened before sign-out does not outlive it: the activity
// stream and a deploy's stream opened with a copy of the cookie end within
// the re-check interval once the session is signed out — on PostgreSQL on
// another worker than the one that signed out — while the same user's other
// session keeps streaming.
func TestSignOutEndsOpenStreams(t *testing.T) {
	web.SetSessionRecheck(t, 100*time.Millisecond)
	enginetest.Databases(t, func(t *testing.T, db string) {
		s := startUI(t, func(c *node.Config) { c.Database = db })
		streams := s // the worker holding the streams
		if strings.HasPrefix(db, "postgres") {
			streams = secondWorker(t, s, db)
		}
		gate := s.gate(t, "gate")
		t.Cleanup(func() { open(t, gate) })
		id := s.submit(t, "alice-token", gatedDeploy(t, "staging", "1.0.0", gate))

		a := newBrowser(t, s.URL)
		a.login("alice-token")
		tokA := csrf(t, a.get("/"))
		copied := a.sessionCookie(s.URL)
		other := newBrowser(t, s.URL)
		other.login("alice-token")
		otherCookie := other.sessionCookie(s.URL)

		activity := openLive(t, "the copy's activity stream", streams.URL, copied, "/events")
		deploy := openLive(t, "the copy's deploy stream", streams.URL, copied, "/deployments/"+id+"/events")
		kept := openLive(t, "the other session's stream", streams.URL, otherCookie, "/events")
		// Open streams of a valid session survive their re-checks.
		rechecked(t, 6)
		if !activity.open() || !deploy.open() || !kept.open() {
			t.Fatal("a stream of a valid session ended")
		}

		if p := a.do("POST", "/logout", url.Values{"csrf": {tokA}}); p.Status != http.StatusSeeOther {
			t.Fatalf("sign out: %d", p.Status)
		}
		activity.waitEnd(t, "the session was signed out")
		deploy.waitEnd(t, "the session was signed out")
		if p := replay(t, streams.URL, copied, "GET", "/events", nil); p.Status != http.StatusUnauthorized {
			t.Errorf("the copy reconnecting: %d, want 401", p.Status)
		}

		// Alice's other session is checked again and again, and streams on.
		rechecked(t, 3)
		id2 := s.submit(t, "alice-token", gatedDeploy(t, "qa", "2.0.0", gate))
		kept.waitLine(t, func(l string) bool { return strings.HasPrefix(l, "id: "+id2+":") })
	})
}

// A stream does not outlive its session's expiry, and a session that is
// still valid streams on beside it.
func TestExpiredSessionEndsItsStream(t *testing.T) {
	web.SetSessionRecheck(t, 100*time.Millisecond)
	s := startUI(t)
	secret, err := web.LoadSecret(filepath.Join(s.DataDir, node.WebKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	// What sign-in seals, with an expiry a few seconds away.
	session := func(expires time.Time) string {
		id := make([]byte, 16)
		if _, err := rand.Read(id); err != nil {
			t.Fatal(err)
		}
		c, err := web.SealSession(secret, map[string]any{"i": base64.RawURLEncoding.EncodeToString(id), "c": "alice-token",
			"m": "token", "x": "csrf-of-the-session", "e": expires.Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	short := openLive(t, "the stream of a session about to expire", s.URL, session(time.Now().Add(4*time.Second)), "/events")
	long := openLive(t, "the stream of a valid session", s.URL, session(time.Now().Add(time.Hour)), "/events")
	short.waitEnd(t, "the session expired")
	rechecked(t, 3)
	if !long.open() {
		t.Fatalf("the valid session's stream ended: %v", long.err)
	}
}

// When an open stream's session cannot be checked (here: the revocation
// table is gone), the stream ends — fail closed — and the reconnect is
// answered 503 like any request whose session cannot be checked.
func TestStreamSessionCheckFailsClosed(t *testing.T) {
	web.SetSessionRecheck(t, 100*time.Millisecond)
	s := startUI(t)
	b := newBrowser(t, s.URL)
	b.login("alice-token")
	live := openLive(t, "the stream", s.URL, b.sessionCookie(s.URL), "/events")
	rechecked(t, 2)
	if !live.open() {
		t.Fatal("the stream ended before the check failed")
	}
	if _, err := s.Store.DB().ExecContext(context.Background(), `DROP TABLE manent_revoked_sessions`); err != nil {
		t.Fatal(err)
	}
	live.waitEnd(t, "the session could not be checked: the database did not answer")
	if p := b.get("/events"); p.Status != http.StatusServiceUnavailable {
		t.Errorf("reconnecting: %d, want 503", p.Status)
	}
}

// In a real browser: a user watching the activity page signs out in
// another tab; the watching tab's stream ends and the page says the
// session has ended instead of retrying for ever.
func TestBrowserStreamEndsAtSignOut(t *testing.T) {
	exe := findBrowser(t)
	web.SetSessionRecheck(t, 100*time.Millisecond)
	s := startUI(t)
	watch := newChrome(t, exe)
	signIn(t, watch, s.URL, "bob-token")
	waitJS(t, watch, "the activity page to follow its stream", `document.body.getAttribute('data-stream') === '/events'`)
	rechecked(t, 3) // the tab's stream is open and checked
	if hidden := value(t, watch, "the connection banner", chromedp.Evaluate[bool](`document.getElementById('conn').hidden`)); !hidden {
		t.Fatal("the banner shows before sign-out")
	}

	// Another tab of the same browser (the same cookie) signs out.
	other, cancel := chromedp.NewContext(watch)
	t.Cleanup(cancel)
	run(t, other, "sign out in another tab", chromedp.Navigate(s.URL+"/logout"),
		chromedp.WaitVisible(chromedp.CSS("section.narrow button")),
		chromedp.Click(chromedp.CSS("section.narrow button")),
		chromedp.WaitVisible(chromedp.ID("token")))

	waitJS(t, watch, "the watching tab to say the session has ended",
		`!document.getElementById('conn').hidden && document.getElementById('conn').textContent.includes('Your session has ended')`)
}

package web_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
)

// streamAnswers records when each request of the activity page's stream
// (GET /events) was answered, and with which status.
type streamAnswers struct {
	mu      sync.Mutex
	answers []streamAnswer
}

type streamAnswer struct {
	at     time.Time
	status int
}

type statusWriter struct {
	http.ResponseWriter
	rec *streamAnswers
	at  time.Time
}

func (w *statusWriter) WriteHeader(status int) {
	w.rec.mu.Lock()
	w.rec.answers = append(w.rec.answers, streamAnswer{at: w.at, status: status})
	w.rec.mu.Unlock()
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (a *streamAnswers) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events" {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&statusWriter{ResponseWriter: w, rec: a, at: time.Now()}, r)
	})
}

func (a *streamAnswers) refused() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ts []time.Time
	for _, x := range a.answers {
		if x.status == http.StatusTooManyRequests {
			ts = append(ts, x.at)
		}
	}
	return ts
}

// A page whose event stream is refused with a problem (here 429: the
// identity has limits.streams_per_identity streams open) says the
// problem's detail in its banner, not "Disconnected from the server", and
// opens its next stream after the problem's Retry-After (5 s), not every
// 2 s; once a stream is free it follows again.
func TestBrowserRefusedStreamSaysWhyAndWaits(t *testing.T) {
	exe := findBrowser(t)
	rec := &streamAnswers{}
	s := startUIWrapped(t, rec.wrap, func(c *node.Config) { c.Limits.StreamsPerIdentity = 1 })

	// Bob's one stream, held elsewhere (another tab, a script).
	hctx, release := context.WithCancel(context.Background())
	defer release()
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, s.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer bob-token")
	held, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()
	if held.StatusCode != http.StatusOK {
		t.Fatalf("bob's first stream: %d", held.StatusCode)
	}

	bob := newChrome(t, exe)
	signIn(t, bob, s.URL, "bob-token")
	waitJS(t, bob, "the banner says why the stream was refused",
		`(() => { const c = document.getElementById('conn'); return !c.hidden && c.textContent.includes('limits.streams_per_identity'); })()`)
	banner := value(t, bob, "banner", chromedp.Text(chromedp.ID("conn")))
	t.Logf("banner: %s", banner)

	enginetest.Eventually(t, 40*time.Second, func() bool { return len(rec.refused()) >= 5 }, "5 refused streams")
	ts := rec.refused()
	long := 0
	for i := 1; i < len(ts); i++ {
		gap := ts[i].Sub(ts[i-1])
		switch {
		case gap >= 4500*time.Millisecond:
			long++
		case gap > time.Second:
			t.Errorf("a stream %v after a refused one: the refusal's Retry-After is 5s (refused at %v)", gap.Round(time.Millisecond), ts)
		}
	}
	if long == 0 {
		t.Errorf("no wait of the refusal's Retry-After between refused streams: %v", ts)
	}

	// The held stream ends: the page follows again, the banner goes.
	release()
	held.Body.Close()
	defer func() {
		if !t.Failed() {
			return
		}
		rec.mu.Lock()
		for _, a := range rec.answers {
			t.Logf("answer %v %d", a.at.Format("15:04:05.000"), a.status)
		}
		rec.mu.Unlock()
	}()
	waitJS(t, bob, "the page follows again",
		`document.getElementById('conn').hidden`)
}

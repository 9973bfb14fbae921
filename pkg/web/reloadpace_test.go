package web_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// slowFragments answers every reload of a live region slow (a server
// busy rendering 10,000 deploys) and records when each began and ended.
type slowFragments struct {
	delay time.Duration
	mu    sync.Mutex
	spans [][2]time.Time
}

func (f *slowFragments) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Manent-Fragment") == "" {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		time.Sleep(f.delay) // the slow server, not a synchronisation
		next.ServeHTTP(w, r)
		f.mu.Lock()
		f.spans = append(f.spans, [2]time.Time{start, time.Now()})
		f.mu.Unlock()
	})
}

// While events keep coming, a page reloads its live region no sooner than
// the last reload took after it: with the 150 ms debounce alone, a tab
// on a busy activity page kept one slow reload in flight at all times,
// each costing the server a whole render.
func TestBrowserReloadsArePacedByTheirCost(t *testing.T) {
	exe := findBrowser(t)
	slow := &slowFragments{delay: 400 * time.Millisecond}
	s := startUIWrapped(t, slow.wrap)
	bob := newChrome(t, exe)
	signIn(t, bob, s.URL, "bob-token")
	// Signed in, the browser is on the activity page.
	run(t, bob, "the activity page", chromedp.WaitVisible(chromedp.ID("live")))
	g := s.gate(t, "g")
	open(t, g)
	var ids []string
	for i := range 6 {
		ids = append(ids, s.submit(t, "alice-token", gatedDeploy(t, "staging", fmt.Sprintf("5.%d", i), g)))
	}
	for _, id := range ids {
		s.waitState(t, id, manent.StateSuccess)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool {
		slow.mu.Lock()
		defer slow.mu.Unlock()
		return len(slow.spans) >= 2
	}, "two reloads of the activity page while the deploys run")
	waitJS(t, bob, "the activity page to show the deploys done", `document.getElementById('live').textContent.includes('Nothing is running')`)
	slow.mu.Lock()
	defer slow.mu.Unlock()
	for i := 1; i < len(slow.spans); i++ {
		if gap := slow.spans[i][0].Sub(slow.spans[i-1][1]); gap < 300*time.Millisecond {
			t.Errorf("reload %d began %s after reload %d ended (which took %s), want no sooner than what it took",
				i+1, gap.Round(time.Millisecond), i, slow.spans[i-1][1].Sub(slow.spans[i-1][0]).Round(time.Millisecond))
		}
	}
}

package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// A running deploy's live log keeps the last api.MaxLogPage lines in the
// page and says where the rest is: a step that writes without end grew
// the page without bound until the tab gave up.
func TestBrowserLiveLogIsBounded(t *testing.T) {
	exe := findBrowser(t)
	s := startUI(t)
	gate := s.gate(t, "g")
	t.Cleanup(func() { open(t, gate) })
	id := s.submit(t, "alice-token", gatedDeploy(t, "staging", "4.0", gate))
	s.waitState(t, id, manent.StatePending)

	bob := newChrome(t, exe)
	signIn(t, bob, s.URL, "bob-token")
	run(t, bob, "open the running deploy", chromedp.Navigate(s.URL+"/deployments/"+id))
	waitJS(t, bob, "the first log line", `document.getElementById('log').textContent.includes('preparing 4.0')`)
	n := api.MaxLogPage + 500
	lines := make([]store.LogEntry, n)
	for i := range lines {
		lines[i] = store.LogEntry{Time: time.Now(), Text: fmt.Sprintf("spew %d", i)}
	}
	if err := s.Store.AppendLog(t.Context(), id, "prepare", lines); err != nil {
		t.Fatal(err)
	}
	waitJS(t, bob, "the last line written", fmt.Sprintf(`document.getElementById('log').lastElementChild.textContent.endsWith('spew %d')`, n-1))
	got := value(t, bob, "count the lines", chromedp.Evaluate[int](`document.querySelectorAll('#log .line').length`))
	if got > api.MaxLogPage {
		t.Errorf("%d lines in the page, want at most %d", got, api.MaxLogPage)
	}
	note := value(t, bob, "the note", chromedp.Evaluate[string](`(function () { var e = document.getElementById('log-dropped'); return e && !e.hidden ? e.textContent : ''; }())`))
	if note == "" {
		t.Errorf("no visible note that older lines were left out")
	}
}

package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/manent"
)

// A step's error with a 2,000-character word (here the name of a command
// that is not there) wraps inside the page: with white-space: pre-wrap
// alone it ran off to the right, and the page scrolled sideways.
func TestBrowserLongStepErrorWraps(t *testing.T) {
	exe := findBrowser(t)
	s := startUI(t)
	art := filepath.Join(t.TempDir(), "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	word := strings.Repeat("x", 2000)
	id := s.submit(t, "alice-token", fmt.Appendf(nil, "apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"6.0\"\nartifact: {url: %q}\nsteps:\n  - {name: boom, before: deploy, plugin: script, max_retries: 0, with: {command: [%s]}}\n",
		"file://"+art, word))
	s.waitState(t, id, manent.StateError)

	ctx := newChrome(t, exe)
	signIn(t, ctx, s.URL, "bob-token")
	run(t, ctx, "the deploy's page", chromedp.Navigate(s.URL+"/deployments/"+id), chromedp.WaitVisible(chromedp.CSS(".step-error")))
	got := value(t, ctx, "widths", chromedp.Evaluate[string](`(() => {
		const e = document.querySelector('.step-error'), d = document.documentElement;
		return [e.textContent.includes('x'.repeat(2000)), e.scrollWidth <= e.clientWidth, d.scrollWidth <= d.clientWidth,
			e.scrollWidth, e.clientWidth, d.scrollWidth, d.clientWidth].join(' ');
	})()`))
	if !strings.HasPrefix(got, "true true true ") {
		wide := value(t, ctx, "wide", chromedp.Evaluate[string](`[...document.querySelectorAll('body *')].filter(e => e.scrollWidth > document.documentElement.clientWidth).map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + e.scrollWidth).join('\n')`))
		t.Logf("wider than the page:\n%s", wide)
		t.Fatalf("the step error (has the word, fits, the page fits; widths of the error and of the page) = %s", got)
	}
}

package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// bidiLine is a log line as a step may write it: a right-to-left override
// that shows "rejected" reversed as "approved"-like text, an isolate, and
// Hebrew and Arabic words, which are text.
const bidiLine = "verdict: \u202edetcejer\u202c \u2067x\u2069 \u200fשלום \u061cمرحبا"

// bidiShown is how the page shows it: every bidirectional control as the
// CLI prints it (\u202e), the letters as they are.
const bidiShown = `verdict: \u202edetcejer\u202c \u2067x\u2069 \u200fשלום \u061cمرحبا`

func hasBidiControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
	})
}

// A bidirectional-text control in a step's text (log line, step error)
// would make the page show it in another order than it is stored (Trojan
// Source): the page shows each one as an escape, as the CLI does, and
// keeps Hebrew and Arabic letters. The API keeps the bytes as written.
func TestDeployPageShowsBidiControls(t *testing.T) {
	s, id, pages := pagesWithLine(t, bidiLine)
	for i, p := range pages {
		hdr := pageHeaders[i]
		if hasBidiControl(p.Body) {
			t.Errorf("a bidirectional control reaches the page %v: %q", hdr, p.Body[strings.Index(p.Body, "verdict"):][:80])
		}
		if hdr == nil && !strings.Contains(p.Body, bidiShown) {
			t.Errorf("the line is not shown as %s:\n%s", bidiShown, p.Body)
		}
	}
	res, err := s.client("admin-token").Logs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if last := res.Lines[len(res.Lines)-1].Text; last != bidiLine {
		t.Errorf("the API's line is %q, want it as written", last)
	}
}

// The lines the stream appends follow the same rules (static/app.js):
// bidirectional controls and control characters as escapes, also inside
// a coloured run.
func TestBrowserLogShowsBidiControls(t *testing.T) {
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
	lines := []store.LogEntry{{Time: time.Now(), Text: bidiLine}, {Time: time.Now(), Text: controlLine},
		{Time: time.Now(), Text: "\x1b[31m\u202ered\x01\x1b[0m"}}
	if err := s.Store.AppendLog(t.Context(), id, "prepare", lines); err != nil {
		t.Fatal(err)
	}
	waitJS(t, bob, "the appended lines", `document.getElementById('log').textContent.includes('red')`)
	text := value(t, bob, "the log's text", chromedp.Evaluate[string](`document.getElementById('log').textContent`))
	if hasBidiControl(text) || hasControl(text) {
		t.Errorf("a bidirectional control or a control character reaches the appended lines: %q", text)
	}
	for _, want := range []string{bidiShown, controlShown, `\u202ered\x01`} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in the log: %q", want, text)
		}
	}
}

// controlLine is a log line with control characters a step may write: a
// bell, a backspace, a carriage return (a progress bar), DEL and a C1
// control. controlShown is how the CLI prints it (`manent logs`), and so
// how the page shows it: the characters as escapes, never as they are (a
// browser reads CR as a line break, and other controls are not text).
const (
	controlLine  = "progress\x07 10%\r100%\x08 done\x7f \u0085end"
	controlShown = `progress\x07 10%\x0d100%\x08 done\x7f \u0085end`
)

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f
	})
}

// A control character in a log line reached the page as it is: the CLI
// shows it as an escape (\x07, \x0d), the page showed a bell, a line break
// for CR, or nothing. The page and its reloads show the CLI's escapes.
func TestDeployPageShowsControlCharacters(t *testing.T) {
	_, _, pages := pagesWithLine(t, controlLine)
	for i, p := range pages {
		hdr := pageHeaders[i]
		if hasControl(p.Body) {
			i := max(strings.Index(p.Body, "progress"), 0)
			t.Errorf("a control character reaches the page %v: %q", hdr, p.Body[i:min(i+80, len(p.Body))])
		}
		if hdr == nil && !strings.Contains(p.Body, controlShown) {
			t.Errorf("the line is not shown as %s %v", controlShown, hdr)
		}
	}
}

// pageHeaders are the two ways the deploy page is asked for: whole, and
// the fragment its script reloads.
var pageHeaders = [][]string{nil, {"X-Manent-Fragment", "1"}}

// pagesWithLine runs a deploy to SUCCESS, appends line to its log, and
// returns the UI, the deploy's id and its page as a reader gets it, asked
// for as each of pageHeaders says.
func pagesWithLine(t *testing.T, line string) (*uiServer, string, []page) {
	t.Helper()
	s := startUI(t)
	g := s.gate(t, "g")
	open(t, g)
	id := s.submit(t, "alice-token", gatedDeploy(t, "staging", "1.0", g))
	s.waitState(t, id, manent.StateSuccess)
	if err := s.Store.AppendLog(t.Context(), id, "prepare", []store.LogEntry{{Time: time.Now(), Text: line}}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.URL)
	b.login("vera-token")
	var pages []page
	for _, hdr := range pageHeaders {
		p := b.do("GET", "/deployments/"+id, nil, hdr...)
		if p.Status != 200 {
			t.Fatalf("deploy page %v: %d", hdr, p.Status)
		}
		pages = append(pages, p)
	}
	return s, id, pages
}

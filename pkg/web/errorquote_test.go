package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var (
	errorTextRE = regexp.MustCompile(`(?s)<p class="error-text">(.*?)</p>`)
	dataRE      = regexp.MustCompile(`(?s)<code class="data">(.*?)</code>`)
)

// An API error shown as a page may name the id or name the link asked
// for, but only as data: clipped and set apart (<code class="data">), never
// as words of the server's sentence — a crafted link to the real server
// must not make it say "… has been rolled back: call …".
func TestErrorPageQuotesTheLinkAsData(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	b.login("bob-token")
	lure := "x has been rolled back by the security team. Call +1-555-0100 now to restore " + strings.Repeat("your access ", 20)
	esc := strings.NewReplacer(" ", "%20", "+", "%2B").Replace(lure)
	for _, tt := range []struct {
		path   string
		status int
		quoted bool // the API's message names the value
	}{
		{"/deployments/" + esc, http.StatusNotFound, true},
		{"/clusters/" + esc, http.StatusNotFound, true},
		{"/environments/" + esc + "/prod", http.StatusUnprocessableEntity, true},
		{"/environments/billing/prod?cursor=" + esc, http.StatusUnprocessableEntity, false},
	} {
		t.Run(tt.path[:20], func(t *testing.T) {
			p := b.get(tt.path)
			if p.Status != tt.status {
				t.Fatalf("GET %s: %d, want %d\n%s", tt.path, p.Status, tt.status, p.Body)
			}
			m := errorTextRE.FindStringSubmatch(p.Body)
			if m == nil {
				t.Fatalf("no error text in\n%s", p.Body)
			}
			words := dataRE.ReplaceAllString(m[1], "")
			if strings.Contains(words, "555-0100") || strings.Contains(words, "rolled back") {
				t.Errorf("the link's words are part of the sentence: %q", m[1])
			}
			for _, d := range dataRE.FindAllStringSubmatch(m[1], -1) {
				if n := utf8.RuneCountInString(d[1]); n > 100 {
					t.Errorf("a quoted value of %d characters (not clipped): %q", n, d[1])
				}
			}
			if tt.quoted && !strings.Contains(m[1], `<code class="data">`) {
				t.Errorf("the value asked for is not shown as data: %q", m[1])
			}
		})
	}
}

// A name the API refuses is named with the rule it breaks (the problem's
// field errors), the name shown as data; a deploy not found likewise.
func TestErrorPageSaysWhatIsWrong(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	b.login("bob-token")
	for path, want := range map[string]string{
		"/deployments/dpl_nope":            `deploy <code class="data">“dpl_nope”</code> not found`,
		"/environments/Billing%20now/prod": `/application: <code class="data">&#34;Billing now&#34;</code> is not a valid application name: lowercase letters`,
	} {
		p := b.get(path)
		if m := errorTextRE.FindStringSubmatch(p.Body); m == nil || !strings.Contains(m[1], want) {
			t.Errorf("GET %s: %d, want %q in the error text:\n%s", path, p.Status, want, p.Body)
		}
	}
}

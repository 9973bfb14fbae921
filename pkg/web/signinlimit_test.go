package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/web"
)

// clientHeader is the test's way to say from which address a request
// comes: the wrapper below makes it the request's RemoteAddr, as if the
// browser connected from there.
const clientHeader = "X-Test-Client"

func fromClient(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get(clientHeader); a != "" {
			r.RemoteAddr = a
			r.Header.Del(clientHeader)
		}
		h.ServeHTTP(w, r)
	})
}

// signIn posts the sign-in form with token from client address from.
func (b *browser) signIn(from, token string) page {
	b.t.Helper()
	form := b.do(http.MethodGet, "/login", nil, clientHeader, from)
	return b.do(http.MethodPost, "/login", url.Values{"csrf": {csrf(b.t, form)}, "token": {token}, "next": {"/"}}, clientHeader, from)
}

// The sign-in form checks a token per request: without a bound, anyone
// could try tokens as fast as the server answers — a short
// MANENT_BOOTSTRAP_TOKEN falls to that. Each address has
// limits.sign_ins_per_minute refused sign-ins a minute; past them its
// sign-ins are answered 429 with Retry-After, without checking the token
// (a right one too: else the answer would tell a guess that hit), until
// its budget is whole again. Other addresses sign in meanwhile; IPv6
// addresses of one /64 share a budget. The audit log gets the beginning
// of a stretch of 429s and its end, not a row per answer.
func TestSignInAttemptsAreBounded(t *testing.T) {
	s := startUIWrapped(t, fromClient, func(c *node.Config) { c.Limits.SignInsPerMinute = 3 })
	clock := time.Now()
	web.SetSignInClock(t, s.Node.Web, func() time.Time { return clock })

	const attacker = "203.0.113.7:40000"
	b := newBrowser(t, s.URL)
	for i := range 3 {
		if p := b.signIn(attacker, "guess-"+strconv.Itoa(i)); p.Status != http.StatusUnauthorized {
			t.Fatalf("refused sign-in %d: %d, want 401", i+1, p.Status)
		}
	}
	for _, token := range []string{"guess-3", "alice-token", "guess-4"} {
		p := b.signIn(attacker, token)
		if p.Status != http.StatusTooManyRequests {
			t.Fatalf("sign-in with %s past the budget: %d, want 429\n%s", token, p.Status, p.Body)
		}
		secs, err := strconv.Atoi(p.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 60 {
			t.Errorf("Retry-After %q, want 1..60 seconds", p.Header.Get("Retry-After"))
		}
		if !strings.Contains(p.Body, "limits.sign_ins_per_minute") || !strings.Contains(p.Body, "try again in") {
			t.Errorf("the 429 page does not say why and when:\n%s", p.Body)
		}
		if p.Header.Get("Content-Security-Policy") == "" {
			t.Error("the 429 page has no Content-Security-Policy")
		}
		for _, c := range p.Header.Values("Set-Cookie") {
			if strings.HasPrefix(c, "manent_session=") && !strings.HasPrefix(c, "manent_session=;") {
				t.Errorf("a session was started past the budget: %s", c)
			}
		}
	}

	// Another address is not affected.
	if p := newBrowser(t, s.URL).signIn("198.51.100.9:1", "alice-token"); p.Status != http.StatusSeeOther {
		t.Errorf("sign-in from another address: %d, want 303", p.Status)
	}
	// One /64 is one budget: IPv6 hands a client a whole prefix.
	v6 := newBrowser(t, s.URL)
	for i := range 3 {
		v6.signIn("[2001:db8:1:2::"+strconv.Itoa(i+1)+"]:1", "guess")
	}
	if p := v6.signIn("[2001:db8:1:2:ffff::9]:1", "alice-token"); p.Status != http.StatusTooManyRequests {
		t.Errorf("sign-in from the same /64: %d, want 429", p.Status)
	}
	if p := v6.signIn("[2001:db8:1:3::1]:1", "alice-token"); p.Status != http.StatusSeeOther {
		t.Errorf("sign-in from another /64: %d, want 303", p.Status)
	}

	// The stretch of the attacker's three 429s is one entry when it
	// begins; the refused sign-ins themselves are not entries.
	begun := s.auditOf(t, "web.sign-in")
	var refused []string
	for _, e := range begun {
		if e.Outcome == "refused" {
			refused = append(refused, e.Target+" "+e.Detail)
		}
	}
	if len(refused) != 2 || !strings.Contains(refused[0]+refused[1], "address:203.0.113.7") ||
		!strings.Contains(refused[0]+refused[1], "address:2001:db8:1:2::/64") {
		t.Errorf("refused web.sign-in entries: %q, want one per stretch (203.0.113.7 and 2001:db8:1:2::/64)", refused)
	}

	// A minute on, the budget is whole: the next sign-in is checked, and
	// the stretch's end is recorded with how many answers it held.
	clock = clock.Add(61 * time.Second)
	web.SetSignInClock(t, s.Node.Web, func() time.Time { return clock })
	if p := b.signIn(attacker, "alice-token"); p.Status != http.StatusSeeOther {
		t.Fatalf("sign-in a minute later: %d, want 303\n%s", p.Status, p.Body)
	}
	ended := s.auditOf(t, "limits.sign-ins")
	if len(ended) != 1 || ended[0].Target != "address:203.0.113.7" || !strings.Contains(ended[0].Detail, "3 sign-ins answered 429") {
		t.Errorf("limits.sign-ins entries: %+v, want one for 203.0.113.7 with 3 answers", ended)
	}
}

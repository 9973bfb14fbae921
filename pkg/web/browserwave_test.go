package web_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/manent"
)

// In a real browser: a reader sees why they cannot decide on a waiting
// wave; an approver approves it with the button and a comment longer than
// the 500 characters the box used to take (the API takes 4096 bytes), and
// the page shows the deploy going on to the end with the whole comment.
func TestBrowserWaveApproval(t *testing.T) {
	exe := findBrowser(t)
	s := startUI(t)
	gate := s.gate(t, "bwave-gate")
	open(t, gate)
	id := s.submit(t, "alice-token", waveDeploy(t, "staging", "4.0", gate))
	s.waitWave(t, id, "rest")

	bob := newChrome(t, exe)
	vera := newUser(t, bob)
	signIn(t, vera, s.URL, "vera-token")
	run(t, vera, "open the deploy as a reader", chromedp.Navigate(s.URL+"/deployments/"+id),
		chromedp.WaitVisible(chromedp.ID("wave-approval")))
	why := value(t, vera, "why", chromedp.Text(chromedp.ID("wave-may-not-approve")))
	if !strings.Contains(why, "deployment.approve") {
		t.Fatalf("the reader reads %q", why)
	}
	if n := value(t, vera, "count the buttons", chromedp.Evaluate[int](`document.querySelectorAll('#approve-wave, #reject-wave').length`)); n != 0 {
		t.Fatalf("a reader sees %d wave buttons", n)
	}

	signIn(t, bob, s.URL, "bob-token")
	run(t, bob, "open the deploy", chromedp.Navigate(s.URL+"/deployments/"+id),
		chromedp.WaitVisible(chromedp.ID("approve-wave")))
	screenshot(t, bob, "wave-approval")
	comment := strings.Repeat("all canary metrics are clean; ", 20) // 600 characters
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(bob, 20*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('wave-comment').value = ''; true`))
		if err == nil {
			err = chromedp.Do(ctx,
				chromedp.SendKeys(chromedp.ID("wave-comment"), comment),
				chromedp.Click(chromedp.ID("approve-wave")))
		}
		cancel()
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "Could not find node") || time.Now().After(deadline) {
			t.Fatalf("approve the wave: %v", err)
		}
	}
	waitJS(t, bob, "the deploy to end", `document.getElementById('state').textContent.trim() === 'success'`)
	s.waitState(t, id, manent.StateSuccess)
	d, err := s.client("admin-token").Deployment(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	w := d.Rollout[1]
	if len(w.Approvals) != 1 || w.Approvals[0].Identity != "token:bob" || w.Approvals[0].Comment != comment {
		t.Fatalf("wave rest's approvals: %+v; want bob's, with the whole comment (%d characters)", w.Approvals, len(comment))
	}
	waitJS(t, bob, "the wave's approval with its comment", `document.querySelector('.wave-approvals .comment') !== null && document.querySelector('.wave-approvals .comment').textContent.length === `+itoa(len(comment)))
}

func itoa(n int) string { return strconv.Itoa(n) }

// In a real browser: a log line's SGR colours show as colours, in the
// lines the page was rendered with and in those the stream appends; other
// escape sequences (a hyperlink, a screen clear) and the step's markup
// show as nothing and as text. The API keeps the bytes as written.
func TestBrowserLogColours(t *testing.T) {
	exe := findBrowser(t)
	s := startUI(t)
	gate := s.gate(t, "colour-gate")
	id := s.submit(t, "alice-token", waveDeploy(t, "staging", "5.0", gate))
	s.waitState(t, id, manent.StatePending)
	bob := newChrome(t, exe)
	signIn(t, bob, s.URL, "bob-token")
	run(t, bob, "open the deploy", chromedp.Navigate(s.URL+"/deployments/"+id), chromedp.WaitVisible(chromedp.ID("log")))
	waitJS(t, bob, "the rendered line in bold red", `(function () {
		var r = document.querySelector('#log .ansi-bold.ansi-fg-1');
		return !!r && r.textContent === 'red 5.0' && getComputedStyle(r).fontWeight === '700';
	}())`)
	open(t, gate)
	waitJS(t, bob, "the appended line in green", `(function () {
		var g = document.querySelector('#log .ansi-fg-2');
		return !!g && g.textContent === 'green 5.0';
	}())`)
	text := value(t, bob, "the log's text", chromedp.Evaluate[string](`document.getElementById('log').textContent`))
	if strings.ContainsRune(text, 0x1b) || strings.Contains(text, "[0m") || strings.Contains(text, "evil.example") {
		t.Errorf("escape sequences show in the log: %q", text)
	}
	if !strings.Contains(text, "plain <b>x</b>") || !strings.Contains(text, " link end") {
		t.Errorf("the lines' text is not all there: %q", text)
	}
	if n := value(t, bob, "elements of the step", chromedp.Evaluate[int](`document.querySelectorAll('#log b, #log a').length`)); n != 0 {
		t.Errorf("the step's markup made %d elements", n)
	}
	res, err := s.client("admin-token").Logs(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	raw := false
	for _, l := range res.Lines {
		raw = raw || strings.Contains(l.Text, "\x1b[1;31mred 5.0\x1b[0m")
	}
	if !raw {
		t.Errorf("the API's lines are not as written: %+v", res.Lines)
	}
}

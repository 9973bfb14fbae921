package web_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "save screenshots of the main pages under testdata/ui/")

// findBrowser returns the path of a Chromium-like browser. Without one the
// test is skipped, unless MANENT_TEST_REQUIRE_BROWSER=1 (CI) makes it fail.
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no browser found (chromium, chromium-browser, google-chrome): install Debian's chromium to run the browser tests"
	if os.Getenv("MANENT_TEST_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + " (MANENT_TEST_REQUIRE_BROWSER=1)")
	}
	t.Skip(msg)
	return ""
}

// newChrome starts a headless browser with its own profile and returns
// its context.
func newChrome(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	// Chromium sometimes crashes while it starts on a loaded machine (not
	// the UI's doing): one more try.
	var err error
	for try := 1; try <= 2; try++ {
		actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelC := chromedp.NewContext(actx)
		if err = chromedp.Do(ctx); err == nil { // starts the browser
			t.Cleanup(func() { cancelC(); cancelA() })
			return ctx
		}
		cancelC()
		cancelA()
		t.Logf("start %s (try %d): %v", exe, try, err)
	}
	t.Fatalf("start %s: %v", exe, err)
	return nil
}

// newUser returns a tab of the browser in a browser context of its own
// (its own cookies): another person at another computer.
func newUser(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("new browser context: %v", err)
	}
	return ctx
}

// run runs actions with a deadline.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one action with a deadline and returns its value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// signIn signs the browser in with token through the sign-in form.
func signIn(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS(".identity")),
	)
	who := value(t, ctx, "who", chromedp.Text(chromedp.CSS(".identity")))
	if !strings.HasPrefix(who, "token:") {
		t.Fatalf("signed in as %q", who)
	}
}

// waitJS waits until the JavaScript expression cond is true.
func waitJS(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		// A poll ends with an error when the page navigates (a form's
		// redirect): poll again on the new page.
		pctx, cancel := context.WithDeadline(ctx, deadline)
		_, err = chromedp.Run(pctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		if err == nil {
			return
		}
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	t.Fatalf("condition not met after 30s: %s: %v\npage:\n%s", what, err, body)
}

// screenshot saves the page in the light and the dark colour scheme as
// testdata/ui/<name>.png and <name>-dark.png (with -update-screenshots).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !*updateScreenshots {
		return
	}
	if err := os.MkdirAll(filepath.Join("testdata", "ui"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"light", "dark"} {
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
			t.Fatalf("colour scheme %s: %v", scheme, err)
		}
		png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
		file := name + ".png"
		if scheme == "dark" {
			file = name + "-dark.png"
		}
		if err := os.WriteFile(filepath.Join("testdata", "ui", file), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		t.Fatal(err)
	}
}

// In a real browser: sign in with a token, watch a running deploy's log
// line, step and state change arrive without a reload, approve a waiting
// deploy with the button and see it move on; a reader sees no buttons.
func TestBrowser(t *testing.T) {
	exe := findBrowser(t)
	s := startUI(t)

	// A running deploy, held in its first step.
	gate := s.gate(t, "browser-gate")
	running := s.submit(t, "alice-token", gatedDeploy(t, "staging", "2.0", gate))
	s.waitState(t, running, manent.StatePending)
	// A deploy waiting for an approval.
	gate2 := s.gate(t, "browser-gate2")
	open(t, gate2)
	waiting := s.submit(t, "alice-token", gatedDeploy(t, "prod", "2.0", gate2))
	s.waitState(t, waiting, manent.StateAwaitingApproval)

	bob := newChrome(t, exe)
	signIn(t, bob, s.URL, "bob-token")
	waitJS(t, bob, "the activity page to list both deploys",
		`document.querySelectorAll('a[href="/deployments/`+running+`"], a[href="/deployments/`+waiting+`"]').length === 2`)
	// Why each waits, in the words of `manent activity`.
	waitJS(t, bob, "the activity page to say why", `document.getElementById('live').textContent.includes('running step prepare') && document.getElementById('live').textContent.includes('approvals 0/1 by group:sre')`)
	screenshot(t, bob, "activity")

	// The running deploy: the page follows the stream. A marker on window
	// proves the page is never reloaded.
	run(t, bob, "open the running deploy", chromedp.Navigate(s.URL+"/deployments/"+running))
	waitJS(t, bob, "the first log line", `document.getElementById('log').textContent.includes('preparing 2.0')`)
	before := value(t, bob, "mark the page",
		chromedp.Evaluate[int](`window.manentMarker = 'same page'; document.querySelectorAll('#steps li').length`))
	// Held in its first step, the deploy sends no event: the running
	// step's duration and the relative times tick in the page anyway,
	// without the live region being rendered again (the mark on #state
	// stays).
	const durSecs = `(function () {
		var t = document.querySelector('#steps li[data-step="prepare"] .dur').textContent.trim(), m;
		if ((m = /^(\d+)ms$/.exec(t))) { return m[1] / 1000; }
		if ((m = /^([\d.]+)s$/.exec(t))) { return parseFloat(m[1]); }
		if ((m = /^(\d+)m(\d+)s$/.exec(t))) { return m[1] * 60 + parseInt(m[2], 10); }
		return -1;
	}())`
	first := value(t, bob, "the running step's duration", chromedp.Evaluate[float64](`document.getElementById('state').manentMark = true; `+durSecs))
	if first < 0 {
		t.Fatalf("the running step's duration does not read as a duration: %q",
			value(t, bob, "read it", chromedp.Text(chromedp.CSS(`#steps li[data-step="prepare"] .dur`))))
	}
	waitJS(t, bob, "the running step's duration to go on", fmt.Sprintf(`%s >= %f && document.getElementById('state').manentMark === true`, durSecs, first+2))
	waitJS(t, bob, "the submission's relative time to leave 'just now'",
		`/^\d+s ago$/.test(document.querySelector('.facts time[data-rel]').textContent.trim()) && document.getElementById('state').manentMark === true`)
	open(t, gate)
	waitJS(t, bob, "the new log line without a reload", `document.getElementById('log').textContent.includes('gate opened for 2.0')`)
	waitJS(t, bob, "the step to succeed without a reload", `!!document.querySelector('#steps li[data-step="prepare"].state-success')`)
	waitJS(t, bob, "the state to become success without a reload", `document.getElementById('state').textContent.trim() === 'success'`)
	marker := value(t, bob, "read the marker", chromedp.Evaluate[string](`window.manentMarker || ''`))
	after := value(t, bob, "count the steps", chromedp.Evaluate[int](`document.querySelectorAll('#steps li').length`))
	if marker != "same page" {
		t.Fatal("the page was reloaded")
	}
	if after < before || after < 2 {
		t.Fatalf("steps: %d before, %d after", before, after)
	}
	screenshot(t, bob, "deploy")

	// The waiting deploy: bob approves with the button.
	run(t, bob, "open the waiting deploy", chromedp.Navigate(s.URL+"/deployments/"+waiting),
		chromedp.WaitVisible(chromedp.ID("approve")))
	screenshot(t, bob, "approval")
	// The live region is re-rendered whenever the deploy's stream brings an
	// event, which can replace the form between finding the button and
	// clicking it ("Could not find node"); a person clicks again, and so
	// does the test, until its deadline.
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(bob, 10*time.Second)
		// The comment is a textarea: chromedp.Clear refuses an empty one.
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('comment').value = ''; true`))
		if err == nil {
			err = chromedp.Do(ctx,
				chromedp.SendKeys(chromedp.ID("comment"), "looks good"),
				chromedp.Click(chromedp.ID("approve")))
		}
		cancel()
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "Could not find node") || time.Now().After(deadline) {
			t.Fatalf("approve: %v", err)
		}
	}
	waitJS(t, bob, "the approval to be listed", `document.querySelector('.approvals') !== null && document.querySelector('.approvals').textContent.includes('token:bob')`)
	waitJS(t, bob, "the deploy to move on and finish", `document.getElementById('state').textContent.trim() === 'success'`)
	s.waitState(t, waiting, manent.StateSuccess)

	// Other pages render for the keyboard user too: a heading each.
	for _, path := range []string{"/environments", "/schedules", "/audit", "/clusters"} {
		run(t, bob, "open "+path, chromedp.Navigate(s.URL+path))
		h1 := value(t, bob, "heading", chromedp.Text(chromedp.CSS("h1")))
		title := value(t, bob, "title", chromedp.Title())
		if h1 == "" || !strings.HasSuffix(title, "· manent") {
			t.Errorf("%s: heading %q, title %q", path, h1, title)
		}
		if path == "/environments" {
			screenshot(t, bob, "environments")
		}
	}

	// Bob cancels a running deploy with the button; it stops before its
	// next step.
	gate4 := s.gate(t, "browser-gate4")
	fourth := s.submit(t, "alice-token", gatedDeploy(t, "staging", "2.2", gate4))
	s.waitState(t, fourth, manent.StatePending)
	run(t, bob, "cancel", chromedp.Navigate(s.URL+"/deployments/"+fourth),
		chromedp.WaitVisible(chromedp.ID("cancel")), chromedp.Click(chromedp.ID("cancel")))
	enginetest.Eventually(t, 30*time.Second, func() bool {
		r, err := s.Store.Deployment(context.Background(), fourth)
		return err == nil && r.CancelRequested
	}, "the cancel request of %s to be recorded", fourth)
	open(t, gate4)
	waitJS(t, bob, "the deploy to end cancelled", `document.getElementById('state').textContent.trim() === 'cancelled'`)
	s.waitState(t, fourth, manent.StateCancelled)

	// A reader sees no button.
	gate3 := s.gate(t, "browser-gate3")
	third := s.submit(t, "alice-token", gatedDeploy(t, "prod", "2.1", gate3))
	s.waitState(t, third, manent.StateAwaitingApproval)
	vera := newUser(t, bob)
	signIn(t, vera, s.URL, "vera-token")
	run(t, vera, "open the waiting deploy as a reader", chromedp.Navigate(s.URL+"/deployments/"+third),
		chromedp.WaitVisible(chromedp.ID("state")))
	buttons := value(t, vera, "count the buttons", chromedp.Evaluate[int](`document.querySelectorAll('#approve, #reject, #cancel').length`))
	if buttons != 0 {
		t.Fatalf("a reader sees %d buttons", buttons)
	}

	// The server restarts while bob watches the waiting deploy: the page
	// reconnects by itself and shows what happens after, without a reload.
	run(t, bob, "open the third deploy", chromedp.Navigate(s.URL+"/deployments/"+third),
		chromedp.WaitVisible(chromedp.ID("approve")))
	value(t, bob, "mark the page", chromedp.Evaluate[string](`window.manentMarker = 'before restart'`))
	s.restart(t)
	open(t, gate3)
	d3, err := s.client("bob-token").Deployment(context.Background(), third)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client("bob-token").Approve(context.Background(), third, "after restart", d3.PlanDigest); err != nil {
		t.Fatalf("approve after the restart: %v", err)
	}
	waitJS(t, bob, "the state after the restart to show without a reload", `document.getElementById('state').textContent.trim() === 'success'`)
	waitJS(t, bob, "the approval made after the restart", `document.querySelector('.approvals').textContent.includes('after restart')`)
	if m := value(t, bob, "read the marker", chromedp.Evaluate[string](`window.manentMarker || ''`)); m != "before restart" {
		t.Fatal("the page was reloaded")
	}
}

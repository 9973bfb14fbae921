package web_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/web"
)

// Every page carries the CSP without inline scripts, and pages need a
// session: without one the browser goes to /login.
func TestCSPAndSignInRequired(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	for _, path := range []string{"/", "/environments", "/deployments/dpl_x", "/schedules", "/audit", "/clusters", "/clusters/c1"} {
		p := b.get(path)
		if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s without a session: %d %q, want 303 to /login", path, p.Status, p.Header.Get("Location"))
		}
	}
	p := b.get("/login")
	csp := p.Header.Get("Content-Security-Policy")
	if p.Status != 200 || csp != web.ContentSecurityPolicy || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("GET /login: %d CSP %q", p.Status, csp)
	}
	if strings.Contains(p.Body, "<script>") || strings.Contains(p.Body, " onclick=") || strings.Contains(p.Body, "style=") {
		t.Errorf("inline script or style in the login page:\n%s", p.Body)
	}
	if p.Header.Get("X-Frame-Options") != "DENY" || p.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", p.Header)
	}
	// The API keeps answering problem+json, the UI does not take over /api/.
	if p := b.get("/api/v1/nothing"); p.Status != 404 || !strings.Contains(p.Header.Get("Content-Type"), "problem+json") {
		t.Errorf("GET /api/v1/nothing: %d %s", p.Status, p.Header.Get("Content-Type"))
	}
}

// Static token sign-in: the cookie is HttpOnly and SameSite=Strict, Secure
// behind TLS; a wrong token or a missing CSRF token starts no session.
func TestTokenLoginAndCookieFlags(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	form := b.get("/login")
	tok := csrf(t, form)

	if p := b.do("POST", "/login", url.Values{"token": {"alice-token"}}); p.Status != http.StatusForbidden {
		t.Errorf("sign in without CSRF: %d, want 403", p.Status)
	}
	if p := b.do("POST", "/login", url.Values{"csrf": {"forged"}, "token": {"alice-token"}}); p.Status != http.StatusForbidden {
		t.Errorf("sign in with a forged CSRF token: %d, want 403", p.Status)
	}
	p := b.do("POST", "/login", url.Values{"csrf": {tok}, "token": {"not-a-token"}})
	if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "not valid") || strings.Contains(p.Header.Get("Set-Cookie"), "manent_session=") {
		t.Fatalf("wrong token: %d %q", p.Status, p.Header.Get("Set-Cookie"))
	}
	p = b.do("POST", "/login", url.Values{"csrf": {csrf(t, p)}, "token": {"alice-token"}, "next": {"//evil.example/x"}})
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/" {
		t.Fatalf("sign in: %d %q (an off-site next must become /)", p.Status, p.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: p.Header}).Cookies() {
		if c.Name == "manent_session" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP", cookie)
	}
	if strings.Contains(cookie.Value, "alice-token") {
		t.Fatal("the cookie shows the token in clear")
	}
	if p := b.get("/"); p.Status != 200 || !strings.Contains(p.Body, "token:alice") || !strings.Contains(p.Body, "<h1>Activity</h1>") {
		t.Fatalf("activity after sign-in: %d\n%s", p.Status, p.Body)
	}

	// Behind TLS (a proxy saying so) the cookie is Secure (and named
	// __Host-: hostprefix_test.go).
	b2 := newBrowser(t, s.URL)
	f2 := b2.do("GET", "/login", nil, "X-Forwarded-Proto", "https")
	p2 := b2.do("POST", "/login", url.Values{"csrf": {csrf(t, f2)}, "token": {"bob-token"}}, "X-Forwarded-Proto", "https")
	if sc := p2.Header.Get("Set-Cookie"); p2.Status != http.StatusSeeOther || !strings.Contains(sc, "Secure") || !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Fatalf("sign in behind TLS: %d %q", p2.Status, sc)
	}

	// The session cookie never authenticates the API.
	req, _ := http.NewRequest("GET", s.URL+"/api/v1/deployments", nil)
	req.AddCookie(cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /api/v1/deployments with the session cookie only: %d, want 401", resp.StatusCode)
	}

	// Sign out needs the CSRF token too, and ends the session.
	home := b.get("/")
	if p := b.do("POST", "/logout", url.Values{}); p.Status != http.StatusForbidden {
		t.Errorf("sign out without CSRF: %d", p.Status)
	}
	if p := b.do("POST", "/logout", url.Values{"csrf": {csrf(t, home)}}); p.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.Status)
	}
	if p := b.get("/"); p.Status != http.StatusSeeOther {
		t.Fatalf("after sign out: %d, want a redirect to /login", p.Status)
	}
}

// RBAC as on the API: a reader sees no button and gets 403 posting anyway;
// a POST without the CSRF token is 403; an approver approves and the
// deploy moves on; cancel works for who may cancel.
func TestButtonsRBACAndCSRF(t *testing.T) {
	s := startUI(t)
	gate := s.gate(t, "gate1")
	id := s.submit(t, "alice-token", gatedDeploy(t, "prod", "7.1", gate))
	s.waitState(t, id, manent.StateAwaitingApproval)

	vera := newBrowser(t, s.URL)
	vera.login("vera-token")
	p := vera.get("/deployments/" + id)
	if p.Status != 200 || !strings.Contains(p.Body, "awaiting approval") {
		t.Fatalf("deploy page for a reader: %d\n%s", p.Status, p.Body)
	}
	for _, button := range []string{`id="approve"`, `id="reject"`, `id="cancel"`} {
		if strings.Contains(p.Body, button) {
			t.Errorf("a reader sees %s", button)
		}
	}
	tok := csrf(t, p) // the sign-out form's: the session's token
	for _, action := range []string{"approve", "reject", "cancel"} {
		r := vera.do("POST", "/deployments/"+id+"/"+action, url.Values{"csrf": {tok}})
		if r.Status != http.StatusForbidden {
			t.Errorf("reader posts %s: %d, want 403", action, r.Status)
		}
	}

	bob := newBrowser(t, s.URL)
	bob.login("bob-token")
	p = bob.get("/deployments/" + id)
	for _, button := range []string{`id="approve"`, `id="reject"`, `id="cancel"`} {
		if !strings.Contains(p.Body, button) {
			t.Errorf("an approver does not see %s", button)
		}
	}
	if r := bob.do("POST", "/deployments/"+id+"/approve", url.Values{}); r.Status != http.StatusForbidden {
		t.Fatalf("approve without CSRF: %d, want 403", r.Status)
	}
	if r := bob.do("POST", "/deployments/"+id+"/approve", url.Values{"csrf": {tok}}); r.Status != http.StatusForbidden {
		t.Fatalf("approve with another session's CSRF token: %d, want 403", r.Status)
	}
	if d, _ := s.client("admin-token").Deployment(context.Background(), id); d.State != manent.StateAwaitingApproval {
		t.Fatalf("refused posts changed the deploy: %s", d.State)
	}
	r := bob.do("POST", "/deployments/"+id+"/approve", url.Values{"csrf": {csrf(t, p)}, "comment": {"ship it"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	// The deploy moves on (the wait ends asynchronously).
	s.waitState(t, id, manent.StatePending)
	d, err := s.client("admin-token").Deployment(context.Background(), id)
	if err != nil || len(d.Approvals) != 1 || d.Approvals[0].Identity != "token:bob" || d.Approvals[0].Comment != "ship it" {
		t.Fatalf("after approval: %v %+v", err, d)
	}
	// The API's audit log has it, as for the CLI.
	a := bob.get("/audit?action=deployment.approve")
	if a.Status != 200 || !strings.Contains(a.Body, "token:bob") {
		t.Fatalf("audit page: %d\n%s", a.Status, a.Body)
	}

	enginetest.Eventually(t, 30*time.Second, func() bool {
		d, err := s.client("admin-token").Deployment(context.Background(), id)
		return err == nil && slices.ContainsFunc(d.Steps, func(st manent.Step) bool { return st.Name == "prepare" && st.State == manent.StepRunning })
	}, "step prepare running")
	p = bob.get("/deployments/" + id)
	if r := bob.do("POST", "/deployments/"+id+"/cancel", url.Values{"csrf": {csrf(t, p)}}); r.Status != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	// The request is recorded (the answer came); a running deploy stops at
	// the start of its next step, and the pages say so meanwhile.
	const why = "cancel requested: step prepare ends first (a running step is never cut short), then the deploy ends CANCELLED"
	for path, want := range map[string]string{"/": "running step prepare; " + why, "/deployments/" + id: why} {
		if pg := bob.get(path); !strings.Contains(pg.Body, want) {
			t.Errorf("GET %s after the cancel: no %q in\n%s", path, want, pg.Body)
		}
	}
	// Let the running step finish.
	open(t, gate)
	s.waitState(t, id, manent.StateCancelled)
}

// The pages answer with what the API answers: 404 for an unknown deploy,
// the environments and history of a finished deploy, schedules, audit.
func TestPages(t *testing.T) {
	s := startUI(t)
	gate := s.gate(t, "g")
	open(t, gate)
	id := s.submit(t, "alice-token", gatedDeploy(t, "staging", "1.0", gate))
	s.waitState(t, id, manent.StateSuccess)
	// An agent's report: the clusters page lists eu-1 for a reader of
	// billing/staging, with a link to its status; the deploy has ended and
	// its workload runs another version: DRIFTED, with why.
	if _, err := s.client("admin-token").Report(context.Background(), &clusterstate.Snapshot{Cluster: "eu-1", Time: time.Now().UTC(),
		Pods: []clusterstate.Pod{{Namespace: "shop", Name: "billing-1", DeployID: id, Application: "billing", Environment: "staging",
			Phase: "Running", Ready: true, Containers: []clusterstate.Container{{Name: "app", Image: "billing:1", Ready: true}}}},
		Workloads: []clusterstate.Workload{{Kind: clusterstate.KindDeployment, Namespace: "shop", Name: "billing", DeployID: id,
			Application: "billing", Environment: "staging", Version: "9.9.9", Images: []string{"billing:9.9.9"},
			Replicas: clusterstate.Replicas{Desired: 1, Ready: 1, Updated: 1, Available: 1}, KStatus: clusterstate.KStatusCurrent}}}); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, s.URL)
	b.login("alice-token")
	checks := map[string][]string{
		"/":                             {"<title>Activity · manent</title>", "Nothing is running"},
		"/environments":                 {"<h1>Environments</h1>", "/environments/billing/staging", "1.0"},
		"/environments/billing/staging": {"billing in staging", id, "current"},
		"/deployments/" + id:            {"gate opened for 1.0", "prepare", "success", "token:alice"},
		"/schedules":                    {"<h1>Schedules</h1>"},
		"/audit":                        {"deployment.submit"},
		"/clusters":                     {"<h1>Clusters</h1>", `<a href="/clusters/eu-1">eu-1</a>`, "<td>1</td>"},
		"/clusters/eu-1": {`<span class="badge state-drifted">drifted</span>`,
			"version 9.9.9 runs; deploy " + id + " ended SUCCESS with 1.0 (changed outside manent?)"},
	}
	for path, wants := range checks {
		p := b.get(path)
		if p.Status != 200 {
			t.Errorf("GET %s: %d\n%s", path, p.Status, p.Body)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(p.Body, w) {
				t.Errorf("GET %s: no %q in\n%s", path, w, p.Body)
			}
		}
	}
	if p := b.get("/deployments/dpl_nope"); p.Status != 404 || !strings.Contains(p.Body, "not found") {
		t.Errorf("unknown deploy: %d", p.Status)
	}
	if p := b.get("/nowhere"); p.Status != 404 {
		t.Errorf("unknown page: %d", p.Status)
	}
	// The reader may not read the audit log: the API's 403.
	v := newBrowser(t, s.URL)
	v.login("vera-token")
	if p := v.get("/audit"); p.Status != http.StatusForbidden {
		t.Errorf("audit for a reader: %d", p.Status)
	}
	// The fragment the script reloads is the #live region only.
	if p := b.do("GET", "/deployments/"+id, nil, "X-Manent-Fragment", "1"); p.Status != 200 || strings.Contains(p.Body, "<html") || !strings.Contains(p.Body, "prepare") {
		t.Errorf("fragment: %d\n%s", p.Status, p.Body)
	}
	// The assets are small (SPEC budget: JS and CSS under 100 KB).
	total := 0
	for _, f := range []string{"/static/app.js", "/static/app.css"} {
		p := b.get(f)
		if p.Status != 200 {
			t.Fatalf("GET %s: %d", f, p.Status)
		}
		total += len(p.Body)
	}
	if total >= 100<<10 {
		t.Errorf("JS and CSS weigh %d bytes", total)
	}
}

// The navigation offers only pages the identity may read: no Audit link
// without audit.read (the page would be the API's 403), on pages and on
// error pages alike.
func TestNavigationFollowsPermissions(t *testing.T) {
	s := startUI(t)
	bob := newBrowser(t, s.URL)
	bob.login("bob-token")
	vera := newBrowser(t, s.URL)
	vera.login("vera-token")
	const auditLink = `<a href="/audit"`
	for _, path := range []string{"/", "/environments", "/deployments/dpl_nope"} {
		if p := bob.get(path); !strings.Contains(p.Body, auditLink) {
			t.Errorf("GET %s as an auditor: no Audit link in\n%s", path, p.Body)
		}
		p := vera.get(path)
		if strings.Contains(p.Body, auditLink) {
			t.Errorf("GET %s without audit.read: the navigation links to the audit log:\n%s", path, p.Body)
		}
		if !strings.Contains(p.Body, `<a href="/environments"`) {
			t.Errorf("GET %s as a reader: no Environments link in\n%s", path, p.Body)
		}
	}
	if p := vera.get("/audit"); p.Status != http.StatusForbidden || strings.Contains(p.Body, auditLink) {
		t.Errorf("GET /audit without audit.read: %d, Audit link shown: %v", p.Status, strings.Contains(p.Body, auditLink))
	}
}

// A rollback says so on its page and in the history, with a link to the
// deploy it went back from, as the CLI's ROLLBACK OF column does.
func TestRollbackOfShown(t *testing.T) {
	s := startUI(t)
	gate := s.gate(t, "g")
	open(t, gate)
	first := s.submit(t, "alice-token", gatedDeploy(t, "staging", "1.0", gate))
	s.waitState(t, first, manent.StateSuccess)
	second := s.submit(t, "alice-token", gatedDeploy(t, "staging", "1.1", gate))
	s.waitState(t, second, manent.StateSuccess)
	rb, err := s.client("alice-token").Rollback(context.Background(), "billing", "staging", api.RollbackRequest{})
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if rb.RollbackOf != second {
		t.Fatalf("rollback of %q, want %q", rb.RollbackOf, second)
	}
	b := newBrowser(t, s.URL)
	b.login("bob-token")
	for path, link := range map[string]string{
		"/deployments/" + rb.ID:         `<dt>Rollback of</dt><dd><a class="id" href="/deployments/` + second + `">` + second + `</a></dd>`,
		"/environments/billing/staging": `rollback of <a href="/deployments/` + second + `">` + second + `</a>`,
	} {
		if p := b.get(path); p.Status != 200 || !strings.Contains(p.Body, link) {
			t.Errorf("GET %s: %d, no %q in\n%s", path, p.Status, link, p.Body)
		}
	}
	// The deploys that are not rollbacks say nothing of the kind.
	if p := b.get("/deployments/" + second); strings.Contains(strings.ToLower(p.Body), "rollback of") {
		t.Errorf("an ordinary deploy's page says %q", "rollback of")
	}
	if p := b.get("/environments/billing/staging"); strings.Count(p.Body, "rollback of") != 1 {
		t.Errorf("the history names %d rollbacks, want 1", strings.Count(p.Body, "rollback of"))
	}
	// And the deploy whose release it deployed again (rollback_from), as
	// manent history's RESTORES.
	if p := b.get("/environments/billing/staging"); !strings.Contains(p.Body, `restores <a href="/deployments/`+first+`">`+first+`</a>`) {
		t.Errorf("the history does not say the rollback restores %s:\n%s", first, p.Body)
	}
}

package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/node"
)

// auditOf returns the audit entries of action, oldest first.
func (s *uiServer) auditOf(t *testing.T, action string) []api.AuditEntry {
	t.Helper()
	res, err := s.client("admin-token").Audit(context.Background(), action, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]api.AuditEntry, 0, len(res.Items))
	for i := len(res.Items) - 1; i >= 0; i-- {
		out = append(out, res.Items[i])
	}
	return out
}

// noSecretInAudit fails when any audit entry holds one of secrets.
func (s *uiServer) noSecretInAudit(t *testing.T, secrets ...string) {
	t.Helper()
	res, err := s.client("admin-token").Audit(context.Background(), "", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res)
	for _, sec := range secrets {
		if sec != "" && strings.Contains(string(raw), sec) {
			t.Errorf("the audit log holds a secret (%.12s…):\n%s", sec, raw)
		}
	}
}

// Web sign-in and sign-out are in the audit log, as the API's calls are:
// who, with which method (token or OIDC), with the request id; a
// reference that ties a sign-out to its sign-in; never the token, the ID
// token or the cookie. A refused sign-in (anyone can try) is not.
func TestSignInAndOutAreAudited(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	form := b.get("/login")
	if p := b.do("POST", "/login", url.Values{"csrf": {csrf(t, form)}, "token": {"not-a-token"}}); p.Status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", p.Status)
	}
	p := b.do("POST", "/login", url.Values{"csrf": {csrf(t, form)}, "token": {"alice-token"}, "next": {"/"}}, "X-Request-Id", "req-sign-in-1")
	if p.Status != http.StatusSeeOther {
		t.Fatalf("sign in: %d", p.Status)
	}
	cookie := b.sessionCookie(s.URL)
	in := s.auditOf(t, "web.sign-in")
	if len(in) != 1 {
		t.Fatalf("web.sign-in entries: %+v, want 1 (a refused sign-in is not audited)", in)
	}
	e := in[0]
	if e.Identity != "token:alice" || e.Outcome != "accepted" || e.Detail != "method=token" || e.RequestID != "req-sign-in-1" || !strings.HasPrefix(e.Target, "session:") {
		t.Errorf("sign-in entry %+v", e)
	}
	if p := b.do("POST", "/logout", url.Values{"csrf": {csrf(t, b.get("/"))}}); p.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.Status)
	}
	out := s.auditOf(t, "web.sign-out")
	if len(out) != 1 || out[0].Identity != "token:alice" || out[0].Target != e.Target || out[0].Outcome != "accepted" || out[0].Detail != "method=token" {
		t.Fatalf("web.sign-out entries %+v (sign-in target %q)", out, e.Target)
	}
	s.noSecretInAudit(t, "alice-token", "not-a-token", cookie)
	// The audit page shows them to a reader of the log.
	b.login("bob-token")
	if a := b.get("/audit?action=web.sign-in"); a.Status != 200 || !strings.Contains(a.Body, "token:alice") || !strings.Contains(a.Body, "token:bob") {
		t.Errorf("audit page: %d\n%s", a.Status, a.Body)
	}
}

// An OIDC sign-in is audited with the ID token's identity and method oidc,
// without the ID token.
func TestOIDCSignInIsAudited(t *testing.T) {
	is := newCodeIssuer(t, "olga@example.com", []string{"sre"})
	s := startUI(t, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	b := newBrowser(t, s.URL)
	start := b.get("/login/oidc?next=%2F")
	resp, err := b.hc.Get(start.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	if p := b.get("/login/callback?" + cb.RawQuery); p.Status != http.StatusOK {
		t.Fatalf("callback: %d\n%s", p.Status, p.Body)
	}
	in := s.auditOf(t, "web.sign-in")
	if len(in) != 1 || in[0].Identity != "oidc:olga@example.com" || in[0].Detail != "method=oidc" || in[0].Outcome != "accepted" {
		t.Fatalf("web.sign-in entries %+v", in)
	}
	// The ID token is a JWT: no entry holds one.
	res, err := s.client("admin-token").Audit(context.Background(), "", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res)
	if strings.Contains(string(raw), "eyJ") || strings.Contains(string(raw), cb.Query().Get("code")) {
		t.Errorf("the audit log holds an ID token or the code:\n%s", raw)
	}
	s.noSecretInAudit(t, b.sessionCookie(s.URL))
}

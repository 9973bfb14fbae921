package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/server"
)

// routeURL is a request line for rt's pattern: its method, and its path
// with each wildcard filled in.
func routeURL(rt server.Route) (method, path string) {
	method, path, ok := strings.Cut(rt.Pattern, " ")
	if !ok {
		method, path = http.MethodGet, rt.Pattern
	}
	r := strings.NewReplacer("{id}", "dep_00000000000000000000000000", "{cluster}", "c1",
		"{application}", "billing", "{environment}", "prod")
	return method, r.Replace(path)
}

// sendRoute sends a request of method to url with a body of type ct (none when
// ct is ""), a bearer token unless "", and returns the status and problem.
func sendRoute(t *testing.T, method, url, token, ct, body string) (int, api.Problem) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var p api.Problem
	_ = json.Unmarshal(b, &p)
	return resp.StatusCode, p
}

// Every route asks for the credential before it looks at the request: an
// unauthenticated client sending an unknown query parameter, a parameter
// twice or a body that is not JSON gets a 401, not a 400 or a 415 telling
// it what the route reads — the four JSON routes answered 415 and the list
// routes 400 before 401. The routes are walked as the server registered
// them, so a route added later is covered; the few that take no credential
// first say why.
func TestEveryRouteAuthenticatesFirst(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	routes := srv.API.Routes()
	if len(routes) < 30 {
		t.Fatalf("%d routes registered; the walk expects every route of the API", len(routes))
	}
	for _, rt := range routes {
		if rt.Unauthenticated != "" {
			t.Logf("%s takes no credential first: %s", rt.Pattern, rt.Unauthenticated)
			continue
		}
		method, path := routeURL(rt)
		for _, q := range []string{"?no_such_parameter=1", "?limit=1&limit=2", "?limit=-1"} {
			code, p := sendRoute(t, method, srv.URL+path+q, "", "text/plain", `{"comment": "x"}`)
			if code != http.StatusUnauthorized {
				t.Errorf("%s%s without a credential, a text/plain body: %d %q, want 401", rt.Pattern, q, code, p.Detail)
			}
		}
	}
}

// Every route refuses a query parameter it does not read, as the list
// routes did — status, steps, cancel, approve, reject, rollback and the
// others ignored ?dry_run=true or a typo and acted. Walked as registered:
// a new route refuses them unless it says why it reads the query itself.
func TestEveryRouteRefusesParametersItDoesNotRead(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	for _, rt := range srv.API.Routes() {
		if rt.AnyParams != "" {
			t.Logf("%s reads its query itself: %s", rt.Pattern, rt.AnyParams)
			continue
		}
		method, path := routeURL(rt)
		code, p := sendRoute(t, method, srv.URL+path+"?dry_run_=true", "admin-token", "", "")
		if code != http.StatusBadRequest || !strings.Contains(p.Detail, `unknown query parameter "dry_run_"`) ||
			len(p.Errors) != 1 || p.Errors[0].Path != "query.dry_run_" {
			t.Errorf("%s?dry_run_=true: %d %q %+v, want 400 naming the parameter", rt.Pattern, code, p.Detail, p.Errors)
		}
		if len(rt.Params) > 0 {
			typo := rt.Params[0] + "s"
			code, p := sendRoute(t, method, srv.URL+path+"?"+typo+"=1", "admin-token", "", "")
			if code != http.StatusBadRequest || !strings.Contains(p.Detail, `did you mean "`+rt.Params[0]+`"?`) {
				t.Errorf("%s?%s=1: %d %q, want 400 suggesting %s", rt.Pattern, typo, code, p.Detail, rt.Params[0])
			}
		}
	}
}

// No route is registered on the mux but through Server.handle, which
// records it for the walks above and puts its checks in order.
func TestRoutesAreRegisteredThroughHandle(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := f.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "router.go" {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "s.mux.Handle(") || strings.Contains(string(b), "s.mux.HandleFunc(") {
			t.Errorf("%s registers a route on the mux directly: use s.handle(route{…}, h) (router.go)", name)
		}
	}
}

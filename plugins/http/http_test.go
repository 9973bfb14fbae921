package httpplugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/urlpolicy"
	httpplugin "github.com/manent-io/manent/plugins/http"
)

// call is one request the fake platform saw.
type call struct {
	Method, Path, Query string
	// RawPath is the path as sent, escapes kept.
	RawPath string
	Header  http.Header
	Body    map[string]any
}

// platform is a fake deploy API: handlers by "METHOD /path", each seeing
// the number of earlier calls to it.
type platform struct {
	srv      *httptest.Server
	mu       sync.Mutex
	calls    []call
	handlers map[string]func(w http.ResponseWriter, r *http.Request, n int)
	counts   map[string]int
}

func newPlatform(t *testing.T, handlers map[string]func(w http.ResponseWriter, r *http.Request, n int)) *platform {
	t.Helper()
	p := &platform{handlers: handlers, counts: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		c := call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, RawPath: r.URL.EscapedPath(), Header: r.Header.Clone()}
		_ = json.Unmarshal(data, &c.Body)
		key := r.Method + " " + r.URL.Path
		p.mu.Lock()
		p.calls = append(p.calls, c)
		n := p.counts[key]
		p.counts[key]++
		h := p.handlers[key]
		p.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r, n)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *platform) seen() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call(nil), p.calls...)
}

func jsonAnswer(status int, v any) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
}

// states answers the n-th status poll with states[n] (the last repeats).
func states(states ...string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, n int) {
		s := states[min(n, len(states)-1)]
		if s == "404" {
			http.NotFound(w, r)
			return
		}
		if s == "503" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		jsonAnswer(200, map[string]any{"state": s, "error": "image pull failed"})(w, r, n)
	}
}

func pctx(with map[string]any) plugin.Context {
	return plugin.Context{
		DeployID: "dpl_01HTTP", Application: "billing", Environment: "prod", Version: "1.4.2", Step: "deploy",
		Artifact: "/work/dpl_01HTTP/billing.tar.gz", Parameters: map[string]any{"replicas": 3.0}, With: with, Log: io.Discard,
	}
}

func withBase(base string, extra map[string]any) map[string]any {
	w := map[string]any{"deploy_url": base + "/deploys", "poll_interval": "10ms", "poll_timeout": "5s", "timeout": "2s"}
	for k, v := range extra {
		w[k] = v
	}
	return w
}

func TestDeploy(t *testing.T) {
	accepted := func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Location", "/deploys/42")
		w.WriteHeader(http.StatusAccepted)
	}
	tests := []struct {
		name          string
		handlers      map[string]func(http.ResponseWriter, *http.Request, int)
		extra         map[string]any
		wantErr       string
		wantPermanent bool
		wantState     string
		wantPolls     int
	}{
		{
			name:     "no status: a 2xx is done",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){"POST /deploys": jsonAnswer(200, map[string]any{"ok": true})},
		},
		{
			name: "202 Location polled until done",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){
				"POST /deploys": accepted, "GET /deploys/42": states("queued", "running", "done"),
			},
			wantState: "done", wantPolls: 3,
		},
		{
			name: "status_url in the answer",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){
				"POST /deploys": jsonAnswer(201, map[string]any{"status_url": "/jobs/7"}), "GET /jobs/7": states("running", "done"),
			},
			wantState: "done", wantPolls: 2,
		},
		{
			name: "configured status_url with placeholders, 404 and 503 while it appears",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){
				"POST /deploys": jsonAnswer(200, nil), "GET /status/billing/prod/dpl_01HTTP": states("404", "503", "done"),
			},
			extra:     map[string]any{"status_url": "/status/{application}/{environment}/{deploy_id}"},
			wantState: "done", wantPolls: 3,
		},
		{
			name: "custom status field and values",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){
				"POST /deploys":   accepted,
				"GET /deploys/42": jsonAnswer(200, map[string]any{"rollout": map[string]any{"phase": "Healthy"}}),
			},
			extra:     map[string]any{"status_field": "rollout.phase", "done": []any{"Healthy"}, "failed": []any{"Degraded"}},
			wantState: "Healthy", wantPolls: 1,
		},
		{
			name: "platform reports failed: permanent",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){
				"POST /deploys": accepted, "GET /deploys/42": states("running", "failed"),
			},
			wantErr: `reports state "failed": image pull failed`, wantPermanent: true, wantState: "failed", wantPolls: 2,
		},
		{
			name:     "4xx is permanent",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){"POST /deploys": jsonAnswer(422, map[string]any{"error": "bad version"})},
			wantErr:  "answered 422", wantPermanent: true,
		},
		{
			name:     "5xx is retryable",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){"POST /deploys": jsonAnswer(502, nil)},
			wantErr:  "answered 502",
		},
		{
			name:     "429 is retryable",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){"POST /deploys": jsonAnswer(429, nil)},
			wantErr:  "answered 429",
		},
		{
			name: "slow call times out, retryable",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){"POST /deploys": func(w http.ResponseWriter, r *http.Request, _ int) {
				<-r.Context().Done()
			}},
			extra:   map[string]any{"timeout": "50ms"},
			wantErr: "no answer within 50ms",
		},
		{
			name: "status never settles: retryable",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){
				"POST /deploys": accepted, "GET /deploys/42": states("running"),
			},
			extra:   map[string]any{"poll_timeout": "100ms"},
			wantErr: `not settled within 100ms (last state: "running")`, wantState: "running",
		},
		{
			name: "status URL refuses: permanent",
			handlers: map[string]func(http.ResponseWriter, *http.Request, int){
				"POST /deploys": accepted, "GET /deploys/42": jsonAnswer(403, nil),
			},
			wantErr: "answered 403", wantPermanent: true, wantPolls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pf := newPlatform(t, tt.handlers)
			var log bytes.Buffer
			pc := pctx(withBase(pf.srv.URL, tt.extra))
			pc.Log = &log
			if su, ok := tt.extra["status_url"].(string); ok {
				pc.With["status_url"] = pf.srv.URL + su
			}
			p := httpplugin.New(pf.srv.Client())
			if err := p.Validate(pc.With); err != nil {
				t.Fatal(err)
			}
			res, err := p.Deploy(context.Background(), pc)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Deploy: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Deploy error = %v, want one containing %q", err, tt.wantErr)
			}
			if got := plugin.IsPermanent(err); got != tt.wantPermanent {
				t.Fatalf("permanent = %v, want %v (%v)", got, tt.wantPermanent, err)
			}
			if tt.wantState != "" && res["state"] != tt.wantState {
				t.Fatalf("result = %v, want state %q", res, tt.wantState)
			}
			calls := pf.seen()
			first := calls[0]
			if first.Method != "POST" || first.Path != "/deploys" {
				t.Fatalf("first call %s %s", first.Method, first.Path)
			}
			if got := first.Header.Get("Idempotency-Key"); got != "dpl_01HTTP:deploy" {
				t.Errorf("Idempotency-Key = %q", got)
			}
			for k, want := range map[string]any{
				"action": "deploy", "deploy_id": "dpl_01HTTP", "application": "billing", "environment": "prod",
				"version": "1.4.2", "step": "deploy", "artifact": "/work/dpl_01HTTP/billing.tar.gz",
			} {
				if first.Body[k] != want {
					t.Errorf("body.%s = %v, want %v", k, first.Body[k], want)
				}
			}
			if params, _ := first.Body["parameters"].(map[string]any); params["replicas"] != 3.0 {
				t.Errorf("body.parameters = %v", first.Body["parameters"])
			}
			if tt.wantPolls > 0 {
				polls := 0
				for _, c := range calls[1:] {
					if c.Method == http.MethodGet {
						polls++
						if c.Header.Get("Idempotency-Key") != "dpl_01HTTP:deploy" {
							t.Errorf("poll without Idempotency-Key")
						}
					}
				}
				if polls != tt.wantPolls {
					t.Errorf("polled %d times, want %d", polls, tt.wantPolls)
				}
			}
			if !strings.Contains(log.String(), "POST "+pf.srv.URL+"/deploys -> ") {
				t.Errorf("deploy log %q lacks the call", log.String())
			}
		})
	}
}

func TestHeadersAndMethod(t *testing.T) {
	pf := newPlatform(t, map[string]func(http.ResponseWriter, *http.Request, int){"PUT /deploys": jsonAnswer(200, nil)})
	pc := pctx(withBase(pf.srv.URL, map[string]any{"method": "put", "headers": map[string]any{"Authorization": "Bearer t0k"}}))
	if _, err := httpplugin.New(pf.srv.Client()).Deploy(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	c := pf.seen()[0]
	if c.Method != http.MethodPut || c.Header.Get("Authorization") != "Bearer t0k" || c.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("call = %s %v", c.Method, c.Header)
	}
}

func TestActivateHealthRollbackLive(t *testing.T) {
	live := map[string]any{"release": "1.4.1", "image": "billing:1.4.1"}
	pf := newPlatform(t, map[string]func(http.ResponseWriter, *http.Request, int){
		"POST /activate": jsonAnswer(200, map[string]any{"live": "1.4.2"}),
		"GET /health":    states("ok"),
		"GET /current":   jsonAnswer(200, live),
		"POST /rollback": jsonAnswer(202, nil),
		"GET /unhealthy": jsonAnswer(404, nil),
	})
	p := httpplugin.New(pf.srv.Client())
	ctx := context.Background()
	full := pctx(withBase(pf.srv.URL, map[string]any{
		"activate_url": pf.srv.URL + "/activate", "health_url": pf.srv.URL + "/health",
		"live_url": pf.srv.URL + "/current", "rollback_url": pf.srv.URL + "/rollback",
	}))
	bare := pctx(withBase(pf.srv.URL, nil))

	t.Run("live", func(t *testing.T) {
		cp, err := p.Live(ctx, full)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(cp, &got); err != nil || got["release"] != "1.4.1" {
			t.Fatalf("checkpoint %s: %v", cp, err)
		}
		if cp, err := p.Live(ctx, bare); err != nil || string(cp) != "{}" {
			t.Fatalf("Live without URL = %s, %v", cp, err)
		}
	})
	t.Run("activate", func(t *testing.T) {
		pc := full
		pc.Step = "activation"
		res, err := p.Activate(ctx, pc)
		if err != nil || res["status"] != 200 {
			t.Fatalf("Activate = %v, %v", res, err)
		}
		if res, err := p.Activate(ctx, bare); err != nil || res["skipped"] == nil {
			t.Fatalf("Activate without URL = %v, %v", res, err)
		}
	})
	t.Run("health", func(t *testing.T) {
		if _, err := p.Health(ctx, full); err != nil {
			t.Fatal(err)
		}
		pc := pctx(withBase(pf.srv.URL, map[string]any{"health_url": pf.srv.URL + "/unhealthy"}))
		_, err := p.Health(ctx, pc)
		if err == nil || plugin.IsPermanent(err) {
			t.Fatalf("unhealthy: %v, want a retryable error", err)
		}
	})
	t.Run("rollback", func(t *testing.T) {
		cp, _ := json.Marshal(live)
		for _, tc := range []struct {
			action string
			fn     func(context.Context, plugin.Context, json.RawMessage) (plugin.Result, error)
		}{
			{"rollback:activation", p.RollbackActivation},
			{"rollback:deploy", p.RollbackDeploy},
		} {
			pc := full
			pc.Step = tc.action
			if _, err := tc.fn(ctx, pc, cp); err != nil {
				t.Fatal(err)
			}
			calls := pf.seen()
			last := calls[len(calls)-1]
			if last.Path != "/rollback" || last.Body["action"] != tc.action || last.Header.Get("Idempotency-Key") != "dpl_01HTTP:"+tc.action {
				t.Fatalf("%s call = %+v", tc.action, last)
			}
			if got, _ := last.Body["checkpoint"].(map[string]any); got["release"] != "1.4.1" {
				t.Fatalf("%s checkpoint = %v", tc.action, last.Body["checkpoint"])
			}
			_, err := tc.fn(ctx, bare, cp)
			if !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "rollback_url is not set") {
				t.Fatalf("%s without rollback_url: %v", tc.action, err)
			}
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		with    map[string]any
		wantErr string
	}{
		{"minimal", map[string]any{"deploy_url": "https://p.example/deploys"}, ""},
		{"everything", map[string]any{
			"deploy_url": "https://p.example/d", "status_url": "https://p.example/d/{deploy_id}", "activate_url": "https://p.example/a",
			"health_url": "http://p.example/h", "rollback_url": "https://p.example/r", "live_url": "https://p.example/l",
			"method": "PATCH", "headers": map[string]any{"X-Token": "t"}, "timeout": "5s", "poll_interval": "1s",
			"poll_timeout": "30m", "status_field": "status.phase", "done": []any{"ok"}, "failed": []any{"ko"},
		}, ""},
		{"missing deploy_url", map[string]any{}, "with.deploy_url is required"},
		{"relative URL", map[string]any{"deploy_url": "/deploys"}, "absolute http(s) URL"},
		{"bad scheme", map[string]any{"deploy_url": "ftp://p.example/"}, "absolute http(s) URL"},
		{"bad method", map[string]any{"deploy_url": "https://p.example/", "method": "DELETE"}, "must be POST, PUT or PATCH"},
		{"bad duration", map[string]any{"deploy_url": "https://p.example/", "poll_timeout": "soon"}, "not a positive duration"},
		{"headers not strings", map[string]any{"deploy_url": "https://p.example/", "headers": map[string]any{"X": 1}}, "with.headers.X must be a string"},
		{"unknown key", map[string]any{"deploy_url": "https://p.example/", "token": "x"}, "unknown setting with.token (known: activate_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := httpplugin.New(nil).Validate(tt.with)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDeployRespectsCancel(t *testing.T) {
	polled := make(chan struct{}, 100)
	pf := newPlatform(t, map[string]func(http.ResponseWriter, *http.Request, int){
		"POST /deploys": func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Location", "/deploys/1")
			w.WriteHeader(http.StatusAccepted)
		},
		"GET /deploys/1": func(w http.ResponseWriter, r *http.Request, n int) {
			states("running")(w, r, n)
			polled <- struct{}{}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	pc := pctx(withBase(pf.srv.URL, map[string]any{"poll_interval": "1h", "poll_timeout": "2h"}))
	done := make(chan error, 1)
	go func() {
		_, err := httpplugin.New(pf.srv.Client()).Deploy(ctx, pc)
		done <- err
	}()
	// Cancel once the first poll happened: the plugin then waits an hour.
	select {
	case <-polled:
	case <-time.After(10 * time.Second):
		t.Fatal("no poll")
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Deploy succeeded after cancel")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deploy ignored the cancel")
	}
}

// Within a rollout wave the URL placeholders {wave}, {wave_index},
// {targets} and {percent} are filled and the body carries `rollout`;
// outside a rollout {percent} is 100 and the body has no rollout. The
// plugin honours percentages only when the platform is told the share.
func TestRolloutTemplating(t *testing.T) {
	p := newPlatform(t, map[string]func(http.ResponseWriter, *http.Request, int){
		"POST /deploy/34/1":  jsonAnswer(200, map[string]any{}),
		"POST /deploy/100/":  jsonAnswer(200, map[string]any{}),
		"POST /deploy/100/2": jsonAnswer(200, map[string]any{}),
	})
	with := map[string]any{"deploy_url": p.srv.URL + "/deploy/{percent}/{wave_index}?wave={wave}&targets={targets}"}
	pl := httpplugin.New(p.srv.Client())
	if err := pl.HonoursPercentages(with); err != nil {
		t.Fatalf("deploy_url with {percent}: %v", err)
	}
	ctx := context.Background()
	for _, pc := range []plugin.Context{
		{DeployID: "dpl_1", Step: "deploy[34%]", Wave: "34%", WaveIndex: 1, Percent: 34, With: with},
		{DeployID: "dpl_2", Step: "deploy", With: with},
		{DeployID: "dpl_3", Step: "deploy[eu]", Wave: "eu", WaveIndex: 2, Targets: []string{"eu-1", "eu-2"}, With: with},
	} {
		if _, err := pl.Deploy(ctx, pc); err != nil {
			t.Fatalf("%s: %v", pc.DeployID, err)
		}
	}
	calls := p.seen()
	if len(calls) != 3 {
		t.Fatalf("calls %+v", calls)
	}
	for i, want := range []struct{ path, query, rollout string }{
		{"/deploy/34/1", "wave=34%25&targets=", `{"index":1,"percent":34,"targets":[],"wave":"34%"}`},
		{"/deploy/100/", "wave=&targets=", ``},
		{"/deploy/100/2", "wave=eu&targets=eu-1%2Ceu-2", `{"index":2,"percent":0,"targets":["eu-1","eu-2"],"wave":"eu"}`},
	} {
		c := calls[i]
		ro := ""
		if r, ok := c.Body["rollout"]; ok {
			b, _ := json.Marshal(r)
			ro = string(b)
		}
		if c.Path != want.path || c.Query != want.query || ro != want.rollout {
			t.Errorf("call %d: %s?%s rollout %s; want %s?%s rollout %s", i, c.Path, c.Query, ro, want.path, want.query, want.rollout)
		}
	}

	// Not told the share: refused, unless the platform reads it from the body.
	plain := map[string]any{"deploy_url": p.srv.URL + "/deploy"}
	if err := pl.HonoursPercentages(plain); err == nil || !strings.Contains(err.Error(), "{percent}") {
		t.Errorf("deploy_url without {percent}: %v, want a refusal naming {percent}", err)
	}
	plain["percentages"] = true
	if err := pl.HonoursPercentages(plain); err != nil {
		t.Errorf("with.percentages true: %v", err)
	}
	plain["percentages"] = "yes"
	if err := pl.Validate(plain); err == nil {
		t.Error("with.percentages \"yes\" validated")
	}
}

// A server whose plugins.http_allow is empty refuses an http target at
// submission: every call it would make is refused anyway.
func TestDisabledRefusesAtValidate(t *testing.T) {
	err := httpplugin.Disabled().Validate(map[string]any{"deploy_url": "https://p.example/deploys"})
	if err == nil || !strings.Contains(err.Error(), "plugins.http_allow is empty") {
		t.Fatalf("Validate on a server allowing no call: %v", err)
	}
}

// A value put into a URL cannot change its shape: a version "1&env=prod"
// in a query adds no parameter, a version ".." in a path climbs no level,
// and a value holding a placeholder is not expanded again.
func TestPlaceholdersCannotReshapeTheURL(t *testing.T) {
	p := newPlatform(t, map[string]func(http.ResponseWriter, *http.Request, int){})
	with := map[string]any{"deploy_url": p.srv.URL + "/apps/{application}/releases/{version}/deploy?v={version}&env={environment}"}
	pl := httpplugin.New(p.srv.Client())
	for _, version := range []string{"1&env=dev", "..", ".", "{deploy_id}", "a/../../b", "1+2=3;x@y:z$"} {
		pc := pctx(with)
		pc.Version = version
		_, _ = pl.Deploy(context.Background(), pc)
	}
	calls := p.seen()
	if len(calls) != 6 {
		t.Fatalf("calls: %+v", calls)
	}
	for i, want := range []struct{ rawPath, version string }{
		{"/apps/billing/releases/1%26env%3Ddev/deploy", "1&env=dev"},
		{"/apps/billing/releases/%2E%2E/deploy", ".."},
		{"/apps/billing/releases/%2E/deploy", "."},
		{"/apps/billing/releases/%7Bdeploy_id%7D/deploy", "{deploy_id}"},
		{"/apps/billing/releases/a%2F..%2F..%2Fb/deploy", "a/../../b"},
		{"/apps/billing/releases/1%2B2%3D3%3Bx%40y%3Az%24/deploy", "1+2=3;x@y:z$"},
	} {
		c := calls[i]
		q, err := url.ParseQuery(c.Query)
		if err != nil {
			t.Fatalf("call %d: query %q: %v", i, c.Query, err)
		}
		if c.RawPath != want.rawPath || len(q) != 2 || q.Get("v") != want.version || q.Get("env") != "prod" {
			t.Errorf("version %q: called %s?%s (query %v); want %s?v=<the version>&env=prod", want.version, c.RawPath, c.Query, q, want.rawPath)
		}
	}
}

// A header that cannot be sent as written is refused at validation, at its
// own setting: a value with a line break (which would start a header of
// its own), a name that is no token, and the headers manent or the HTTP
// transport set (Host, Content-Length, Transfer-Encoding, Connection,
// Idempotency-Key), which the call would otherwise drop without a word.
// Before, validation passed and every attempt of the deploy step failed,
// retried, with "net/http: invalid header field value".
func TestHeadersThatCannotBeSentAreRefused(t *testing.T) {
	pf := newPlatform(t, map[string]func(http.ResponseWriter, *http.Request, int){"POST /deploys": jsonAnswer(200, nil)})
	for _, tc := range []struct {
		name, value, want string
	}{
		{"X-A", "v\r\nX-Injected: 1", `with.headers.X-A holds a line break or another control character`},
		{"X-B", "v\x00", `with.headers.X-B holds a line break or another control character`},
		{"Bad Name", "v", `with.headers "Bad Name" is not a header name`},
		{"X-C:", "v", `with.headers "X-C:" is not a header name`},
		{"host", "other.example", `with.headers.host is set by manent or the HTTP client`},
		{"Idempotency-Key", "k", `with.headers.Idempotency-Key is set by manent or the HTTP client`},
		{"Content-Length", "1", `with.headers.Content-Length is set by manent or the HTTP client`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := withBase(pf.srv.URL, map[string]any{"headers": map[string]any{tc.name: tc.value, "X-Fine": "ok\tstill ok"}})
			err := httpplugin.New(nil).Validate(with)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
			var se *plugin.SettingError
			if !errors.As(err, &se) || se.Path != "headers/"+tc.name {
				t.Errorf("Validate: %v, want it at headers/%s", err, tc.name)
			}
			_, err = httpplugin.New(pf.srv.Client()).Deploy(context.Background(), pctx(with))
			if !plugin.IsPermanent(err) {
				t.Errorf("Deploy: %v, want a permanent error", err)
			}
		})
	}
	if n := len(pf.seen()); n != 0 {
		t.Errorf("the platform got %d calls", n)
	}
}

// A redirect is an answer no retry changes (manent follows none, so it
// never reaches 169.254.169.254 through one): the step fails at once and
// says where the platform pointed and what to set instead. It was retried
// as a 5xx would be, saying only "answered 302 Found".
func TestRedirectIsPermanentAndSaysWhere(t *testing.T) {
	pf := newPlatform(t, map[string]func(http.ResponseWriter, *http.Request, int){
		"POST /deploys": func(w http.ResponseWriter, r *http.Request, _ int) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam?token=s3cr3t", http.StatusTemporaryRedirect)
		},
	})
	client := egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Use: "http plugin call", Key: "plugins.http_allow", Allow: []string{pf.srv.URL + "/**"}}})
	_, err := httpplugin.New(client).Deploy(context.Background(), pctx(withBase(pf.srv.URL, nil)))
	if !plugin.IsPermanent(err) {
		t.Errorf("Deploy: %v, want a permanent error", err)
	}
	for _, want := range []string{"307", "redirects to http://169.254.169.254/latest/meta-data/iam", "manent follows no redirect", "with.deploy_url"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Deploy: %v, want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Deploy: %v quotes the Location's query", err)
	}
	if n := len(pf.seen()); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
}

// A platform that cannot be reached or does not answer in time: the step's
// log and error name the URL without its user information and query (which
// may hold an API key), as for an answer — the transport's error quoted
// the whole URL again.
func TestUnreachablePlatformHidesTheURLsQuery(t *testing.T) {
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, base := range []string{gone.URL, slow.URL} {
		client := egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Use: "http plugin call", Key: "plugins.http_allow", Allow: []string{"http://127.0.0.1:*/**"}}})
		var log bytes.Buffer
		pc := pctx(withBase(strings.Replace(base, "http://", "http://ci:PLATFORMPASSWORD@", 1), map[string]any{"timeout": "200ms"}))
		pc.With["deploy_url"] = pc.With["deploy_url"].(string) + "?apikey=PLATFORMKEY"
		pc.Log = &log
		_, err := httpplugin.New(client).Deploy(context.Background(), pc)
		if err == nil {
			t.Fatalf("%s: Deploy succeeded", base)
		}
		for _, secret := range []string{"PLATFORMKEY", "PLATFORMPASSWORD"} {
			if strings.Contains(err.Error(), secret) || strings.Contains(log.String(), secret) {
				t.Errorf("%s: the step shows %s:\nlog: %s\nerror: %v", base, secret, log.String(), err)
			}
		}
		if !strings.Contains(err.Error(), base+"/deploys") {
			t.Errorf("%s: %v, want it to name %s/deploys", base, err, base)
		}
	}
}

// An error answer is quoted for what helps — its status, the title and
// detail of a problem+json (or the error or message of JSON), or the first
// line of plain text, each short — never an HTML page, and never a URL's
// query or a bearer token it carries: the step's error is shown to anyone
// who may read the deploy, and kept.
func TestErrorAnswerIsQuotedShortAndRedacted(t *testing.T) {
	html := "<!DOCTYPE html><html><head><title>502</title></head><body>" + strings.Repeat("<div>upstream</div>", 200) + "</body></html>"
	for _, tt := range []struct {
		name        string
		ctype, body string
		status      int
		want        []string
		never       []string
		max         int // the most runes of the error
	}{
		{name: "problem+json", ctype: "application/problem+json", status: 422,
			body:  `{"type":"about:blank","title":"Unprocessable Entity","detail":"version 1.4.2 is unknown: see https://ops:PW@platform.example/versions?token=SECRETTOKEN","instance":"/x","user":{"email":"jane@example.com"}}`,
			want:  []string{"422 Unprocessable Entity", "Unprocessable Entity: version 1.4.2 is unknown: see https://platform.example/versions"},
			never: []string{"SECRETTOKEN", "PW", "jane@example.com", "about:blank"}, max: 400},
		{name: "JSON error", ctype: "application/json", status: 400,
			body: `{"error":"bad replicas","trace":"` + strings.Repeat("frame ", 100) + `"}`,
			want: []string{"400 Bad Request: bad replicas"}, never: []string{"frame"}, max: 300},
		{name: "long JSON detail", ctype: "application/json", status: 409,
			body: `{"detail":"` + strings.Repeat("x", 5000) + `"}`,
			want: []string{"409 Conflict: xxx", "…"}, max: 400},
		{name: "HTML page", ctype: "text/html; charset=utf-8", status: 502, body: html,
			want: []string{"502 Bad Gateway", "an HTML page"}, never: []string{"<", "upstream"}, max: 300},
		{name: "plain text", ctype: "text/plain", status: 503,
			body:  "maintenance until 14:00, Authorization: Bearer sk-LIVE-123 refused\nline two\nline three",
			want:  []string{"503 Service Unavailable: maintenance until 14:00, Authorization: Bearer [redacted] refused"},
			never: []string{"sk-LIVE-123", "line two"}, max: 300},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pf := newPlatform(t, map[string]func(http.ResponseWriter, *http.Request, int){
				"POST /deploys": func(w http.ResponseWriter, _ *http.Request, _ int) {
					w.Header().Set("Content-Type", tt.ctype)
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, tt.body)
				},
			})
			_, err := httpplugin.New(pf.srv.Client()).Deploy(context.Background(), pctx(withBase(pf.srv.URL, nil)))
			if err == nil {
				t.Fatal("Deploy succeeded")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			for _, n := range tt.never {
				if strings.Contains(msg, n) {
					t.Errorf("error %q quotes %q", msg, n)
				}
			}
			if strings.ContainsAny(msg, "\n\r") || len([]rune(msg)) > tt.max {
				t.Errorf("error of %d runes (at most %d, one line): %q", len([]rune(msg)), tt.max, msg)
			}
		})
	}
}

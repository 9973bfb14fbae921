package envconfig

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

// configServer is a configuration service on httptest: it serves body with
// etag for every URL, answering 304 to a matching If-None-Match, and
// records the requests.
type configServer struct {
	*httptest.Server
	mu       sync.Mutex
	body     string
	etag     string
	requests []*http.Request
}

func newConfigServer(t *testing.T, body, etag string) *configServer {
	t.Helper()
	s := &configServer{body: body, etag: etag}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests = append(s.requests, r.Clone(context.Background()))
		if s.etag != "" {
			w.Header().Set("ETag", s.etag)
			if r.Header.Get("If-None-Match") == s.etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *configServer) set(body, etag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.etag = body, etag
}

func (s *configServer) last() *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[len(s.requests)-1]
}

func TestHTTPGetAndETag(t *testing.T) {
	srv := newConfigServer(t, `{"target": {"plugin": "kubernetes", "with": {"namespace": "billing"}}, "parameters": {"replicas": 2},
		"rollback": {"enabled": true}, "regions": ["eu-1"],
		"descriptor_policy": {"allow_target_override": false, "parameters": ["replicas"]}}`, `"v1"`)
	h := &HTTP{URL: srv.URL + "/environments/{environment}?application={application}"}
	ctx := context.Background()

	want := &Config{
		Target:     &descriptor.Target{Plugin: "kubernetes", With: map[string]any{"namespace": "billing"}},
		Parameters: map[string]any{"replicas": 2.0},
		Rollback:   descriptor.Rollback{Enabled: new(true)},
		Regions:    []string{"eu-1"},
		Policy:     &Policy{Parameters: []string{"replicas"}},
	}
	wantRev := Revision{Source: srv.URL + "/environments/prod?application=billing", Revision: `"v1"`}

	cfg, rev, err := h.Get(ctx, "billing", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, want) || rev != wantRev {
		t.Fatalf("got %#v %v\nwant %#v %v", cfg, rev, want, wantRev)
	}
	r := srv.last()
	if r.URL.Path != "/environments/prod" || r.URL.Query().Get("application") != "billing" {
		t.Errorf("asked %s", r.URL)
	}
	if got := r.Header.Get("If-None-Match"); got != "" {
		t.Errorf("first request sent If-None-Match %q", got)
	}
	if got := r.Header.Get("Accept"); got != "application/json" {
		t.Errorf("Accept = %q", got)
	}

	// Unchanged: 304, the cached copy, the same revision.
	cfg.Parameters["replicas"] = 99 // the caller's copy is its own
	cfg, rev, err = h.Get(ctx, "billing", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.last().Header.Get("If-None-Match"); got != `"v1"` {
		t.Errorf("second request sent If-None-Match %q, want \"v1\"", got)
	}
	if !reflect.DeepEqual(cfg, want) || rev != wantRev {
		t.Errorf("after 304 got %#v %v\nwant %#v %v", cfg, rev, want, wantRev)
	}

	// Changed: a new body and revision.
	srv.set(`{"parameters": {"replicas": 3}}`, `"v2"`)
	cfg, rev, err = h.Get(ctx, "billing", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if rev.Revision != `"v2"` || cfg.Parameters["replicas"] != 3.0 {
		t.Errorf("after a change got %#v %v", cfg, rev)
	}

	// Another application is another URL: no If-None-Match.
	if _, _, err := h.Get(ctx, "other", "prod"); err != nil {
		t.Fatal(err)
	}
	if got := srv.last().Header.Get("If-None-Match"); got != "" {
		t.Errorf("another URL sent If-None-Match %q", got)
	}
}

func TestHTTPWithoutETag(t *testing.T) {
	body := `{"regions": ["eu-1"]}`
	srv := newConfigServer(t, body, "")
	h := &HTTP{URL: srv.URL + "/{environment}.json"}
	_, rev, err := h.Get(context.Background(), "billing", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if rev.Revision != sha256Hex(body) {
		t.Errorf("revision = %q, want the body's sha256", rev.Revision)
	}
	if srv.last().URL.Path != "/prod.json" {
		t.Errorf("asked %s", srv.last().URL)
	}
}

func TestHTTPAnswers(t *testing.T) {
	tests := []struct {
		name        string
		handler     http.HandlerFunc
		want        *Config
		unavailable bool
		errText     []string // substrings of a non-unavailable error
	}{
		{
			name:    "404 is no configuration",
			handler: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
		},
		{
			name:    "empty object",
			handler: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{}`) },
			want:    &Config{},
		},
		{
			name:        "500",
			handler:     func(w http.ResponseWriter, r *http.Request) { http.Error(w, "database down", 500) },
			unavailable: true,
		},
		{
			name:        "503",
			handler:     func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) },
			unavailable: true,
		},
		{
			name:        "429",
			handler:     func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(429) },
			unavailable: true,
		},
		{
			name:    "403 is a precise error",
			handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "token expired", 403) },
			errText: []string{"403 Forbidden", "token expired"},
		},
		{
			name:    "400",
			handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(400) },
			errText: []string{"unexpected 400 Bad Request"},
		},
		{
			name:    "bad JSON",
			handler: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"target": `) },
			errText: []string{"not JSON"},
		},
		{
			name:    "HTML",
			handler: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `<html>login</html>`) },
			errText: []string{"not JSON"},
		},
		{
			name: "integer that would lose digits",
			handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, `{"parameters": {"build": 12345678901234567890}}`)
			},
			errText: []string{"/parameters/build: the integer 12345678901234567890 cannot be kept exactly"},
		},
		{
			name: "numbers kept",
			handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, `{"parameters": {"build": 9007199254740992, "ratio": 1.5, "big": 1e300}}`)
			},
			want: &Config{Parameters: map[string]any{"build": 9007199254740992.0, "ratio": 1.5, "big": 1e300}},
		},
		{
			name:    "two documents",
			handler: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{} {}`) },
			errText: []string{"more than one value"},
		},
		{
			name:    "unknown field and wrong type",
			handler: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"targets": {}, "regions": "eu-1"}`) },
			errText: []string{`/targets: unknown field "targets"`, "/regions: must be a list of strings, got a string"},
		},
		{
			name:    "not an object",
			handler: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `[1]`) },
			errText: []string{"must be a mapping, got a list"},
		},
		{
			name: "304 with nothing cached",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotModified)
			},
			errText: []string{"304 Not Modified, but nothing is cached"},
		},
		{
			name: "too large",
			handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, `{"parameters": {"a": "%s"}}`, strings.Repeat("x", maxSize))
			},
			errText: []string{"larger than"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			h := &HTTP{URL: srv.URL + "/{environment}/{application}"}
			cfg, rev, err := h.Get(context.Background(), "billing", "prod")
			if rev.Source != srv.URL+"/prod/billing" {
				t.Errorf("source = %q", rev.Source)
			}
			switch {
			case tt.unavailable:
				if !errors.Is(err, ErrUnavailable) || manent.ErrorCode(err) != manent.EUnavailable {
					t.Fatalf("error = %v, want ErrUnavailable", err)
				}
			case tt.errText != nil:
				if err == nil || errors.Is(err, ErrUnavailable) {
					t.Fatalf("error = %v, want a non-unavailable error", err)
				}
				for _, w := range tt.errText {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(cfg, tt.want) {
					t.Errorf("got %#v, want %#v", cfg, tt.want)
				}
				if (cfg == nil) != (rev.Revision == "") {
					t.Errorf("revision %q with configuration %v", rev.Revision, cfg)
				}
			}
		})
	}
}

func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: unblocks the handler before Close

	h := &HTTP{URL: srv.URL + "/{environment}", Timeout: 50 * time.Millisecond}
	start := time.Now()
	_, _, err := h.Get(context.Background(), "billing", "prod")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "no answer within 50ms") {
		t.Errorf("error %q does not say it timed out", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Get took %s with a 50ms timeout", d)
	}
}

func TestHTTPCallerCancelled(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, _, err := (&HTTP{URL: srv.URL + "/{environment}"}).Get(ctx, "billing", "prod")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("error = %v, want context.Canceled (the caller gave up, the source did not fail)", err)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, rev, err := (&HTTP{URL: url + "/{environment}"}).Get(context.Background(), "billing", "prod")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error = %v, want ErrUnavailable", err)
	}
	if rev.Source != url+"/prod" {
		t.Errorf("source = %q", rev.Source)
	}
}

func TestHTTPRedactsCredentials(t *testing.T) {
	srv := newConfigServer(t, `{}`, "")
	u := strings.Replace(srv.URL, "http://", "http://user:secret@", 1)
	_, rev, err := (&HTTP{URL: u + "/{environment}"}).Get(context.Background(), "billing", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rev.Source, "secret") {
		t.Errorf("source %q shows the password", rev.Source)
	}
	if user, pw, _ := srv.last().BasicAuth(); user != "user" || pw != "secret" {
		t.Errorf("basic auth = %q %q", user, pw)
	}
}

func TestHTTPRefusesBadNames(t *testing.T) {
	srv := newConfigServer(t, `{}`, "")
	_, _, err := (&HTTP{URL: srv.URL + "/{environment}"}).Get(context.Background(), "billing", "../admin")
	if manent.ErrorCode(err) != manent.EInvalid {
		t.Fatalf("error = %v, want EInvalid", err)
	}
}

func TestHTTPConcurrent(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		etag := fmt.Sprintf(`"%d"`, n.Add(1)%3)
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprintf(w, `{"parameters": {"etag": %q}}`, etag)
	}))
	t.Cleanup(srv.Close)
	h := &HTTP{URL: srv.URL + "/{environment}/{application}"}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			app := []string{"a", "b"}[i%2]
			for range 10 {
				cfg, rev, err := h.Get(context.Background(), app, "prod")
				if err != nil {
					t.Error(err)
					return
				}
				if cfg.Parameters["etag"] != rev.Revision {
					// A 304 returns the copy cached with the ETag sent, which
					// another goroutine may have replaced since: the body must
					// still match the revision reported with it.
					t.Errorf("body of %v returned with revision %s", cfg.Parameters["etag"], rev.Revision)
				}
			}
		})
	}
	wg.Wait()
}

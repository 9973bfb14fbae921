package engine_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// Attacks on the outbound policy (SPEC §11.1 "Outbound requests"), through
// a real node: each request leaves through the egress client of its use.

// An artifact source the operator allowed (server A) redirects to a second
// local server (B) that artifacts.sources does not name: the download is
// refused with a clear error and B never sees a request.
func TestAttackArtifactRedirectToAnotherServer(t *testing.T) {
	t.Parallel()
	var bHits atomic.Int32
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bHits.Add(1)
		w.Write([]byte("not the artifact you allowed"))
	}))
	defer b.Close()
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, b.URL+"/evil.tar.gz", http.StatusFound)
	}))
	defer a.Close()
	f := newFixture(t, enginetest.SQLite(t), 1, func(c *node.Config) {
		c.Artifacts.Sources = []string{a.URL + "/**"}
	})
	rec := f.wait(f.submit(descriptorYAML("shop", "prod", "1", a.URL+"/app.tar.gz", "", "")), 30*time.Second)
	if rec.State != manent.StateError {
		t.Fatalf("state %s (%s), want ERROR", rec.State, rec.Error)
	}
	for _, want := range []string{`redirect from "` + a.URL + `/app.tar.gz" refused`, b.URL + "/evil.tar.gz", "not allowed by artifacts.sources"} {
		if !strings.Contains(rec.Error, want) {
			t.Errorf("error %q does not say %q", rec.Error, want)
		}
	}
	if n := bHits.Load(); n != 0 {
		t.Fatalf("the server outside artifacts.sources got %d requests", n)
	}
}

// A health endpoint redirects to the cloud metadata address: refused
// before any connection, at once (no retries), even in local trial mode
// where loopback and private addresses are allowed.
func TestAttackHealthRedirectToMetadata(t *testing.T) {
	t.Parallel()
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
	}))
	defer h.Close()
	f := newFixture(t, enginetest.SQLite(t), 1)
	url, _ := f.artifact("v1", "one")
	health := fmt.Sprintf("health:\n  - {url: %q, retries: 3, timeout: 20s}\n", h.URL)
	rec := f.wait(f.submitWith(descriptorYAML("shop", "prod", "1", url, "", health), []string{"artifacts", "deploy", "post-test"}), 30*time.Second)
	if rec.State != manent.StateError {
		t.Fatalf("state %s (%s), want ERROR", rec.State, rec.Error)
	}
	if want := "169.254.169.254 is a cloud metadata address, which health.allow does not name"; !strings.Contains(rec.Error, want) {
		t.Fatalf("error %q does not say %q", rec.Error, want)
	}
}

// In a configured server a health check may not reach loopback unless
// health.allow names it; naming it allows it.
func TestAttackHealthLoopbackNeedsHealthAllow(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer h.Close()
	for _, tt := range []struct {
		name  string
		allow []string
		ok    bool
	}{
		{"default", nil, false},
		{"named", []string{h.URL + "/**"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, enginetest.SQLite(t), 1, func(c *node.Config) {
				c.Trial = false
				c.Artifacts.Sources = []string{"file:///**"}
				c.Health.Allow = tt.allow
			})
			url, _ := f.artifact("v1", "one")
			before := hits.Load()
			// The target directory lies under plugins.local.root (the data
			// directory's targets/ by default), as a configured server asks.
			health := fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\nhealth:\n  - {url: %q}\n", filepath.Join(f.targets, "shop"), h.URL+"/healthz")
			rec := f.wait(f.submitWith(descriptorYAML("shop", "prod", "1", url, "", health), []string{"artifacts", "post-test"}), 30*time.Second)
			if tt.ok {
				if rec.State != manent.StateSuccess || hits.Load() != before+1 {
					t.Fatalf("state %s (%s), %d requests", rec.State, rec.Error, hits.Load()-before)
				}
				return
			}
			if rec.State != manent.StateError || !strings.Contains(rec.Error, "loopback address, which health.allow does not name") {
				t.Fatalf("state %s, error %q", rec.State, rec.Error)
			}
			if hits.Load() != before {
				t.Fatal("the loopback server got a request")
			}
		})
	}
}

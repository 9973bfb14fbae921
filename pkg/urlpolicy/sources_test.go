package urlpolicy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

func TestSourcesAllowed(t *testing.T) {
	s, err := NewSources([]string{
		"file:///srv/artifacts/**",
		"https://artifacts.example/**",
		"https://cdn.example/releases/*/app.tar.gz",
		"https://mirror.example/a/**/z.tgz",
		"https://*.builds.example/**",
		"http://127.0.0.1:*/**",
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url  string
		want bool
	}{
		{"file:///srv/artifacts/billing/1.4.2.tar.gz", true},
		{"file://localhost/srv/artifacts/billing/1.4.2.tar.gz", true},
		{"file:///srv/artifacts/../../etc/passwd", false},
		{"file:///srv/artifacts/%2e%2e/%2e%2e/etc/passwd", false},
		{"file:///srv/artifacts-evil/x", false},
		{"file:///srv/artifacts", false},
		{"file://fileserver/srv/artifacts/x", false},
		{"https://artifacts.example/billing/1.4.2.tar.gz", true},
		{"https://ARTIFACTS.Example/billing/1.4.2.tar.gz", true},
		{"https://artifacts.example:443/x", true},
		{"https://artifacts.example./x", true},
		{"https://artifacts.example/x.tgz?X-Amz-Signature=abc", true},
		{"https://artifacts.example", true},
		{"https://artifacts.example:8443/x", false},
		{"http://artifacts.example/x", false},
		{"https://artifacts.example.evil.com/x", false},
		{"https://artifacts.example@evil.com/x", false},
		{"https://user:pw@artifacts.example/x", false},
		{"https://evil.com/https://artifacts.example/x", false},
		{"https://artifacts.example/a/../../b", false},
		{"https://artifacts.example/a/%2F..%2Fb", false},
		{"https://cdn.example/releases/1.2/app.tar.gz", true},
		{"https://cdn.example/releases/1/2/app.tar.gz", false},
		{"https://mirror.example/a/z.tgz", true},
		{"https://mirror.example/a/b/c/z.tgz", true},
		{"https://mirror.example/az.tgz", false},
		{"https://ci.builds.example/x", true},
		{"https://a.b.builds.example/x", true},
		{"https://builds.example/x", false},
		{"https://evilbuilds.example/x", false},
		{"https://ci.builds.example:8443/x", false},
		{"http://127.0.0.1:8000/x", true},
		{"http://127.0.0.1/x", true},
		{"ftp://artifacts.example/x", false},
		{"artifacts.example/x", false},
		{"file:relative/path", false},
		{"::not a url", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := s.Allowed(tt.url)
			if got := err == nil; got != tt.want {
				t.Fatalf("Allowed(%q) = %v, want allowed=%v", tt.url, err, tt.want)
			}
			if err != nil && manent.ErrorCode(err) != manent.EInvalid {
				t.Fatalf("code %s, want invalid", manent.ErrorCode(err))
			}
		})
	}
}

func TestSourcesRefusalMessage(t *testing.T) {
	s, err := NewSources([]string{"file:///srv/artifacts/**", "https://artifacts.example/**"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Allowed("https://evil.example/x.tgz?sig=secret")
	var e *manent.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v", err)
	}
	want := `artifact URL "https://evil.example/x.tgz?…" does not match artifacts.sources (allowed: file:///srv/artifacts/**, https://artifacts.example/**)`
	if e.Message != want {
		t.Fatalf("got  %s\nwant %s", e.Message, want)
	}
	if len(e.Fields) != 1 || e.Fields[0].Path != "/artifact/url" {
		t.Fatalf("fields = %+v, want one at /artifact/url", e.Fields)
	}
	err = s.Allowed("https://user:hunter2@artifacts.example/x")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("got %v, want a refusal not showing the password", err)
	}
	// A directory without "**": the refusal says how to write it.
	dir, err := NewSources([]string{"https://artifacts.example/**", "file:///srv/artifacts/"})
	if err != nil {
		t.Fatal(err)
	}
	err = dir.Allowed("file:///srv/artifacts/app-1.tgz")
	if want := `; "file:///srv/artifacts/" matches that URL only, not the files below it: write "file:///srv/artifacts/**"`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("got %v, want the hint %s", err, want)
	}
	if err := dir.Allowed("file:///elsewhere/app-1.tgz"); err == nil || strings.Contains(err.Error(), "write") {
		t.Fatalf("a URL outside the directory: %v, want no hint", err)
	}
	if err := (Sources{}).Allowed("https://artifacts.example/x"); err == nil || !strings.Contains(err.Error(), "artifacts.sources is empty") {
		t.Fatalf("zero Sources: got %v", err)
	}
}

func TestTrialSources(t *testing.T) {
	s := TrialSources()
	if got := s.Patterns(); !slices.Equal(got, []string{"file://**", "http://**", "https://**"}) {
		t.Fatalf("patterns = %v", got)
	}
	for _, u := range []string{"file:///tmp/a.tgz", "file:///home/me/build/out.tar.gz", "http://127.0.0.1:8000/a.tgz", "https://example.com/a/b.tgz"} {
		if err := s.Allowed(u); err != nil {
			t.Errorf("Allowed(%q) = %v", u, err)
		}
	}
	for _, u := range []string{"ftp://example.com/a", "file://nas/share/a", "s3://bucket/key"} {
		if err := s.Allowed(u); err == nil {
			t.Errorf("Allowed(%q) = nil, want a refusal", u)
		}
	}
	// A path relative to deploy.yml written as a file URL: its first
	// segment is a host. The refusal says how a file URL is written (it
	// read "artifact URL … file URLs must not name a host: file:///path").
	err := s.Allowed("file://hello-1.0.0.tar.gz")
	want := `artifact URL "file://hello-1.0.0.tar.gz": a file URL names no host, only an absolute path on the server's machine (file:///path/to/artifact.tar.gz): "hello-1.0.0.tar.gz" stands where the host goes`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestNewSourcesValidation(t *testing.T) {
	tests := []struct {
		pattern string
		ok      bool
	}{
		{"https://artifacts.example/**", true},
		{"https://[::1]:8080/**", true},
		{"https://artifacts.example:0443/**", true},
		{"ftp://artifacts.example/**", false},
		{"artifacts.example/**", false},
		{"https://**.example/**", false},
		{"https://artifacts.example/**?x=1", false},
		{"https://user@artifacts.example/**", false},
		{"file://nas/share/**", false},
		{"https://artifacts.example:99999/**", false},
		{"https:///path", false},
		{"https://a b/**", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			_, err := NewSources([]string{"file:///ok/**", tt.pattern})
			if got := err == nil; got != tt.ok {
				t.Fatalf("NewSources(%q) = %v, want ok=%v", tt.pattern, err, tt.ok)
			}
			var e *manent.Error
			if err != nil && (!errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Path != "artifacts.sources[1]") {
				t.Fatalf("got %#v, want one field error at artifacts.sources[1]", err)
			}
		})
	}
}

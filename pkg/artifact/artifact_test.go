package artifact_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/artifact"
	"github.com/manent-io/manent/pkg/plugin"
)

// A file:// artifact that is not a regular file fails the artifacts step at
// once, for good: /dev/zero would be copied up to the size limit into the
// work directory, a FIFO (or /dev/stdin of a server in a terminal) would
// block the step forever, and a cancel waits for the running step.
func TestFileArtifactMustBeARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.tar.gz")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f := &artifact.Fetcher{MaxBytes: 1 << 20}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		done := make(chan error, 1)
		go func() { _, err := f.Fetch(context.Background(), "file://"+p, t.TempDir(), ""); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "is not a regular file") || !plugin.IsPermanent(err) {
				t.Errorf("%s: %v, want a permanent \"not a regular file\"", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10s", p)
		}
	}
	ok := filepath.Join(dir, "app.tar.gz")
	if err := os.WriteFile(ok, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Fetch(context.Background(), "file://"+ok, t.TempDir(), ""); err != nil || got.Size != 4 {
		t.Fatalf("a regular file: %+v, %v", got, err)
	}
}

// A signed URL's signature does not reach the step's error (shown to every
// reader of the deploy), whether the server answers an error or none.
func TestFetchErrorsHideTheSignature(t *testing.T) {
	const sig = "c2lnbmF0dXJlLXNlY3JldA"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "expired", http.StatusForbidden)
	}))
	f := &artifact.Fetcher{MaxBytes: 1 << 20, HTTP: srv.Client()}
	_, err := f.Fetch(context.Background(), srv.URL+"/app.tgz?X-Amz-Date=20261205&X-Amz-Signature="+sig, t.TempDir(), "")
	if err == nil || !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("a 403: %v", err)
	}
	if strings.Contains(err.Error(), sig) || !strings.Contains(err.Error(), "X-Amz-Date=20261205") {
		t.Fatalf("error %q: want the signature hidden and the rest of the URL shown", err)
	}
	url := srv.URL
	srv.Close() // nothing listens there now
	_, err = f.Fetch(context.Background(), url+"/app.tgz?sig="+sig, t.TempDir(), "")
	if err == nil || strings.Contains(err.Error(), sig) {
		t.Fatalf("a refused connection: %v, want an error without the signature", err)
	}
}

// A source that stops sending — before it answers or in the middle of the
// body — does not hold the step (and its worker slot) for good: the
// download ends after idle_timeout without a byte, and one that keeps
// trickling ends after timeout. Both are transient: the step retries.
func TestStalledDownloadsEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/silent.tgz": // never answers
		case "/stops.tgz": // answers, sends a byte, then nothing
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
		case "/trickle.tgz": // a byte every 20ms, for ever
			w.Header().Set("Content-Length", "100000")
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-t.C:
					if _, err := w.Write([]byte("x")); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			}
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	f := &artifact.Fetcher{MaxBytes: 1 << 20, HTTP: srv.Client(), IdleTimeout: 300 * time.Millisecond, Timeout: time.Second}
	for path, want := range map[string]string{
		"/silent.tgz":  "no data received for 300ms (artifacts.idle_timeout)",
		"/stops.tgz":   "no data received for 300ms (artifacts.idle_timeout)",
		"/trickle.tgz": "not complete after 1s (artifacts.timeout)",
	} {
		dir := t.TempDir()
		done := make(chan error, 1)
		go func() { _, err := f.Fetch(context.Background(), srv.URL+path, dir, ""); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), srv.URL+path) || plugin.IsPermanent(err) {
				t.Errorf("%s: %v, want a transient error naming the URL and %q", path, err, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the download did not end within 20s", path)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%s: the work directory keeps %d files", path, len(left))
		}
	}
}

// A file:// artifact is read at its real path, and a symbolic link under
// an allowed directory to a file outside it is refused for good: whoever
// may drop a file among the artifacts must not fetch the server's own
// files (or another team's) into a deploy. A link within the allowed
// directory is followed.
func TestFileArtifactSymlinkMustStayAllowed(t *testing.T) {
	allowed, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	inside := filepath.Join(allowed, "real.tar.gz")
	for p, data := range map[string]string{secret: "server secret", inside: "artifact"} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"evil.tar.gz": secret, "good.tar.gz": inside} {
		if err := os.Symlink(target, filepath.Join(allowed, link)); err != nil {
			t.Fatal(err)
		}
	}
	var checked []string
	f := &artifact.Fetcher{MaxBytes: 1 << 20, Files: func(p string) error {
		checked = append(checked, p)
		if !strings.HasPrefix(p, allowed+string(filepath.Separator)) {
			return errors.New("not allowed")
		}
		return nil
	}}
	dir := t.TempDir()
	_, err := f.Fetch(context.Background(), "file://"+filepath.Join(allowed, "evil.tar.gz"), dir, "")
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "symbolic link to "+secret) {
		t.Fatalf("a link out of the allowed directory: %v, want a permanent refusal naming the target", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the refused file reached the work directory: %v", left)
	}
	got, err := f.Fetch(context.Background(), "file://"+filepath.Join(allowed, "good.tar.gz"), t.TempDir(), "")
	if err != nil || got.Size != int64(len("artifact")) {
		t.Fatalf("a link within the allowed directory: %+v, %v", got, err)
	}
	if len(checked) != 2 {
		t.Errorf("checked %v, want the two links' targets", checked)
	}
}

// The check is of the file opened, not of the path a moment before: a link
// to a file outside the allowed directory, swapped for an allowed file
// right after the open (as a writer racing the server would), is refused —
// the bytes read would have been the outside file's.
func TestFileArtifactSwappedAfterOpenIsRefused(t *testing.T) {
	allowed, outside := t.TempDir(), t.TempDir()
	secret, inside := filepath.Join(outside, "secret.tar.gz"), filepath.Join(allowed, "real.tar.gz")
	for p, data := range map[string]string{secret: "server secret", inside: "artifact"} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(allowed, "race.tar.gz")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	artifact.SetAfterOpen(func(p string) {
		// Replace the link with a hard link of the allowed file.
		tmp := link + ".new"
		if err := os.Link(inside, tmp); err != nil {
			t.Error(err)
		}
		if err := os.Rename(tmp, link); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { artifact.SetAfterOpen(nil) })
	f := &artifact.Fetcher{MaxBytes: 1 << 20, Files: func(p string) error {
		if !strings.HasPrefix(p, allowed+string(filepath.Separator)) {
			return errors.New("not allowed")
		}
		return nil
	}}
	dir := t.TempDir()
	got, err := f.Fetch(context.Background(), "file://"+link, dir, "")
	if err == nil {
		b, _ := os.ReadFile(got.Path)
		t.Fatalf("fetched %q, want a refusal", b)
	}
	if !strings.Contains(err.Error(), "changed while it was opened") {
		t.Fatalf("error %v, want the swap noticed", err)
	}
}

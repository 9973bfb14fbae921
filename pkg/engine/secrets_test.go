package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/engine"
)

// A descriptor's `file:` secret that is not a plain file of reasonable size
// fails the secrets step at once with a clear error: /dev/zero would have
// the worker read until its memory is gone, a FIFO would block the step
// forever, a huge file is not a secret.
func TestFileSecretIsBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, engine.MaxSecretFile+1); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ ref, want string }{
		{"file:" + fifo, "is not a regular file"},
		{"file:/dev/zero", "is not a regular file"},
		{"file:" + big, "is larger than"},
		{"file:" + dir, "is not a regular file"},
		{"file:" + filepath.Join(dir, "none"), "does not exist"},
	} {
		type result struct {
			v   string
			err error
		}
		done := make(chan result, 1)
		go func() { v, err := engine.ResolveSecret(tt.ref); done <- result{v, err} }()
		select {
		case r := <-done:
			if r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
				t.Errorf("%s: got %q, %v; want an error with %q", tt.ref, r.v, r.err, tt.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10s", tt.ref)
		}
	}
	for _, ref := range []string{"file:" + ok, "file:" + link} {
		if v, err := engine.ResolveSecret(ref); err != nil || v != "s3cret" {
			t.Errorf("%s: got %q, %v; want the file's content", ref, v, err)
		}
	}
}

// A `file:` secret on a hung network mount (NFS, FUSE: a read Go cannot
// interrupt) no longer holds the secrets step, and its worker slot, for as
// long as the mount hangs: the resolution ends after SecretReadTimeout
// with an error naming the reference, and the reads left hanging are
// bounded — past 16, the next is refused without starting one. The hung
// mount is a resolver that blocks (no FUSE mount can be made here).
func TestHungSecretReadIsBounded(t *testing.T) {
	release := make(chan struct{})
	engine.SetSecretResolver(func(string) (string, error) { <-release; return "", nil })
	timeout := engine.SecretReadTimeout
	engine.SecretReadTimeout = 100 * time.Millisecond
	t.Cleanup(func() {
		engine.SetSecretResolver(nil)
		engine.SecretReadTimeout = timeout
	})
	resolve := func(ref string) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- engine.ResolveSecretWithin(context.Background(), ref) }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10s", ref)
			return nil
		}
	}
	const ref = "file:/mnt/nfs/db-password"
	for i := range 16 {
		if err := resolve(ref); err == nil || !strings.Contains(err.Error(), ref+" was not read within 100ms (a file on a hung network mount?)") {
			t.Fatalf("read %d: %v, want it bounded and naming the reference", i, err)
		}
	}
	if err := resolve(ref); err == nil || !strings.Contains(err.Error(), "16 earlier secret reads of this worker have not returned yet") {
		t.Fatalf("read 17: %v, want it refused without a 17th hung read", err)
	}
	// The mount answers: the reads return and free their places.
	close(release)
	engine.SetSecretResolver(func(string) (string, error) { return "s3cret", nil })
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := resolve(ref)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the mount answered: %v", err)
		}
	}
}

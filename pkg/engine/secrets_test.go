package engine_test

import (
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

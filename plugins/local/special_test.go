package local_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// Something other than a regular file at .manent-owner — a pipe (which an
// open for reading would wait on for ever), a link (to a record of the
// deploy's own environment, or to nowhere), a directory — is no record:
// admission and every action refuse the directory for good, at once,
// saying to remove it; the same put in a parent or a subdirectory of the
// target directory does not hold the nesting search either.
func TestOwnerRecordThatIsNoFileIsRefusedAtOnce(t *testing.T) {
	ctx := context.Background()
	makers := map[string]func(t *testing.T, at string){
		"pipe": func(t *testing.T, at string) {
			if err := syscall.Mkfifo(at, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"link to its own record": func(t *testing.T, at string) {
			rec := filepath.Join(t.TempDir(), "record")
			if err := os.WriteFile(rec, []byte(`{"application":"shop","environment":"prod"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(rec, at); err != nil {
				t.Fatal(err)
			}
		},
		"link to a pipe": func(t *testing.T, at string) {
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(fifo, at); err != nil {
				t.Fatal(err)
			}
		},
		"dangling link": func(t *testing.T, at string) {
			if err := os.Symlink(filepath.Join(t.TempDir(), "none"), at); err != nil {
				t.Fatal(err)
			}
		},
		"directory": func(t *testing.T, at string) {
			if err := os.Mkdir(at, 0o755); err != nil {
				t.Fatal(err)
			}
		},
	}
	// within runs fn, failing the test if it does not return in time (a
	// blocked open never returns: the goroutine is left behind).
	within := func(t *testing.T, what string, fn func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not return in 20s: it waits on the special file", what)
			return nil
		}
	}
	for name, make := range makers {
		for _, where := range []string{"target", "parent", "subdirectory"} {
			t.Run(name+" in "+where, func(t *testing.T) {
				root := t.TempDir()
				target := filepath.Join(root, "srv", "prod")
				at := map[string]string{"target": target, "parent": filepath.Dir(target), "subdirectory": filepath.Join(target, "releases", "1")}[where]
				if err := os.MkdirAll(at, 0o755); err != nil {
					t.Fatal(err)
				}
				make(t, filepath.Join(at, local.OwnerFile))
				art := filepath.Join(t.TempDir(), "app-1.tar.gz")
				writeTarGz(t, art, map[string]string{"index.html": "v1"})
				p := local.New(local.Options{Root: root})
				pc := plugin.Context{DeployID: "dpl_1", Application: "shop", Environment: "prod", Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard}
				actions := []struct {
					name string
					fn   func() error
				}{
					{"admission", func() error { return p.CheckOwner("shop", "prod", pc.With, nil) }},
					{"checkpoint", func() error { _, err := p.Live(ctx, pc); return err }},
				}
				if where == "target" {
					actions = append(actions, struct {
						name string
						fn   func() error
					}{"deploy", func() error { _, err := p.Deploy(ctx, pc); return err }})
				}
				for _, a := range actions {
					err := within(t, a.name, a.fn)
					if err == nil {
						t.Errorf("%s: admitted with a %s at %s", a.name, name, filepath.Join(at, local.OwnerFile))
						continue
					}
					if a.name != "admission" && !plugin.IsPermanent(err) {
						t.Errorf("%s: %v, want a failure for good (it is retried)", a.name, err)
					}
					if !strings.Contains(err.Error(), filepath.Join(at, local.OwnerFile)+" is not a record") || !strings.Contains(err.Error(), "remove it") {
						t.Errorf("%s: %v, want it to name %s as no record and say to remove it", a.name, err, filepath.Join(at, local.OwnerFile))
					}
				}
				if _, err := os.Lstat(filepath.Join(target, "current")); err == nil {
					t.Errorf("current was made beside a %s", name)
				}
			})
		}
	}
}

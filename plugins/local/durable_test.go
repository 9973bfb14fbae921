package local_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// A step recorded done must survive a power loss: the deploy step flushes
// every file and directory of the release to disk before it renames the
// release into place, and the releases directory after; activation (and its
// rollback) flushes the target directory before and after it switches
// `current`, so that `current` never points at a release whose files a
// power loss took back, nor back where it was once the step is recorded.
//
// The test records each flush and what the disk shows at that moment; it
// cannot cut the power, so it checks the order a power loss depends on,
// not the disk's behaviour.
func TestReleaseIsOnDiskBeforeCurrentPointsAtIt(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	art := filepath.Join(dir, "app-2.tar.gz")
	writeTarGz(t, art, map[string]string{"index.html": "v2", "static/app.js": "js"})
	p := local.New(local.Options{})

	type flush struct {
		path    string
		current string // what current pointed at then
		final   bool   // releases/2 existed then
	}
	var flushes []flush
	local.SetSync(p, func(path string) error {
		cur, _ := os.Readlink(filepath.Join(target, "current"))
		_, err := os.Stat(filepath.Join(target, "releases", "2"))
		flushes = append(flushes, flush{path, cur, err == nil})
		return nil
	})
	ctx := context.Background()
	pc := plugin.Context{DeployID: "dpl_2", Version: "2", Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard}
	cp, err := p.Live(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}

	// deploy: the files and directories of the release, while it is still
	// the temporary directory; then releases/ and the target directory.
	if _, err := p.Deploy(ctx, pc); err != nil {
		t.Fatal(err)
	}
	var before, after []string
	for _, f := range flushes {
		rel, _ := filepath.Rel(target, f.path)
		if !f.final {
			// The names under the temporary directory, as they will be in the release.
			if i := strings.Index(rel, string(filepath.Separator)+".tmp-"); i >= 0 {
				rest := rel[i+1:]
				if j := strings.IndexByte(rest, filepath.Separator); j >= 0 {
					before = append(before, rest[j+1:])
				} else {
					before = append(before, ".")
				}
				continue
			}
		}
		after = append(after, rel)
	}
	slices.Sort(before)
	if want := []string{".", "index.html", "static", "static/app.js"}; !slices.Equal(before, want) {
		t.Fatalf("deploy flushed %q of the release before renaming it into place, want %q (all flushes: %+v)", before, want, flushes)
	}
	if !slices.Contains(after, "releases") {
		t.Fatalf("deploy did not flush releases/ once the release was in place (flushes after: %q)", after)
	}

	// activation: the target directory once current points at the release.
	flushes = nil
	if _, err := p.Activate(ctx, pc); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(flushes, func(f flush) bool { return f.path == target && f.current == filepath.Join("releases", "2") }) {
		t.Fatalf("activation did not flush %s once current pointed at releases/2: %+v", target, flushes)
	}

	// rollback:activation (nothing was live): current removed, then flushed.
	flushes = nil
	if _, err := p.RollbackActivation(ctx, pc, cp); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(flushes, func(f flush) bool { return f.path == target && f.current == "" }) {
		t.Fatalf("rollback:activation did not flush %s once current was removed: %+v", target, flushes)
	}
	var c local.Checkpoint
	_ = json.Unmarshal(cp, &c)
	if c.Release != "" {
		t.Fatalf("checkpoint %s: want nothing live", cp)
	}
}

// A flush that fails fails the step, retryably: the release may not be on
// disk, so the step must not be recorded done.
func TestFailedFlushFailsTheStep(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := local.New(local.Options{})
	local.SetSync(p, func(path string) error { return &os.PathError{Op: "fsync", Path: path, Err: os.ErrInvalid} })
	pc := plugin.Context{DeployID: "dpl_1", Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard}
	_, err := p.Deploy(context.Background(), pc)
	if err == nil || plugin.IsPermanent(err) || !strings.Contains(err.Error(), "fsync") {
		t.Fatalf("deploy with failing flushes: %v, want a retryable error naming fsync", err)
	}
}

func writeTarGz(t *testing.T, path string, files map[string]string) {
	t.Helper()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(out)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// A deploy killed while it unpacked (releases/.tmp-…) or swapped a release
// in (releases/.old-…), and never run again (cancelled, given up), leaves
// its directory behind; keep_releases does not count dot-names. The next
// deploy of the environment — the only one running in its directory —
// removes them and says so.
func TestNextDeployRemovesWhatAKilledDeployLeft(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	art := filepath.Join(dir, "app-2.tar.gz")
	writeTarGz(t, art, map[string]string{"index.html": "v2"})
	for _, left := range []string{".tmp-1-dpl_dead", ".old-1-dpl_dead", ".tmp-2-dpl_other"} {
		if err := os.MkdirAll(filepath.Join(target, "releases", left, "static"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(target, "releases", left, "static", "big.bin"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	p := local.New(local.Options{})
	if _, err := p.Deploy(context.Background(), plugin.Context{DeployID: "dpl_2", Application: "shop", Environment: "prod", Version: "2", Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: &log}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(target, "releases"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"2"}) {
		t.Errorf("releases/ holds %q, want only 2", names)
	}
	for _, left := range []string{".tmp-1-dpl_dead", ".old-1-dpl_dead", ".tmp-2-dpl_other"} {
		if !strings.Contains(log.String(), "removed releases/"+left) {
			t.Errorf("log %q does not name %s", log.String(), left)
		}
	}
}

package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// The root is checked again when the target acts: a link made after the
// deploy was admitted does not lead it out of plugins.local.root.
func TestRootCheckedAtDeploy(t *testing.T) {
	dir := t.TempDir()
	root, outside := filepath.Join(dir, "targets"), filepath.Join(dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := local.New(local.Options{Root: root})
	with := map[string]any{"dir": filepath.Join(root, "billing", "prod")}
	if err := p.Validate(with); err != nil {
		t.Fatalf("a dir under the root: %v", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "billing")); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	pc := plugin.Context{DeployID: "dpl_1", Version: "1", Step: "deploy", Artifact: art, With: with, Log: &log}
	_, err := p.Deploy(context.Background(), pc)
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "outside this server's local root") {
		t.Fatalf("Deploy through a link out of the root: %v, want a permanent refusal", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the local target wrote outside its root: %v", entries)
	}
}

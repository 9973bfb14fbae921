package local_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// Deploying again the version that is live (or another version whose
// directory name is the same) must not touch the live files before
// activation: a failed post-test or a cancel then rolls back to a release
// that is still what it was.
func TestRedeployOfTheLiveVersionLeavesItUntouched(t *testing.T) {
	for _, tc := range []struct{ name, first, second string }{
		{"same version", "1.0", "1.0"},
		{"same directory name", "1.0_1", "1.0+1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "target")
			p := local.New(local.Options{})
			ctx := context.Background()
			deploy := func(id, version, content string) plugin.Context {
				t.Helper()
				art := filepath.Join(dir, id, "app.txt")
				if err := os.MkdirAll(filepath.Dir(art), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(art, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				pc := plugin.Context{DeployID: id, Version: version, Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard}
				if _, err := p.Deploy(ctx, pc); err != nil {
					t.Fatalf("deploy %s: %v", id, err)
				}
				if _, err := p.Health(ctx, pc); err != nil {
					t.Fatalf("health %s: %v", id, err)
				}
				return pc
			}
			liveContent := func() string {
				t.Helper()
				b, err := os.ReadFile(filepath.Join(target, "current", "app.txt"))
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}

			a := deploy("dpl_a", tc.first, "old")
			if _, err := p.Activate(ctx, a); err != nil {
				t.Fatal(err)
			}
			cp, err := p.Live(ctx, a)
			if err != nil {
				t.Fatal(err)
			}

			b := deploy("dpl_b", tc.second, "new")
			if got := liveContent(); got != "old" {
				t.Fatalf("after the deploy step of a redeploy, the live release serves %q, want the old files untouched", got)
			}
			// The post-test failed: the deploy is rolled back.
			if _, err := p.RollbackActivation(ctx, b, cp); err != nil {
				t.Fatal(err)
			}
			if _, err := p.RollbackDeploy(ctx, b, cp); err != nil {
				t.Fatal(err)
			}
			if got := liveContent(); got != "old" {
				t.Fatalf("after rolling back the redeploy, the live release serves %q, want %q", got, "old")
			}
			entries, _ := os.ReadDir(filepath.Join(target, "releases"))
			if len(entries) != 1 {
				t.Fatalf("releases after the rollback: %v, want only the live one", entries)
			}

			// Deployed again and activated, the new files go live.
			c := deploy("dpl_c", tc.second, "newer")
			if _, err := p.Activate(ctx, c); err != nil {
				t.Fatal(err)
			}
			if got := liveContent(); got != "newer" {
				t.Fatalf("after activation the live release serves %q, want %q", got, "newer")
			}
			var now local.Checkpoint
			raw, _ := p.Live(ctx, c)
			if err := json.Unmarshal(raw, &now); err != nil {
				t.Fatal(err)
			}
			var before local.Checkpoint
			_ = json.Unmarshal(cp, &before)
			if now.Release == before.Release {
				t.Fatalf("current still names %s after activating a redeploy", now.Release)
			}
			// And a rollback of that activation restores the first files.
			if _, err := p.RollbackActivation(ctx, c, cp); err != nil {
				t.Fatal(err)
			}
			if got := liveContent(); got != "old" {
				t.Fatalf("after rolling back the activation the live release serves %q, want %q", got, "old")
			}
			// Redeploys of the same version do not pile up copies: each
			// keeps the live one and its own.
			for i, id := range []string{"dpl_d", "dpl_e", "dpl_f"} {
				x := deploy(id, tc.second, id)
				if _, err := p.Activate(ctx, x); err != nil {
					t.Fatal(err)
				}
				if got := liveContent(); got != id {
					t.Fatalf("redeploy %d: the live release serves %q, want %q", i, got, id)
				}
			}
			entries, _ = os.ReadDir(filepath.Join(target, "releases"))
			if len(entries) > 3 {
				t.Fatalf("releases after three more redeploys: %v, want at most the plain one, the previous and the live copy", entries)
			}
		})
	}
}

// A rollback whose release was removed from outside fails, rather than
// pointing `current` at nothing and reporting success.
func TestRollbackToARemovedReleaseFails(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	p := local.New(local.Options{})
	ctx := context.Background()
	pcs := map[string]plugin.Context{}
	for _, v := range []string{"1.0", "2.0"} {
		art := filepath.Join(dir, v, "app.txt")
		if err := os.MkdirAll(filepath.Dir(art), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(art, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		pc := plugin.Context{DeployID: "dpl_" + v, Version: v, Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard}
		if _, err := p.Deploy(ctx, pc); err != nil {
			t.Fatal(err)
		}
		pcs[v] = pc
	}
	if _, err := p.Activate(ctx, pcs["1.0"]); err != nil {
		t.Fatal(err)
	}
	cp, _ := p.Live(ctx, pcs["1.0"])
	if _, err := p.Activate(ctx, pcs["2.0"]); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(target, "releases", "1.0")); err != nil {
		t.Fatal(err)
	}
	_, err := p.RollbackActivation(ctx, pcs["2.0"], cp)
	if err == nil || !plugin.IsPermanent(err) {
		t.Fatalf("rollback to a removed release: %v, want a permanent error", err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "current", "app.txt")); err != nil || string(b) != "2.0" {
		t.Fatalf("current after the refused rollback: %q, %v; want 2.0 still live", b, err)
	}
}

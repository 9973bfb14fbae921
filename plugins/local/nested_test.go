package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// own records app/env as the owner of dir, as a first deploy does.
func own(t *testing.T, dir, app, env string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"application":%q,"environment":%q}`, app, env)
	if err := os.WriteFile(filepath.Join(dir, local.OwnerFile), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A target directory inside another environment's (its releases/, its
// current) or holding one is refused at admission and at the checkpoint:
// a deploy there would prune, clean up or overwrite the other's live
// files. The owner itself, and a rollout's targets under its directory,
// stay allowed.
func TestNestedDirectoriesAreRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		owned string // relative to the temporary root, owned by shop/prod
		dir   string // with.dir of shop/staging
		want  string
	}{
		{"inside its releases", "srv/prod", "srv/prod/releases/x", "inside"},
		{"its current", "srv/prod", "srv/prod/current", "inside"},
		{"deep inside", "srv/prod", "srv/prod/a/b/c/d/e", "inside"},
		{"holding it", "srv/prod", "srv", "holds"},
		{"holding it two levels down", "srv/shop/prod", "srv", "holds"},
		{"holding it in releases", "srv/releases/x", "srv", "holds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			owned := filepath.Join(root, c.owned)
			own(t, owned, "shop", "prod")
			dir := filepath.Join(root, c.dir)
			p := local.New(local.Options{Root: root})
			with := map[string]any{"dir": dir}
			err := p.CheckOwner("shop", "staging", with, nil)
			var se *plugin.SettingError
			if err == nil || !errors.As(err, &se) || se.Path != "dir" || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), owned) || !strings.Contains(err.Error(), `application "shop" environment "prod"`) {
				t.Errorf("admission: %v, want a setting error at dir saying it %s %s of shop/prod", err, c.want, owned)
			}
			_, err = p.Live(ctx, plugin.Context{DeployID: "dpl_1", Application: "shop", Environment: "staging", Version: "1", With: with, Log: io.Discard})
			if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), owned) {
				t.Errorf("checkpoint: %v, want a permanent error naming %s", err, owned)
			}
			// The owner itself may deploy there (its own layout).
			if err := p.CheckOwner("shop", "prod", with, nil); err != nil {
				t.Errorf("admission of the owner: %v", err)
			}
		})
	}
}

// A rollout's directory and its targets' directories under it belong to
// one environment: nesting of the same owner is no conflict.
func TestRolloutTargetsNestUnderTheirOwnDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "shop")
	art := filepath.Join(root, "app-1.tar.gz")
	writeTarGz(t, art, map[string]string{"index.html": "v1"})
	p := local.New(local.Options{Root: root})
	pc := plugin.Context{DeployID: "dpl_1", Application: "shop", Environment: "prod", Version: "1", Step: "deploy", Artifact: art, Targets: []string{"eu-1", "us-1"}, Wave: "all", With: map[string]any{"dir": dir}, Log: io.Discard}
	if _, err := p.Deploy(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckOwner("shop", "prod", pc.With, pc.Targets); err != nil {
		t.Errorf("admission: %v", err)
	}
	if _, err := p.Live(context.Background(), pc); err != nil {
		t.Errorf("checkpoint: %v", err)
	}
	if err := p.CheckOwner("shop", "staging", map[string]any{"dir": root}, nil); err == nil {
		t.Error("shop/staging admitted into a directory holding shop/prod's")
	}
}

// The search below a directory is bounded: a directory holding more
// entries two levels down than it looks at is refused unless it is the
// environment's own already, and with.dir "/" does not walk the disk.
func TestNestedSearchIsBounded(t *testing.T) {
	restore := local.SetNestedBudget(50)
	defer restore()
	root := t.TempDir()
	big := filepath.Join(root, "big")
	for i := range 60 {
		if err := os.MkdirAll(filepath.Join(big, fmt.Sprint(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := local.New(local.Options{})
	err := p.CheckOwner("shop", "staging", map[string]any{"dir": big}, nil)
	if err == nil || !strings.Contains(err.Error(), "more than 50 entries") {
		t.Errorf("admission: %v, want a refusal saying the directory holds more than 50 entries", err)
	}
	own(t, big, "shop", "staging")
	if err := p.CheckOwner("shop", "staging", map[string]any{"dir": big}, nil); err != nil {
		t.Errorf("admission of the owner of a big directory: %v", err)
	}
	restore()
	start := time.Now()
	_ = p.CheckOwner("shop", "staging", map[string]any{"dir": "/"}, nil)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("admission of with.dir / took %s", d)
	}
}

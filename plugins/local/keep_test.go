package local_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// with.keep_releases bounds the releases kept under releases/: each deploy
// removes the oldest beyond it, never the live one (its rollback), and a
// rollback of the newest deploy still finds the release before it.
func TestKeepReleases(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	p := local.New(local.Options{})
	ctx := context.Background()
	var log strings.Builder
	releases := func() []string {
		entries, _ := os.ReadDir(filepath.Join(target, "releases"))
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	var last plugin.Context
	var cp json.RawMessage
	for i, v := range []string{"1", "2", "3", "4", "5"} {
		art := filepath.Join(dir, v+".txt")
		if err := os.WriteFile(art, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		pc := plugin.Context{DeployID: "dpl_" + v, Version: v, Step: "deploy", Artifact: art,
			With: map[string]any{"dir": target, "keep_releases": float64(3)}, Log: &log}
		var err error
		if cp, err = p.Live(ctx, pc); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Deploy(ctx, pc); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Activate(ctx, pc); err != nil {
			t.Fatal(err)
		}
		if got := len(releases()); got != min(i+1, 3) {
			t.Fatalf("after version %s: releases %v, want %d", v, releases(), min(i+1, 3))
		}
		// Distinct unpack times, whatever the file system's granularity.
		old := time.Now().Add(time.Duration(i-10) * time.Minute)
		if err := os.Chtimes(filepath.Join(target, "releases", v), old, old); err != nil {
			t.Fatal(err)
		}
		last = pc
	}
	if got := releases(); !slices.Equal(got, []string{"3", "4", "5"}) {
		t.Fatalf("releases %v, want the three newest", got)
	}
	if !strings.Contains(log.String(), "removed releases/1 (keep_releases 3)") {
		t.Fatalf("log does not say what was removed:\n%s", log.String())
	}
	if _, err := p.RollbackActivation(ctx, last, cp); err != nil {
		t.Fatalf("rollback of the newest deploy: %v", err)
	}
	if cur, _ := os.Readlink(filepath.Join(target, "current")); filepath.Base(cur) != "4" {
		t.Fatalf("current -> %s after the rollback, want releases/4", cur)
	}
	// However the number arrives (YAML at admission, JSON in the workflow).
	for _, good := range []any{3, int64(3), float64(1e6), json.Number("1000000")} {
		if err := p.Validate(map[string]any{"dir": target, "keep_releases": good}); err != nil {
			t.Errorf("keep_releases %#v: %v", good, err)
		}
	}
	for _, bad := range []any{float64(1), "three", true, 2.5, json.Number("2.5"), float64(1e20)} {
		if err := p.Validate(map[string]any{"dir": target, "keep_releases": bad}); err == nil ||
			!strings.Contains(err.Error(), "keep_releases must be an integer of at least 2") {
			t.Errorf("keep_releases %v: %v", bad, err)
		}
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// `manent validate` (the dry run) reports exactly what the run does
// (SPEC §11.2): in local trial mode the effective rollback policy and
// target of the dry run are those the config step records; an unknown
// target plugin is a 422 at validate time, not a failure in config.
func TestValidateMatchesTheRun(t *testing.T) {
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	desc := simple(artifactFile(t), "staging", "1", "")

	dry, err := c.Submit(ctx, desc, true)
	if err != nil {
		t.Fatal(err)
	}
	var eff struct {
		Target   struct{ Plugin string } `json:"target"`
		Rollback struct {
			Enabled bool     `json:"enabled"`
			On      []string `json:"on"`
		} `json:"rollback"`
	}
	b, _ := json.Marshal(dry.Effective)
	if err := json.Unmarshal(b, &eff); err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(ctx, desc, false)
	if err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, c, res.ID, manent.StateSuccess)
	var ran struct {
		Target   struct{ Plugin string } `json:"target"`
		Rollback struct {
			Enabled bool     `json:"enabled"`
			On      []string `json:"on"`
		} `json:"rollback"`
	}
	for _, s := range d.Steps {
		if s.Name == manent.StepConfig {
			if err := json.Unmarshal(s.Output, &ran); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !eff.Rollback.Enabled || eff.Target.Plugin != "local" {
		t.Fatalf("dry run: target %q rollback %+v, want local with rollback enabled (trial mode)", eff.Target.Plugin, eff.Rollback)
	}
	if ran.Rollback.Enabled != eff.Rollback.Enabled || ran.Target.Plugin != eff.Target.Plugin || len(ran.Rollback.On) != len(eff.Rollback.On) {
		t.Fatalf("the run used target %q rollback %+v; validate said target %q rollback %+v", ran.Target.Plugin, ran.Rollback, eff.Target.Plugin, eff.Rollback)
	}

	_, err = c.Submit(ctx, simple(artifactFile(t), "staging", "2", "target: {plugin: helm}\n"), true)
	var me *manent.Error
	if !errorsAs(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/target/plugin" {
		t.Fatalf("validate of an unknown target plugin: %v, want a 422 at /target/plugin", err)
	}
}

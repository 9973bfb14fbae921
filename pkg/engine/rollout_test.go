package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// Three waves where the second fails its health gate: the third never
// starts and the started waves are compensated in reverse order.
func TestRolloutSecondWaveFailsHealthGate(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v1", "one")
		marks := filepath.Join(f.dir, "marks")
		cmd := fmt.Sprintf(`echo "$MANENT_STEP" >> %s; [ "$MANENT_STEP" != "health-gate[two]" ]`, marks)
		yml := descriptorYAML("api", "prod", "1", url, "", `rollout:
  waves:
    - {name: one, targets: [eu-1]}
    - {name: two, targets: [eu-2, eu-3], observe: 100ms}
    - {name: three, targets: [us-1]}
`)
		d, err := descriptor.Parse([]byte(yml))
		if err != nil {
			t.Fatal(err)
		}
		id := f.submit(yml, withRollback, func(in *engine.Input) {
			in.Target = descriptor.Target{Plugin: "script", With: map[string]any{"command": []any{"sh", "-c", cmd}}}
			in.Waves = engine.WavesOf(d.Rollout)
		})
		rec := f.wait(id, 60*time.Second)
		if rec.State != manent.StateError || rec.Rollback != manent.RollbackCompleted {
			t.Fatalf("state %s rollback %q (%s), want ERROR with rollback completed", rec.State, rec.Rollback, rec.Error)
		}
		if !strings.HasPrefix(rec.Error, `step "health-gate[two]" failed`) {
			t.Errorf("error %q", rec.Error)
		}
		b, _ := os.ReadFile(marks)
		got := strings.Join(strings.Fields(string(b)), ",")
		want := "deploy[one],post-test[one],activation[one],health-gate[one]," +
			"deploy[two],post-test[two],activation[two],health-gate[two]," +
			"rollback:activation[two],rollback:deploy[two],rollback:activation[one],rollback:deploy[one]"
		if got != want {
			t.Fatalf("actions:\n got %s\nwant %s", got, want)
		}
		full, err := f.eng.Refresh(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var states []string
		for _, w := range full.Rollout {
			states = append(states, w.Name+"="+w.State)
		}
		if strings.Join(states, ",") != "one=rolled-back,two=rolled-back,three=pending" {
			t.Fatalf("rollout status %v", states)
		}
		for _, s := range []string{"deploy[three]", "activation[three]"} {
			if st := step(t, full, s); st.State != manent.StepSkipped {
				t.Errorf("%s = %s, want SKIPPED", s, st.State)
			}
		}
		evs, _ := f.st.Events(context.Background(), id, 0, []string{"rollout"}, 0)
		var observing bool
		for _, e := range evs {
			observing = observing || strings.Contains(string(e.Data), `"observing"`)
		}
		if !observing {
			t.Error("no rollout event for wave two's observation time")
		}
	})
}

// The local plugin deploys each wave's targets into <dir>/<target>.
func TestRolloutLocalTargets(t *testing.T) {
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "one")
	yml := descriptorYAML("site", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: a, targets: [eu-1]}\n    - {name: b, targets: [eu-2, us-1]}\n")
	d, _ := descriptor.Parse([]byte(yml))
	id := f.submit(yml, withRollback, func(in *engine.Input) { in.Waves = engine.WavesOf(d.Rollout) })
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	for _, target := range []string{"eu-1", "eu-2", "us-1"} {
		b, err := os.ReadFile(filepath.Join(f.targets, "site", "prod", target, "current", "index.html"))
		if err != nil || string(b) != "one" {
			t.Errorf("%s: %q %v", target, b, err)
		}
	}
	full, _ := f.eng.Refresh(context.Background(), id)
	for _, w := range full.Rollout {
		if w.State != engine.WaveHealthy {
			t.Errorf("wave %s = %s, want healthy", w.Name, w.State)
		}
	}
}

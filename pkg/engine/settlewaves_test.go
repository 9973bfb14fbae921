package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// A wave shown rolled-back whose rollback:deploy did not succeed in the
// end (its worker died after the undo reported success, before the step's
// end was saved, and the undo run again failed) is settled as failed when
// the deploy concludes: status must not say a wave was undone that still
// runs the release. A wave whose undo succeeded stays rolled-back.
func TestSettleWavesUndoesARolledBackThatDidNotHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, reg, adm := openParts(t, enginetest.SQLite(t))
	e, err := New(ctx, st, Config{ExecutorID: "settle", DataDir: t.TempDir(), Plugins: reg, Admitter: adm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Shutdown(time.Second) })
	waves := []plan.Wave{{Name: "one", Targets: []string{"eu-1"}}, {Name: "two", Targets: []string{"eu-2"}}}
	r := &run{e: e, in: plan.Input{ID: manent.NewDeploymentID(), Waves: waves}, outputs: map[string]json.RawMessage{},
		undone: map[string]bool{waveStepName(manent.StepDeploy, "one"): true}}
	err = st.Tx(ctx, func(tx *sql.Tx) error {
		return st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: r.in.ID, Application: "api",
			Environment: "prod", Version: "1", State: manent.StatePending, Requester: "token:t", CreatedAt: time.Now()}, Input: []byte(`{}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range waves {
		r.waveEvent(ctx, &r.in.Waves[i], WaveRolledBack, "")
	}
	if err := r.settleWaves(ctx, Result{State: manent.StateError, Error: `step "health-gate[two]" failed`, Rollback: manent.RollbackFailed}); err != nil {
		t.Fatal(err)
	}
	recorded, err := st.Rollout(ctx, r.in.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]manent.WaveStatus{}
	for _, w := range recorded {
		got[w.Name] = w
	}
	if got["one"].State != WaveRolledBack {
		t.Errorf("wave one = %+v, want rolled-back (its undo succeeded)", got["one"])
	}
	if got["two"].State != WaveFailed {
		t.Errorf("wave two = %+v, want failed: its rollback:deploy did not succeed", got["two"])
	}
}

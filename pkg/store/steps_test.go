package store_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

func openStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func insertDeploy(t *testing.T, st *store.Store, id string, steps ...string) {
	t.Helper()
	ctx := context.Background()
	err := st.Tx(ctx, func(tx *sql.Tx) error {
		rec := &store.Record{Deployment: manent.Deployment{ID: id, Application: "app", Environment: "env", Version: "1",
			State: manent.StateEnqueued, Requester: "token:t", CreatedAt: time.Now()}, Input: []byte(`{}`)}
		if err := st.InsertDeployment(ctx, tx, rec); err != nil {
			return err
		}
		return st.PlanSteps(ctx, tx, id, steps)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Each resumption of a step counts; an unknown step counts none.
func TestStepResumed(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_1", "deploy", "smoke")
		for want := 1; want <= 3; want++ {
			if n, err := st.StepResumed(ctx, "dpl_1", "deploy"); err != nil || n != want {
				t.Fatalf("resumption %d: got %d %v", want, n, err)
			}
		}
		if n, err := st.StepResumed(ctx, "dpl_1", "smoke"); err != nil || n != 1 {
			t.Fatalf("another step: got %d %v, want 1", n, err)
		}
		if n, err := st.StepResumed(ctx, "dpl_1", "rollback:deploy"); err != nil || n != 0 {
			t.Fatalf("a step not in the table: got %d %v, want 0", n, err)
		}
	})
}

// A plan is written in one statement and a page of the list reads its
// deploys' steps in one query: each deploy gets its own, in plan order;
// one without steps gets an empty list; an unknown id an empty list.
func TestPlanStepsAndStepsOf(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_a", "config", "deploy", "smoke")
		insertDeploy(t, st, "dpl_b", "deploy", "deploy") // a repeated name is written once
		insertDeploy(t, st, "dpl_c")
		got, err := st.StepsOf(ctx, []string{"dpl_a", "dpl_b", "dpl_c", "dpl_none"})
		if err != nil {
			t.Fatal(err)
		}
		names := func(id string) []string {
			var out []string
			for _, s := range got[id] {
				out = append(out, s.Name+":"+string(s.State))
			}
			return out
		}
		for id, want := range map[string][]string{
			"dpl_a": {"config:PENDING", "deploy:PENDING", "smoke:PENDING"}, "dpl_b": {"deploy:PENDING"},
			"dpl_c": nil, "dpl_none": nil,
		} {
			if g := names(id); len(g) != len(want) || (len(want) > 0 && strings.Join(g, ",") != strings.Join(want, ",")) {
				t.Errorf("%s: steps %v, want %v", id, g, want)
			}
			if got[id] == nil {
				t.Errorf("%s: nil steps, want an empty list", id)
			}
		}
		one, err := st.Steps(ctx, "dpl_a")
		if err != nil || len(one) != 3 || one[1].Name != "deploy" {
			t.Fatalf("Steps(dpl_a) = %v, %v", one, err)
		}
	})
}

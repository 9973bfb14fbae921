package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// A decision on a wave is recorded only while the wave waits — its step
// approval[<wave>] runs — under the deploy's row lock: the run ends that
// step under the same lock when it decides, so a verdict that comes after
// (a rejection just after the count was reached) is refused, not answered
// 200 and left uncounted while the wave goes on.
func TestWaveDecisionOnlyWhileTheWaveWaits(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		const step = "approval[rest]"
		insertDeploy(t, st, "dpl_w", "deploy", step, "cleanup")
		decide := func(who, verdict string) error {
			return st.AddWaveApproval(ctx, "dpl_w", "rest", step, manent.Approval{Identity: who, Verdict: verdict, Time: time.Now().UTC()}, nil)
		}
		if err := decide("token:early", "approve"); !errors.Is(err, store.ErrNotAwaitingApproval) {
			t.Fatalf("a decision before the wave waits: %v, want ErrNotAwaitingApproval", err)
		}
		if _, err := st.StepStarted(ctx, "dpl_w", step, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := decide("token:alice", "approve"); err != nil {
			t.Fatalf("a decision while the wave waits: %v", err)
		}
		if _, err := st.StepFinished(ctx, "dpl_w", step, store.StepEnd{State: manent.StepSuccess, Counted: true}); err != nil {
			t.Fatal(err)
		}
		if err := decide("token:bob", "reject"); !errors.Is(err, store.ErrNotAwaitingApproval) {
			t.Fatalf("a rejection once the wave was approved: %v, want ErrNotAwaitingApproval", err)
		}
		as, err := st.WaveApprovals(ctx, "dpl_w", "rest")
		if err != nil || len(as) != 1 || as[0].Identity != "token:alice" {
			t.Fatalf("recorded %+v %v, want alice's approval alone", as, err)
		}
	})
}

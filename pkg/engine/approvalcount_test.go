package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
)

// Approvals arriving while the gate counts never leave a reason that
// counts fewer than the approvals recorded: each verdict writes the
// recounted reason under the deploy's row lock, and the gate counts under
// that lock too, in the transaction that writes its reason. A gate that
// counted before a verdict committed and wrote after it would put the
// count back.
func TestApprovalCountNeverGoesBack(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		url, _ := f.artifact("v1", "x")
		ctx := context.Background()
		approvers := []string{"alice", "bob", "ops", "lead", "dev"}
		rule := &plan.ApprovalRule{Count: len(approvers) + 1, Approvers: []string{"*"}, Expires: time.Hour}
		for round := range 3 {
			id := f.submit(descriptorYAML(fmt.Sprintf("count%d", round), "prod", "1", url, "", ""), waits(plan.Waits{Approvals: rule}))
			enginetest.Eventually(t, 30*time.Second, func() bool {
				return strings.HasPrefix(f.state(id).Reason, "approvals 0/6")
			}, "the gate to count no approval yet; the reason is %q", stateOfReason{f, id})
			// recorded counts the approvals whose call returned; the
			// watcher reads it before the reason.
			var recorded atomic.Int64
			var wrong atomic.Pointer[string]
			stop := make(chan struct{})
			var watcher sync.WaitGroup
			watcher.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					want := recorded.Load()
					rec, err := f.st.Deployment(ctx, id)
					if err != nil {
						msg := err.Error()
						wrong.Store(&msg)
						return
					}
					if n := approvalCount(rec.Reason); n < want {
						msg := fmt.Sprintf("reason %q counts %d after %d approvals were recorded", rec.Reason, n, want)
						wrong.Store(&msg)
						return
					}
				}
			})
			var approving sync.WaitGroup
			errs := make(chan error, len(approvers))
			for _, who := range approvers {
				approving.Go(func() {
					_, err := f.eng.Approve(ctx, id, manent.Identity{Subject: "token:" + who}, manent.Approval{Verdict: "approve"})
					if err == nil {
						recorded.Add(1)
					}
					errs <- err
				})
			}
			approving.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			// The gate, woken by each verdict, counts again for a moment:
			// the watcher goes on reading until it has.
			enginetest.Eventually(t, 30*time.Second, func() bool {
				steps, err := f.eng.GateSteps(id)
				return wrong.Load() != nil || (err == nil && countSteps(steps) > len(approvers))
			}, "the gate to count after every wake")
			close(stop)
			watcher.Wait()
			if msg := wrong.Load(); msg != nil {
				t.Fatalf("round %d: %s", round, *msg)
			}
			if r := f.state(id).Reason; approvalCount(r) != int64(len(approvers)) {
				t.Fatalf("round %d: reason %q, want approvals %d/6", round, r, len(approvers))
			}
		}
	})
}

// countSteps is how many times a gate counted its approvals.
func countSteps(steps []dbos.StepInfo) int {
	n := 0
	for _, s := range steps {
		if strings.HasPrefix(s.StepName, "gate:approvals-") {
			n++
		}
	}
	return n
}

// approvalCount is the count "approvals n/m …" says, -1 for another reason.
func approvalCount(reason string) int64 {
	s, ok := strings.CutPrefix(reason, "approvals ")
	if !ok {
		return -1
	}
	n, _, _ := strings.Cut(s, "/")
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

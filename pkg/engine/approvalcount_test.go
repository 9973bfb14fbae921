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
			wrong := approveWhileWatching(t, f, id, approvers, func(who string) error {
				_, err := f.eng.Approve(ctx, id, manent.Identity{Subject: "token:" + who}, manent.Approval{Verdict: "approve"})
				return err
			}, approvalCount, func() bool {
				// The gate, woken by each verdict, counts again for a
				// moment: the watcher goes on reading until it has.
				steps, err := f.eng.GateSteps(id)
				return err == nil && countSteps(steps) > len(approvers)
			})
			if wrong != "" {
				t.Fatalf("round %d: %s", round, wrong)
			}
			if r := f.state(id).Reason; approvalCount(r) != int64(len(approvers)) {
				t.Fatalf("round %d: reason %q, want approvals %d/6", round, r, len(approvers))
			}
		}
	})
}

// approveWhileWatching calls approve for each of approvers at once while a
// watcher reads deploy id's reason over and over, until every call has
// returned and counted() (the deploy counted after every wake). It returns
// what the watcher found wrong — a reason whose count (by count) is below
// the approvals whose call had returned before it was read, or a failed
// read — "" for nothing; a failed approve call fails t.
func approveWhileWatching(t *testing.T, f *fixture, id string, approvers []string, approve func(who string) error,
	count func(reason string) int64, counted func() bool) string {
	t.Helper()
	ctx := context.Background()
	// recorded counts the approvals whose call returned; the watcher
	// reads it before the reason.
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
			if n := count(rec.Reason); n < want {
				msg := fmt.Sprintf("reason %q counts %d after %d approvals were recorded", rec.Reason, n, want)
				wrong.Store(&msg)
				return
			}
		}
	})
	stopWatching := sync.OnceFunc(func() {
		close(stop)
		watcher.Wait()
	})
	defer stopWatching()
	var approving sync.WaitGroup
	errs := make(chan error, len(approvers))
	for _, who := range approvers {
		approving.Go(func() {
			err := approve(who)
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
	enginetest.Eventually(t, 30*time.Second, func() bool { return wrong.Load() != nil || counted() }, "the deploy to count after every wake")
	stopWatching()
	if msg := wrong.Load(); msg != nil {
		return *msg
	}
	return ""
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
func approvalCount(reason string) int64 { return countAfter(reason, "approvals ") }

// countAfter is the n of "<prefix>n/m …", -1 when reason is not so.
func countAfter(reason, prefix string) int64 {
	s, ok := strings.CutPrefix(reason, prefix)
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

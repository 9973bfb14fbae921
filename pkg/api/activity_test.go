package api_test

import (
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// Why, the words of `manent activity` and the web activity page: a running
// deploy's step, then its reason — its worker is dead (SPEC §11.3) or a
// cancel is pending — which is not dropped; a waiting deploy's reason.
func TestActivityItemWhy(t *testing.T) {
	next := time.Date(2026, 12, 4, 10, 0, 4, 0, time.UTC)
	dead := "worker w2 to be replaced: it is silent (last seen 2026-12-04T10:00:00Z); another worker takes the deploy over within workers.dead_after + 15 s"
	for _, tt := range []struct {
		it   api.ActivityItem
		want string
	}{
		{api.ActivityItem{State: manent.StatePending, Step: "deploy", StepAttempts: 2, Reason: dead}, "running step deploy (attempt 2); " + dead},
		{api.ActivityItem{State: manent.StatePending, Step: "deploy", StepAttempts: 1}, "running step deploy"},
		{api.ActivityItem{State: manent.StatePending, Step: "deploy", StepAttempts: 2, StepMaxAttempts: 5, StepNextAttemptAt: &next},
			"running step deploy: attempt 2 of 5 failed; the next starts at 2026-12-04T10:00:04Z"},
		{api.ActivityItem{State: manent.StatePending, Reason: dead}, "running; " + dead},
		{api.ActivityItem{State: manent.StatePending}, "running"},
		{api.ActivityItem{State: manent.StateEnqueued, Reason: "queued: 2nd in billing/prod"}, "queued: 2nd in billing/prod"},
	} {
		if got := tt.it.Why(); got != tt.want {
			t.Errorf("%+v.Why() = %q, want %q", tt.it, got, tt.want)
		}
	}
}

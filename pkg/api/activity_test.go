package api_test

import (
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// Why, the words of `manent activity` and the web activity page: a running
// deploy's step, then its reason — its worker is dead (SPEC §11.3) or a
// cancel is pending — which is not dropped; a waiting deploy's reason.
func TestActivityItemWhy(t *testing.T) {
	dead := "worker w2 to be replaced: it is silent (last seen 2026-12-04T10:00:00Z); another worker takes the deploy over within workers.dead_after + 15 s"
	for _, tt := range []struct {
		it   api.ActivityItem
		want string
	}{
		{api.ActivityItem{State: manent.StatePending, Step: "deploy", StepAttempts: 2, Reason: dead}, "running step deploy (attempt 2); " + dead},
		{api.ActivityItem{State: manent.StatePending, Step: "deploy", StepAttempts: 1}, "running step deploy"},
		{api.ActivityItem{State: manent.StatePending, Reason: dead}, "running; " + dead},
		{api.ActivityItem{State: manent.StatePending}, "running"},
		{api.ActivityItem{State: manent.StateEnqueued, Reason: "queued: 2nd in billing/prod"}, "queued: 2nd in billing/prod"},
	} {
		if got := tt.it.Why(); got != tt.want {
			t.Errorf("%+v.Why() = %q, want %q", tt.it, got, tt.want)
		}
	}
}

package store_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// A cancel request flags the deploy once: the first request's reason is
// kept, its audit entry (Also) is written with the flag and only by the
// request that set it; a request limited to states the deploy is not in,
// or made to a final deploy, records nothing.
func TestRequestCancelKeepsTheFirstReason(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_1", "deploy")
		alsoRan := 0
		audit := func(tx *sql.Tx) error {
			alsoRan++
			return st.AppendAuditTx(ctx, tx, store.AuditEntry{Identity: "system:manent", Action: "deployment.supersede", Target: "dpl_1", Outcome: "accepted"})
		}

		// Limited to states dpl_1 (ENQUEUED) is not in: nothing.
		s, set, err := st.RequestCancel(ctx, "dpl_1", store.CancelRequest{Reason: "superseded by a", States: []manent.State{manent.StateAwaitingApproval}, Also: audit})
		if err != nil || set || s != manent.StateEnqueued || alsoRan != 0 {
			t.Fatalf("a request for other states: state %s set %v err %v, audit ran %d times; want ENQUEUED, nothing set", s, set, err, alsoRan)
		}
		if c, _ := st.CancelRequested(ctx, "dpl_1"); c {
			t.Fatal("a request for other states flagged the deploy")
		}

		s, set, err = st.RequestCancel(ctx, "dpl_1", store.CancelRequest{Reason: "superseded by b", States: []manent.State{manent.StateEnqueued}, Also: audit})
		if err != nil || !set || s != manent.StateEnqueued || alsoRan != 1 {
			t.Fatalf("first request: state %s set %v err %v, audit ran %d times", s, set, err, alsoRan)
		}
		// A later request (a user's cancel, the tick run again) keeps the
		// first reason and writes no second entry.
		for _, reason := range []string{"cancelled", "superseded by b"} {
			if _, set, err := st.RequestCancel(ctx, "dpl_1", store.CancelRequest{Reason: reason, Also: audit}); err != nil || set {
				t.Fatalf("request %q after the first: set %v err %v", reason, set, err)
			}
		}
		if why, err := st.CancelReason(ctx, "dpl_1"); err != nil || why != "superseded by b" {
			t.Errorf("reason %q (%v), want the first request's", why, err)
		}
		if alsoRan != 1 {
			t.Errorf("the audit entry was written %d times, want once", alsoRan)
		}
		entries, err := st.Audit(ctx, store.AuditFilter{Action: "deployment.supersede"})
		if err != nil || len(entries) != 1 {
			t.Errorf("audit entries %+v (%v), want one", entries, err)
		}
		evs, err := st.Events(ctx, "dpl_1", 0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var logs []string
		for _, e := range evs {
			if e.Type == store.EventLog {
				logs = append(logs, string(e.Data))
			}
		}
		if len(logs) != 1 {
			t.Errorf("log events %q, want the one cancel request", logs)
		}

		// A final deploy is left as it is.
		insertDeploy(t, st, "dpl_2", "deploy")
		if err := st.Finish(ctx, "dpl_2", store.Outcome{State: manent.StateSuccess}); err != nil {
			t.Fatal(err)
		}
		if s, set, err := st.RequestCancel(ctx, "dpl_2", store.CancelRequest{Reason: "cancelled"}); err != nil || set || s != manent.StateSuccess {
			t.Errorf("a final deploy: state %s set %v err %v", s, set, err)
		}
		if why, err := st.CancelReason(ctx, "dpl_2"); err != nil || why != "" {
			t.Errorf("a final deploy's reason %q (%v), want none", why, err)
		}
		if _, err := st.CancelReason(ctx, "dpl_none"); err != store.ErrNotFound {
			t.Errorf("reason of a deploy that does not exist: %v, want ErrNotFound", err)
		}
	})
}

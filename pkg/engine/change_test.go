package engine_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/itsm/reference"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
)

// Change management against the reference ITSM (a real HTTP server): the
// deploy waits in AWAITING_APPROVAL for its change, runs once the change is
// approved, and closes it with the outcome; a rejected change is REJECTED.
func TestChangeTicket(t *testing.T) {
	ref := reference.New()
	srv := httptest.NewServer(ref)
	defer srv.Close()
	f := newFixture(t, enginetest.SQLite(t), 2, func(c *node.Config) {
		c.ITSM.URL = srv.URL
		c.ITSM.Poll = 100 * time.Millisecond
	})
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0001 pending") }, "the deploy to wait for change CHG0001")
	// It needs no approvals in manent: a verdict here would be recorded and
	// ignored (QA had a 200 for a rejection, then SUCCESS) — refused.
	for _, verdict := range []string{"reject", "approve"} {
		_, err := f.eng.Approve(context.Background(), id, manent.Identity{Subject: "token:ops"}, manent.Approval{Verdict: verdict})
		if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(manent.ErrorMessage(err), "change ticket") {
			t.Errorf("%s of a deploy waiting for its change only: %v, want a 409 naming the ticket", verdict, err)
		}
	}
	if as, err := f.st.Approvals(context.Background(), id); err != nil || len(as) != 0 {
		t.Errorf("verdicts recorded: %+v %v", as, err)
	}
	ref.Set("CHG0001", itsm.Approved)
	f.waitState(id, manent.StateSuccess)
	var d *manent.Deployment
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d = f.state(id)
		return d.Steps[len(d.Steps)-1].State == manent.StepSuccess
	}, "change:close to run after the conclusion")
	var names []string
	for _, s := range d.Steps {
		names = append(names, s.Name+"="+string(s.State))
	}
	got := strings.Join(names, ",")
	if !strings.HasPrefix(got, "change:open=SUCCESS,config=SUCCESS") || !strings.HasSuffix(got, "cleanup=SUCCESS,change:close=SUCCESS") {
		t.Fatalf("steps %s", got)
	}
	if c, _ := ref.Get("CHG0001"); c.State != itsm.Closed || c.Outcome != "SUCCESS" {
		t.Fatalf("change after the deploy: %+v, want closed with SUCCESS", c)
	}

	id = f.submit(descriptorYAML("erp", "prod", "2", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0002") }, "change CHG0002 to be opened")
	ref.Set("CHG0002", itsm.Rejected)
	d = f.waitState(id, manent.StateRejected)
	if !strings.Contains(d.Error, "CHG0002") {
		t.Errorf("error %q", d.Error)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool { c, _ := ref.Get("CHG0002"); return c.State == itsm.Closed }, "the rejected change to be closed")
	if c, _ := ref.Get("CHG0002"); c.State != itsm.Closed || c.Outcome != "REJECTED" {
		t.Fatalf("rejected change: %+v, want closed with REJECTED", c)
	}
}

package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
)

// An approval counts while its approver could give it: a static token
// removed from auth.tokens (revoked), or no longer allowed to approve by
// RBAC or by the rule's approvers after a restart with a new
// configuration, no longer counts towards a deploy still waiting, and the
// deploy's reason says whose approval lapsed and why. QA: alice's approval
// still counted after her token was revoked, and bob's one more ran the
// deploy with one valid approval of the three required, the others lapsed.
func TestApprovalOfARevokedApproverLapses(t *testing.T) {
	t.Parallel()
	sre := func(cfg *node.Config) {
		cfg.Auth.Tokens = append(cfg.Auth.Tokens[:1],
			auth.TokenConfig{Name: "alice", SHA256: auth.HashToken("alice-secret"), Groups: []string{"sre"}},
			auth.TokenConfig{Name: "bob", SHA256: auth.HashToken("bob-secret"), Groups: []string{"sre"}},
			auth.TokenConfig{Name: "carol", SHA256: auth.HashToken("carol-secret"), Groups: []string{"sre"}})
		cfg.RBAC = append(cfg.RBAC, auth.RBACRule{Subjects: []string{"group:sre"}, Permissions: []string{string(auth.DeploymentApprove)}})
	}
	f := newFixture(t, enginetest.SQLite(t), 1, sre)
	url, _ := f.artifact("v1", "x")
	rule := &plan.ApprovalRule{Count: 3, Approvers: []string{"group:sre"}, Expires: time.Hour}
	id := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""), waits(plan.Waits{Approvals: rule}))
	f.waitState(id, manent.StateAwaitingApproval)
	ctx := context.Background()
	approve := func(who string) error {
		_, err := f.eng.Approve(ctx, id, manent.Identity{Subject: "token:" + who, Groups: []string{"sre"}}, manent.Approval{Verdict: "approve"})
		return err
	}
	if err := approve("alice"); err != nil {
		t.Fatal(err)
	}
	if err := approve("carol"); err != nil {
		t.Fatal(err)
	}
	// A restart revokes alice's token and moves carol out of sre.
	f.node.Close(5 * time.Second)
	f.cfg.Auth.Tokens = []auth.TokenConfig{f.cfg.Auth.Tokens[0],
		{Name: "bob", SHA256: auth.HashToken("bob-secret"), Groups: []string{"sre"}},
		{Name: "carol", SHA256: auth.HashToken("carol-secret"), Groups: []string{"dev"}}}
	f.open()
	d := f.state(id)
	if d.State != manent.StateAwaitingApproval {
		t.Fatalf("after the restart: %s, want AWAITING_APPROVAL: the approvals of a revoked token and of one no longer in sre counted", stateOf{&d})
	}
	// The gate recounts when it wakes — an approval, a cancel, its poll —
	// and the restart alone need not wake it: a gate that counted carol's
	// approval before the restart waits (CI showed it under load; a gate
	// that had not, recounts at once). Bob's approval wakes it.
	if err := approve("bob"); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool {
		r := f.state(id).Reason
		return strings.Contains(r, "approvals 1/3") && strings.Contains(r, "token:alice") && strings.Contains(r, "no longer a token of this server") &&
			strings.Contains(r, "token:carol")
	}, "bob's approval to count alone, and the reason to say whose approvals lapsed; it is %q", stateOfReason{f, id})
	if d := f.state(id); d.State != manent.StateAwaitingApproval {
		t.Fatalf("with one approval that counts: %s, want AWAITING_APPROVAL", stateOf{&d})
	}
}

type stateOfReason struct {
	f  *fixture
	id string
}

func (s stateOfReason) String() string { return s.f.state(s.id).Reason }

// A restart with a new configuration wakes the gates of waiting deploys:
// each recounts at once, and the deploy's reason no longer counts an
// approval that lapsed — without an approval, a cancel or the gate's
// 5-minute poll to wake it. QA: after alice's token was revoked, status
// still said "approvals 2/3" for up to 5 minutes.
func TestRestartRecountsWaitingApprovals(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		url, _ := f.artifact("v1", "x")
		rule := &plan.ApprovalRule{Count: 3, Approvers: []string{"group:sre"}, Expires: time.Hour}
		id := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""), waits(plan.Waits{Approvals: rule}))
		f.waitState(id, manent.StateAwaitingApproval)
		ctx := context.Background()
		for _, who := range []string{"alice", "bob"} {
			if _, err := f.eng.Approve(ctx, id, manent.Identity{Subject: "token:" + who, Groups: []string{"sre"}}, manent.Approval{Verdict: "approve"}); err != nil {
				t.Fatal(err)
			}
		}
		// The gate counted both and took both wakes (its third count runs
		// after its second receive): no message waits for it, only its
		// poll would wake it.
		waitCounted(t, f, id, f.eng.GateSteps, "gate:approvals-2", "approvals 2/3 ", "the gate to count alice's and bob's approvals after both wakes")
		f.restartRevoking("alice")
		enginetest.Eventually(t, 30*time.Second, func() bool {
			r := f.state(id).Reason
			return strings.HasPrefix(r, "approvals 1/3 ") && strings.Contains(r, "token:alice") && strings.Contains(r, "no longer a token of this server")
		}, "the restart to wake the gate, and the reason to count bob's approval alone and name alice's as lapsed; it is %q", stateOfReason{f, id})
		if d := f.state(id); d.State != manent.StateAwaitingApproval {
			t.Fatalf("with one approval that counts: %s, want AWAITING_APPROVAL", stateOf{&d})
		}
	})
}

// waitCounted waits until deploy id's workflow (its steps read by steps)
// has run the count named step and its reason begins with prefix: what
// came before was counted, and no wake waits for the workflow.
func waitCounted(t *testing.T, f *fixture, id string, steps func(string) ([]dbos.StepInfo, error), step, prefix, what string) {
	t.Helper()
	enginetest.Eventually(t, 30*time.Second, func() bool {
		ran, err := steps(id)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ran, func(s dbos.StepInfo) bool { return s.StepName == step }) &&
			strings.HasPrefix(f.state(id).Reason, prefix)
	}, what+"; the reason is %q", stateOfReason{f, id})
}

// restartRevoking restarts f's node with token name removed from its
// configuration.
func (f *fixture) restartRevoking(name string) {
	f.node.Close(5 * time.Second)
	f.cfg.Auth.Tokens = slices.DeleteFunc(f.cfg.Auth.Tokens, func(c auth.TokenConfig) bool { return c.Name == name })
	f.open()
}

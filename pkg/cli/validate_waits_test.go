package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
)

// `manent validate` says what the deploy will wait for, as the run then
// does: the approvals governance adds, the start time (schedule.at) — in
// its text and in -o json's decision. It printed the plan and the
// effective deploy only, and the deploy then waited for approvals nobody
// had been told of.
func TestValidateSaysWhatTheDeployWaitsFor(t *testing.T) {
	t.Parallel()
	rules := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(rules, []byte("approvals:\n  - {environments: [prod], applications: [\"*\"], count: 2, approvers: [\"group:sre\"], expires: 24h}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, servertest.WithConfig(func(c *node.Config) { c.Governance.Rules = rules }))
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	desc := writeDescriptor(t, "1.0.0")
	at := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	f, err := os.OpenFile(desc, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "schedule: {at: %q}\n", at)
	f.Close()

	code, out, errOut := runCLI(t, env, "validate", "-f", desc)
	if code != 0 {
		t.Fatalf("validate: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"Waits for:", "2 approvals by group:sre (within 24h)", "schedule.at " + at} {
		if !strings.Contains(out, want) {
			t.Errorf("validate does not say %q:\n%s", want, out)
		}
	}
	code, out, errOut = runCLI(t, env, "validate", "-f", desc, "-o", "json")
	var res struct {
		Decision *struct {
			ApprovalsRequired int      `json:"approvals_required"`
			Approvers         []string `json:"approvers"`
		} `json:"decision"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Decision == nil {
		t.Fatalf("validate -o json: exit %d, no decision:\n%s\n%s", code, out, errOut)
	}

	// The run waits for what validate said.
	code, out, errOut = runCLI(t, env, "deploy", "-f", desc)
	id := regexp.MustCompile(`dpl_[0-9A-Z]+`).FindString(out)
	if code != 0 || id == "" {
		t.Fatalf("deploy: exit %d, stdout %q\nstderr:\n%s", code, out, errOut)
	}
	d, err := srv.Client().Deployment(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision == nil || d.Decision.ApprovalsRequired != res.Decision.ApprovalsRequired ||
		strings.Join(d.Decision.Approvers, ",") != strings.Join(res.Decision.Approvers, ",") {
		t.Fatalf("the run's decision %+v, validate's %+v", d.Decision, res.Decision)
	}
}

package cli_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/servertest"
)

// `manent approve --wave NAME` pins the verdict to that wave: against a
// deploy waiting for something else (here its schedule.at), the server
// refuses it (409, exit 1) saying what waits, and records nothing.
// Without the flag a verdict went to whatever the deploy waited for by
// then — the deploy's own approval or the next wave's.
func TestApproveWaveIsPinned(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	desc := writeDescriptor(t, "1.0.0")
	f, err := os.OpenFile(desc, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "schedule: {at: %q}\n", time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339))
	f.Close()
	code, out, errOut := runCLI(t, env, "deploy", "-f", desc)
	id := regexp.MustCompile(`dpl_[0-9A-Z]+`).FindString(out)
	if code != 0 || id == "" {
		t.Fatalf("deploy: exit %d, stdout %q\nstderr:\n%s", code, out, errOut)
	}
	for _, verb := range []string{"approve", "reject"} {
		code, out, errOut = runCLI(t, env, verb, id, "--wave", "rest", "--comment", "canary is fine")
		if code != 1 || !strings.Contains(errOut, "does not wait for the approval of wave \"rest\"") || !strings.Contains(errOut, "DELAYED") {
			t.Fatalf("%s --wave: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 saying the deploy waits for no wave", verb, code, out, errOut)
		}
	}
	d, err := srv.Client().Deployment(t.Context(), id)
	if err != nil || len(d.Approvals) != 0 || d.State != "DELAYED" {
		t.Fatalf("after the refused verdicts: %+v %v; want DELAYED with no approval", d, err)
	}
	if code, _, errOut = runCLI(t, env, "approve", id, "--wave", "rest", "--plan-digest", "abc"); code != 2 || !strings.Contains(errOut, "--plan-digest is for the deploy's own approval") {
		t.Fatalf("--wave with --plan-digest: exit %d\nstderr:\n%s", code, errOut)
	}
}

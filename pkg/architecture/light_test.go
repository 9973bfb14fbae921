package architecture_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestManentIsLight: the manent CLI links neither the Kubernetes client nor
// OPA. Their package initialisers run at every start of a binary that links
// them, whatever the command (4x the memory, twice the start-up time of
// `manent status`); `manent agent` and `manent policy test` run the sibling
// binaries manent-agent and manent-policy instead (pkg/cli/sibling.go).
func TestManentIsLight(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the dependencies: %v", err)
	}
	heavy := []string{"k8s.io/", "sigs.k8s.io/", "github.com/open-policy-agent/"}
	for _, main := range []string{"./cmd/manent"} {
		out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", "../../"+strings.TrimPrefix(main, "./")).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", main, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 50 {
			t.Fatalf("go list -deps %s listed only %d packages: %q", main, len(deps), deps)
		}
		for _, d := range deps {
			for _, h := range heavy {
				if strings.HasPrefix(d, h) {
					t.Errorf("%s links %s: the CLI must not link client-go or OPA; run the command in a sibling binary (pkg/cli/sibling.go)", main, d)
				}
			}
		}
	}
	// The siblings do link them: the check above would see a move of the
	// agent or of the Rego engine back into pkg/cli.
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", "../../cmd/manent-agent", "../../cmd/manent-policy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, want := range []string{"k8s.io/client-go/kubernetes", "github.com/open-policy-agent/opa/v1/rego"} {
		if !strings.Contains("\n"+string(out), "\n"+want+"\n") {
			t.Errorf("the siblings do not link %s", want)
		}
	}
}

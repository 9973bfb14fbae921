package engine_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// withRollback enables rollback on the default steps (deploy, post-test,
// activation) in a descriptor.
const withRollback = "rollback: {enabled: true}\n"

// scriptTarget is a descriptor's target running cmd with sh for every action.
func scriptTarget(cmd string) string {
	b, _ := json.Marshal(map[string]any{"plugin": "script", "with": map[string]any{"command": []string{"sh", "-c", cmd}}})
	return "target: " + string(b) + "\n"
}

// executed lists the steps that ran (not PENDING or SKIPPED), in table order.
func executed(steps []manent.Step) []string {
	var out []string
	for _, s := range steps {
		if s.State != manent.StepPending && s.State != manent.StepSkipped {
			out = append(out, s.Name)
		}
	}
	return out
}

// A failing post-test, with activation before it in the pipeline, runs
// rollback:activation then rollback:deploy: current is the previous release
// again, the deploy is ERROR with rollback completed.
func TestRollbackOnFailedPostTest(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		unhealthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer unhealthy.Close()
		url1, _ := f.artifact("v1", "one")
		url2, _ := f.artifact("v2", "two")
		if r := f.wait(f.submit(descriptorYAML("shop", "prod", "1", url1, "", withRollback)), 30*time.Second); r.State != manent.StateSuccess {
			t.Fatalf("v1: %s %s", r.State, r.Error)
		}
		pipeline := []string{"secrets", "artifacts", "qa", "deploy", "activation", "post-test"}
		health := fmt.Sprintf("health:\n  - {url: %q, retries: 1}\n", unhealthy.URL)
		rec := f.wait(f.submitWith(descriptorYAML("shop", "prod", "2", url2, "", health+withRollback), pipeline), 30*time.Second)
		if rec.State != manent.StateError || rec.Rollback != manent.RollbackCompleted {
			t.Fatalf("state %s rollback %q (%s), want ERROR with rollback completed", rec.State, rec.Rollback, rec.Error)
		}
		if !strings.HasPrefix(rec.Error, `step "post-test" failed: `) {
			t.Errorf("error = %q", rec.Error)
		}
		got := strings.Join(executed(rec.Steps), ",")
		want := "config,notify:started,secrets,artifacts,qa,checkpoint:deploy,deploy,checkpoint:activation,activation,post-test,rollback:activation,rollback:deploy,cleanup"
		if got != want {
			t.Fatalf("steps run:\n got %s\nwant %s", got, want)
		}
		dir := filepath.Join(f.targets, "shop", "prod")
		if b, err := os.ReadFile(filepath.Join(dir, "current", "index.html")); err != nil || string(b) != "one" {
			t.Fatalf("current/index.html = %q, %v: want the previous release", b, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "releases", "2")); !os.IsNotExist(err) {
			t.Errorf("release 2 not removed by rollback:deploy: %v", err)
		}
		inv, _ := f.st.Inventory(t.Context())
		if len(inv) != 1 || inv[0].Current.Version != "1" || inv[0].LastFailure == nil || inv[0].LastFailure.Rollback != "completed" {
			t.Fatalf("inventory %+v", inv[0])
		}
	})
}

// With the default pipeline post-test runs before activation: only the
// deploy is compensated, and nothing was ever live.
func TestRollbackDefaultPipelineAndDisabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer bad.Close()
	url, _ := f.artifact("v1", "one")
	health := fmt.Sprintf("health:\n  - {url: %q}\n", bad.URL)
	rec := f.wait(f.submit(descriptorYAML("web", "qa", "1", url, "", health+withRollback)), 30*time.Second)
	if rec.State != manent.StateError || rec.Rollback != manent.RollbackCompleted {
		t.Fatalf("state %s rollback %q", rec.State, rec.Rollback)
	}
	if got := executed(rec.Steps); !strings.Contains(strings.Join(got, ","), "post-test,rollback:deploy,cleanup") || strings.Contains(strings.Join(got, ","), "rollback:activation") {
		t.Fatalf("steps run: %v", got)
	}
	// Rollback disabled: nothing is compensated, rollback "".
	rec = f.wait(f.submit(descriptorYAML("web", "qa", "2", url, "", health+"rollback: {enabled: false}\n")), 30*time.Second)
	if rec.State != manent.StateError || rec.Rollback != "" {
		t.Fatalf("disabled: state %s rollback %q", rec.State, rec.Rollback)
	}
	for _, s := range executed(rec.Steps) {
		if strings.HasPrefix(s, "rollback:") {
			t.Fatalf("rollback step %s ran with rollback disabled", s)
		}
	}
}

// A failing compensation stops the chain: rollback failed, and the
// compensations before it in the chain never run.
func TestFailingCompensationStopsChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "one")
	marks := filepath.Join(f.dir, "marks")
	cmd := fmt.Sprintf(`echo $MANENT_STEP >> %s; case $MANENT_STEP in post-test|rollback:activation) exit 1;; esac`, marks)
	id := f.submitWith(descriptorYAML("api", "prod", "1", url, "", withRollback+scriptTarget(cmd)+"max_retries: 0\n"),
		[]string{"artifacts", "deploy", "activation", "post-test"})
	rec := f.wait(id, 30*time.Second)
	if rec.State != manent.StateError || rec.Rollback != manent.RollbackFailed {
		t.Fatalf("state %s rollback %q, want ERROR with rollback failed", rec.State, rec.Rollback)
	}
	b, _ := os.ReadFile(marks)
	lines := strings.Fields(string(b))
	if lines[len(lines)-1] != "rollback:activation" {
		t.Fatalf("actions %v: the chain must stop at the failed rollback:activation", lines)
	}
	for _, l := range lines {
		if l == "rollback:deploy" {
			t.Fatalf("rollback:deploy ran after a failed compensation: %v", lines)
		}
	}
	if s := step(t, rec, "rollback:activation"); s.State != manent.StepError || s.Attempts != 3 {
		t.Fatalf("rollback:activation = %s after %d attempts, want ERROR after 3", s.State, s.Attempts)
	}
}

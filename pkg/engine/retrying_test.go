package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// A step between two attempts is RUNNING with its last attempt's error
// and when the next one is due — not ERROR, its result — and a cancel that
// comes then stops the deploy without running the step again: its last
// attempt ended, nothing of it is left half done (a RUNNING step a worker
// stopped in runs again to its end; this one must not). The deploy's end
// shows the step ERROR with its last error.
func TestCancelBetweenAttemptsRunsTheStepNoMore(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2, func(c *node.Config) {
			c.Workers.RetryBase, c.Workers.RetryMax = 3*time.Second, 3*time.Second
		})
		url, _ := f.artifact("app", "x")
		counter := filepath.Join(f.dir, "count")
		fails := fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null || echo 0); echo $((n+1)) > %[1]s; echo broken >&2; exit 1`, counter)
		id := f.submit(descriptorYAML("shop", "qa", "2", url, "", fmt.Sprintf(`steps:
  - name: flaky
    before: deploy
    plugin: script
    max_retries: 2
    with: {command: ["sh", "-c", %q]}
`, fails)))
		var st manent.Step
		enginetest.Eventually(t, 30*time.Second, func() bool {
			for _, s := range f.state(id).Steps {
				if s.Name == "flaky" {
					st = s
				}
			}
			return st.Retrying()
		}, "step flaky to wait between attempts; it reads %+v", &st)
		if st.Error == "" || st.MaxAttempts != 3 || st.FinishedAt != nil || !st.NextAttemptAt.After(time.Now()) {
			t.Fatalf("a step between attempts reads %+v, want its error, max_attempts 3, no finished_at, the next attempt ahead", st)
		}
		if _, err := f.eng.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateCancelled {
			t.Fatalf("state = %s (%s), want CANCELLED", rec.State, rec.Error)
		}
		if b, _ := os.ReadFile(counter); strings.TrimSpace(string(b)) != "1" {
			t.Errorf("the step ran %s times, want 1: a cancel between attempts runs it no more", strings.TrimSpace(string(b)))
		}
		if s := step(t, rec, "flaky"); s.State != manent.StepError || s.Retrying() || s.Error == "" || s.FinishedAt == nil {
			t.Errorf("after the cancel the step reads %+v, want ERROR with its last error, ended", s)
		}
	})
}

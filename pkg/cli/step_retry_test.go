package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
)

// A step that fails twice with a retryable error and then succeeds is
// never shown failed while it is retried: the API shows it RUNNING with
// its last attempt's error and when the next attempt is due, deploy
// --wait prints "attempt 1 of 4 failed; retrying in 1s: …" (it printed
// "ERROR", then nothing more of the step, and the deploy ended SUCCESS),
// and the step's log says so.
func TestARetriedStepIsNotShownFailed(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.WithConfig(func(c *node.Config) {
		c.Workers.RetryBase, c.Workers.RetryMax = time.Second, time.Second
	}))
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	p := writeDescriptor(t, "1.0.0")
	count := filepath.Join(t.TempDir(), "count")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, fmt.Sprintf("steps:\n  - name: flaky\n    before: activation\n    plugin: script\n    max_retries: 3\n    with:\n"+
		"      command: [\"sh\", \"-c\", \"n=$(cat %[1]s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s; [ $n -gt 2 ]\"]\n", count)...)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// Watch what the API shows of the step while the deploy runs.
	var (
		mu       sync.Mutex
		seen     []manent.Step
		whys     []string
		deployID string
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			res, err := srv.Client().List(ctx, api.ListOptions{Application: "billing"})
			if err == nil {
				for _, d := range res.Items {
					if d.State.Final() {
						continue
					}
					full, err := srv.Client().Deployment(ctx, d.ID)
					if err != nil {
						continue
					}
					for _, st := range full.Steps {
						if st.Name == "flaky" {
							mu.Lock()
							deployID = d.ID
							seen = append(seen, st)
							mu.Unlock()
						}
					}
				}
			}
			if act, err := srv.Client().Activity(ctx); err == nil {
				for _, g := range act.Environments {
					for _, it := range g.Items {
						mu.Lock()
						whys = append(whys, it.Why())
						mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	code, stdout, stderr := runCLI(t, env, "deploy", "-f", p, "--wait")
	stop()
	wg.Wait()
	if code != 0 {
		t.Fatalf("deploy --wait: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		`(?m)^  step flaky: attempt 1 of 4 failed; retrying (in 1s|now): script sh exited with status 1$`,
		`(?m)^  step flaky: attempt 2 of 4 failed; retrying (in 1s|now): script sh exited with status 1$`,
		`(?m)^  step flaky: SUCCESS after 3 attempts \(`,
	} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("deploy --wait's progress has no line matching %s:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "ERROR") {
		t.Errorf("deploy --wait's progress shows an ERROR of a deploy that succeeded:\n%s", stderr)
	}

	mu.Lock()
	defer mu.Unlock()
	retrying := 0
	for _, st := range seen {
		if st.State == manent.StepError {
			t.Errorf("the API showed the step ERROR while it was retried (attempt %d: %s)", st.Attempts, st.Error)
			break
		}
		if st.Retrying() {
			retrying++
			if st.Error != "script sh exited with status 1" || st.MaxAttempts != 4 || st.FinishedAt != nil {
				t.Errorf("a step between attempts reads %+v, want its last error, max_attempts 4 and no finished_at", st)
			}
		}
	}
	if retrying == 0 {
		t.Errorf("the API never showed the step between attempts (next_attempt_at); saw %d readings", len(seen))
	}
	if !regexp.MustCompile(`(?m)^running step flaky: attempt [12] of 4 failed; the next starts at `).MatchString(strings.Join(whys, "\n")) {
		t.Errorf("activity never said the step waits for its next attempt; it said:\n%s", strings.Join(whys, "\n"))
	}
	code, stdout, stderr = runCLI(t, env, "steps", deployID, "-o", "json")
	if code != 0 || strings.Contains(stdout, "next_attempt_at") || !strings.Contains(stdout, `"attempts": 3`) {
		t.Errorf("steps -o json of the finished deploy (exit %d):\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, env, "logs", deployID)
	if code != 0 || !regexp.MustCompile(`attempt 1 of 4 failed: script sh exited with status 1; retrying in 1s`).MatchString(stdout) {
		t.Errorf("the step's log does not say the attempt failed and another follows (exit %d):\n%s%s", code, stdout, stderr)
	}
}

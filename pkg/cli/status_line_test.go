package cli

import (
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// The running step's line: its time since it started, and after a retry
// or a crash (attempt 2 and on) that this counts from its first attempt.
func TestRunningStepLine(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	started := now.Add(-(11*time.Minute + 32*time.Second))
	for _, c := range []struct {
		steps []manent.Step
		want  string
	}{
		{[]manent.Step{{Name: "deploy", State: manent.StepSuccess}, {Name: "smoke", State: manent.StepRunning, Attempts: 1, StartedAt: &started}},
			"step smoke, for 11m32s"},
		{[]manent.Step{{Name: "soak", State: manent.StepRunning, Attempts: 2, StartedAt: &started}},
			"step soak (attempt 2), 11m32s since its first attempt"},
		{[]manent.Step{{Name: "deploy", State: manent.StepSuccess}}, "between steps"},
	} {
		if got := runningStepLine(c.steps, now); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

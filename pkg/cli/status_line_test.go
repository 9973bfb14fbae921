package cli

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// The running step's line: its time since it started, and after a retry
// or a crash (attempt 2 and on) that this counts from its first attempt.
func TestRunningStepLine(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	started := now.Add(-(11*time.Minute + 32*time.Second))
	next := now.Add(3500 * time.Millisecond)
	for _, c := range []struct {
		steps []manent.Step
		want  string
	}{
		{[]manent.Step{{Name: "deploy", State: manent.StepSuccess}, {Name: "smoke", State: manent.StepRunning, Attempts: 1, StartedAt: &started}},
			"step smoke, for 11m32s"},
		{[]manent.Step{{Name: "soak", State: manent.StepRunning, Attempts: 2, StartedAt: &started}},
			"step soak (attempt 2), 11m32s since its first attempt"},
		{[]manent.Step{{Name: "deploy", State: manent.StepSuccess}}, "between steps"},
		// Between two attempts: the failed one, the next's time, the error.
		{[]manent.Step{{Name: "smoke", State: manent.StepRunning, Attempts: 2, StartedAt: &started, Error: "exit 1",
			NextAttemptAt: &next, MaxAttempts: 5}}, "step smoke, attempt 2 of 5 failed; retrying in 4s (exit 1)"},
		// Past a recovery the count goes beyond this execution's most.
		{[]manent.Step{{Name: "smoke", State: manent.StepRunning, Attempts: 7, StartedAt: &started, Error: "exit 1",
			NextAttemptAt: &now, MaxAttempts: 5}}, "step smoke, attempt 7 failed; retrying now (exit 1)"},
	} {
		if got := runningStepLine(c.steps, now); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

// A deploy --wait, wait or logs -f in CI (stderr not a terminal) whose
// step runs for a long time repeats its state line every keepaliveEvery
// while nothing else is printed, with the time waited: a CI that kills a
// job silent for 10 minutes (CircleCI's no_output_timeout, Travis) no
// longer kills a healthy deploy. Nothing is repeated sooner, and any line
// printed (a finished step, a change) starts the period again.
func TestProgressKeepsANonTerminalLogAlive(t *testing.T) {
	var errOut bytes.Buffer
	s := NewIOStreams(nil, io.Discard, &errOut, func(string) string { return "" })
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	now := start
	p := newProgress(s, func() time.Time { return now })
	running := &manent.Deployment{ID: "dpl_1", State: manent.StatePending,
		Steps: []manent.Step{{Name: "soak", State: manent.StepRunning, StartedAt: &start}}}
	for now.Sub(start) < 12*time.Minute {
		p.update(running)
		now = now.Add(30 * time.Second)
	}
	got := errOut.String()
	want := "deploy dpl_1: PENDING, step soak running\n" +
		"deploy dpl_1: PENDING, step soak running · 5m (still waiting)\n" +
		"deploy dpl_1: PENDING, step soak running · 10m (still waiting)\n"
	if got != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
	}
}

// logs -f on a CI: the log lines it prints keep the job's output alive, so
// the state line is not repeated while they flow (it was every 5 minutes,
// among the lines); it is once they stop.
func TestProgressQuietWhileLogLinesFlow(t *testing.T) {
	var errOut bytes.Buffer
	s := NewIOStreams(nil, io.Discard, &errOut, func(string) string { return "" })
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	now := start
	p := newProgress(s, func() time.Time { return now })
	running := &manent.Deployment{ID: "dpl_1", State: manent.StatePending,
		Steps: []manent.Step{{Name: "soak", State: manent.StepRunning, StartedAt: &start}}}
	for now.Sub(start) < 12*time.Minute {
		p.update(running)
		p.wrote() // a log line printed
		now = now.Add(30 * time.Second)
	}
	for now.Sub(start) < 18*time.Minute {
		p.update(running)
		now = now.Add(30 * time.Second)
	}
	got := errOut.String()
	want := "deploy dpl_1: PENDING, step soak running\n" +
		"deploy dpl_1: PENDING, step soak running · 16m30s (still waiting)\n"
	if got != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
	}
}

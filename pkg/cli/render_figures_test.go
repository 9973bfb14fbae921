package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// The change failure rate is a rounded percentage, not the float product
// (0.333 × 100 is 33.300000000000004).
func TestRenderDORARate(t *testing.T) {
	for rate, want := range map[float64]string{
		0.333: "33.3% (1 failed of 3)",
		0.667: "66.7% (1 failed of 3)",
		0.5:   "50% (1 failed of 3)",
		1:     "100% (1 failed of 3)",
		0:     "0% (1 failed of 3)",
		0.001: "0.1% (1 failed of 3)",
	} {
		r := rate
		res := &api.DORA{Window: "30d", ChangeFailureRate: api.ChangeFailureRate{Failed: 1, Total: 3, Rate: &r}}
		var out bytes.Buffer
		if err := renderDORA(NewIOStreams(nil, &out, &out, func(string) string { return "" }), res); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "  "+want+"\n") {
			t.Errorf("rate %v:\n%s\nwant Change failure rate: %s", rate, out.String(), want)
		}
	}
}

// Failures nothing has restored yet are said beside the median: they give
// no sample, and a median over the restored ones alone reads as all there is.
func TestRenderDORAUnrestored(t *testing.T) {
	m := 1200.0
	for _, c := range []struct {
		ttr  api.TimeToRestore
		want string
	}{
		{api.TimeToRestore{Median: &m, Samples: 2, Unrestored: 1}, "median 20m (2 samples); 1 failure not restored yet\n"},
		{api.TimeToRestore{Unrestored: 2}, "median - (0 samples); 2 failures not restored yet\n"},
		{api.TimeToRestore{Median: &m, Samples: 1}, "median 20m (1 sample)\n"},
	} {
		res := &api.DORA{Window: "30d", TimeToRestoreSeconds: c.ttr}
		var out bytes.Buffer
		if err := renderDORA(NewIOStreams(nil, &out, &out, func(string) string { return "" }), res); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%+v:\n%s\nwant %q", c.ttr, out.String(), c.want)
		}
	}
}

// An approval says "approved" or "rejected", as people write it.
func TestStatusApprovalVerdicts(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	d := &manent.Deployment{ID: "dpl_1", Application: "shop", Environment: "prod", Version: "2", State: manent.StateRejected,
		CreatedAt: now, Approvals: []manent.Approval{
			{Identity: "token:alice", Verdict: "reject", Comment: "no"},
			{Identity: "token:bob", Verdict: "approve"},
		}}
	var out bytes.Buffer
	if err := renderStatus(NewIOStreams(nil, &out, &out, func(string) string { return "" }), &out, d, now); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"token:alice rejected: no\n", "token:bob approved\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}

// Following a deploy prints one line per step that ran; the steps skipped
// without starting get none, and a deploy that ran no step says so once.
func TestProgressSkipsStepsThatNeverStarted(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	end := at.Add(time.Second)
	tests := []struct {
		name  string
		d     *manent.Deployment
		lines []string
	}{
		{"failed mid-run", &manent.Deployment{ID: "dpl_1", State: manent.StateError, Steps: []manent.Step{
			{Name: "secrets", State: manent.StepSuccess, StartedAt: &at, FinishedAt: &end},
			{Name: "deploy", State: manent.StepError, StartedAt: &at, FinishedAt: &end, Error: "boom"},
			{Name: "activation", State: manent.StepSkipped},
		}}, []string{"  step secrets: SUCCESS (1s)", "  step deploy: ERROR (1s): boom"}},
		{"rejected before any step", &manent.Deployment{ID: "dpl_2", State: manent.StateRejected, Steps: []manent.Step{
			{Name: "secrets", State: manent.StepSkipped}, {Name: "deploy", State: manent.StepSkipped},
		}}, []string{"  no step ran"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := newProgress(NewIOStreams(nil, &out, &out, func(string) string { return "" }), func() time.Time { return end })
			p.update(tt.d)
			p.update(tt.d) // polled again: nothing new
			p.finish()
			if got, want := out.String(), strings.Join(tt.lines, "\n")+"\n"; got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

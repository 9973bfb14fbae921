package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// The status table shows a rollout's waves, the approvals and the
// callback and chat deliveries, and why a running deploy waits.
func TestStatusShowsRolloutApprovalsDeliveries(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	until := now.Add(4*time.Minute + 30*time.Second)
	d := &manent.Deployment{ID: "dpl_1", Application: "shop", Environment: "prod", Version: "2", State: manent.StatePending,
		Reason:    "wave rest awaits approval 0/1, expires at 2026-12-03T10:00:00Z",
		CreatedAt: now, Approvals: []manent.Approval{{Identity: "token:bob", Verdict: "approve", Comment: "ok"}},
		Rollout: []manent.WaveStatus{{Name: "canary", Targets: []string{"eu-1"}, State: "healthy", Gate: "passed", Observe: "5m0s"},
			{Name: "rest", Targets: []string{"eu-2", "us-1"}, State: "awaiting-approval", Message: "wave rest awaits approval 1/2",
				ApprovalsRequired: 2, Approvals: []manent.Approval{{Identity: "token:carol", Verdict: "approve", Comment: "canary looks fine"}}},
			{Name: "34%", Percent: 34, State: "observing", Observe: "10m0s", ObserveUntil: &until},
			{Name: "100%", Percent: 100, State: "rolled-back", Gate: "failed", Message: "deploy dpl_1 failed on cluster eu"}},
	}
	d.Deliveries, _ = json.Marshal([]map[string]any{
		{"event": "started", "url": "https://ci.example/hook", "state": "delivered", "attempts": []any{map[string]any{}}},
		{"event": "started", "channel": "deploys", "state": "failed", "error": "HTTP 404", "attempts": []any{map[string]any{}, map[string]any{}}},
	})
	var out bytes.Buffer
	io := NewIOStreams(nil, &out, &out, func(string) string { return "" })
	if err := renderStatus(io, &out, d, now); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"wave rest awaits approval 0/1", "token:bob approved: ok", "token:carol approved wave rest: canary looks fine", "canary", "eu-2,us-1", "awaiting-approval",
		"https://ci.example/hook", "chat deploys", "HTTP 404",
		"OBSERVE", "GATE", "4m30s left", "34%", "passed", "failed", "5m0s"} {
		if !strings.Contains(got, want) {
			t.Errorf("status output lacks %q:\n%s", want, got)
		}
	}
}

// A deploy whose log retention removed says so in its status: its log
// (manent logs, the web page) is empty or partial, not the deploy's whole.
func TestStatusSaysRetentionRemovedTheLog(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	removed := now.Add(-time.Hour)
	d := &manent.Deployment{ID: "dpl_1", Application: "shop", Environment: "prod", Version: "2", State: manent.StateSuccess,
		CreatedAt: now.Add(-48 * time.Hour), LogsRemovedFrom: &removed}
	var out bytes.Buffer
	if err := renderStatus(NewIOStreams(nil, &out, &out, func(string) string { return "" }), &out, d, now); err != nil {
		t.Fatal(err)
	}
	if want := "log lines removed by retention from 2026-12-02T09:00:00Z"; !strings.Contains(out.String(), want) {
		t.Errorf("status output lacks %q:\n%s", want, out.String())
	}
	d.LogsRemovedFrom = nil
	out.Reset()
	if err := renderStatus(NewIOStreams(nil, &out, &out, func(string) string { return "" }), &out, d, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "retention") {
		t.Errorf("a whole log's status mentions retention:\n%s", out.String())
	}
}

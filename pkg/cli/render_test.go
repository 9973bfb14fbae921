package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/<name>.golden, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", name, path, got, want)
	}
}

func ts(sec int) *time.Time {
	t := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(sec) * time.Second)
	return &t
}

// sampleDeployment is a failed deploy with a rollback, a retried step, step
// output and a step that never ran.
func sampleDeployment() *manent.Deployment {
	return &manent.Deployment{
		ID: "dpl_01JNV3Q7ZK", Application: "billing", Environment: "prod", Version: "1.4.2",
		State: manent.StateError, Requester: "oidc:ann@example.com",
		CreatedAt: *ts(0), StartedAt: ts(2), FinishedAt: ts(95),
		Error:    `step "post-test" failed: GET http://127.0.0.1:9000/healthz: 503 after 5 retries`,
		Rollback: manent.RollbackCompleted,
		Decision: &manent.Decision{Allowed: true, ApprovalsRequired: 1, Approvers: []string{"group:sre"}, Source: "governance.yaml"},
		Steps: []manent.Step{
			{Name: "config", State: manent.StepSuccess, Attempts: 1, StartedAt: ts(2), FinishedAt: ts(3),
				Output: json.RawMessage(`{"source": "files", "revision": "a1b2c3"}`)},
			{Name: "secrets", State: manent.StepSuccess, Attempts: 1, StartedAt: ts(3), FinishedAt: ts(3)},
			{Name: "artifacts", State: manent.StepSuccess, Attempts: 2, StartedAt: ts(3), FinishedAt: ts(10),
				Output: json.RawMessage(`{"path": "/var/lib/manent/work/dpl_01JNV3Q7ZK/artifact.tar.gz", "sha256": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b"}`)},
			{Name: "deploy", State: manent.StepSuccess, Attempts: 1, StartedAt: ts(10), FinishedAt: ts(40)},
			{Name: "post-test", State: manent.StepError, Attempts: 5, StartedAt: ts(40), FinishedAt: ts(90),
				Error: "GET http://127.0.0.1:9000/healthz: 503 after 5 retries"},
			{Name: "activation", State: manent.StepSkipped},
			{Name: "rollback:deploy", State: manent.StepSuccess, Attempts: 1, StartedAt: ts(90), FinishedAt: ts(94)},
			{Name: "cleanup", State: manent.StepRunning, Attempts: 1, StartedAt: ts(94)},
		},
	}
}

// now is after the sample finished; the running cleanup step shows 6s.
func now() time.Time { return *ts(100) }

func testStreams(env map[string]string) (*IOStreams, *bytes.Buffer) {
	var out bytes.Buffer
	return NewIOStreams(bytes.NewReader(nil), &out, &out, func(k string) string { return env[k] }), &out
}

func TestRenderStatus(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"status", nil},
		{"status_tty", map[string]string{"MANENT_FORCE_TTY": "1"}},
		{"status_tty_nocolor", map[string]string{"MANENT_FORCE_TTY": "1", "NO_COLOR": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, out := testStreams(tt.env)
			if err := renderStatus(s, out, sampleDeployment(), now()); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, out.Bytes())
		})
	}
}

func TestRenderStatusWaiting(t *testing.T) {
	d := &manent.Deployment{
		ID: "dpl_2", Application: "billing", Environment: "prod", Version: "1.5.0",
		State: manent.StateAwaitingApproval, Requester: "token:ci", CreatedAt: *ts(0),
		Reason:   "1 approval from group:sre (expires 2026-03-02T10:00:00Z)",
		Decision: &manent.Decision{Allowed: true, ApprovalsRequired: 1, Approvers: []string{"group:sre"}, ChangeRequired: true},
	}
	s, out := testStreams(nil)
	if err := renderStatus(s, out, d, now()); err != nil {
		t.Fatal(err)
	}
	golden(t, "status_waiting", out.Bytes())
}

func TestRenderSteps(t *testing.T) {
	s, out := testStreams(nil)
	if err := renderSteps(s, out, sampleDeployment().Steps, now()); err != nil {
		t.Fatal(err)
	}
	golden(t, "steps", out.Bytes())
}

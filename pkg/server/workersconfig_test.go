package server_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
)

// Workers on one PostgreSQL database whose policy-relevant configurations
// differ are told apart (docs/operations.md "One server or several
// workers"): each records a digest of its configuration, one starting
// beside live workers configured otherwise warns naming them and what
// differs, and GET /api/v1/workers says of each worker whether its
// configuration is the others'.
func TestWorkersConfigurationsDiffer(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	rules := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(rules, []byte("approvals:\n  - {environments: [prod], count: 1, approvers: [\"group:sre\"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	governed := servertest.WithConfig(func(c *node.Config) { c.Governance.Rules = rules })
	w1 := servertest.Start(t, servertest.WithDatabase(db), servertest.WithExecutorID("w1"), governed)
	var log3 enginetest.SyncBuffer
	servertest.Start(t, servertest.WithDatabase(db), servertest.WithExecutorID("w3"),
		servertest.WithConfig(func(c *node.Config) { c.Plugins.Steps = []string{} }),
		servertest.WithLogger(slog.New(slog.NewJSONHandler(&log3, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	var log2 enginetest.SyncBuffer
	servertest.Start(t, servertest.WithDatabase(db), servertest.WithExecutorID("w2"), governed,
		servertest.WithLogger(slog.New(slog.NewJSONHandler(&log2, &slog.HandlerOptions{Level: slog.LevelWarn}))))

	if got := log3.String(); !strings.Contains(got, `"level":"WARN"`) || !strings.Contains(got, "configuration differs") ||
		!strings.Contains(got, "w1 (governance)") {
		t.Errorf("w3, configured otherwise than w1, does not warn naming w1 and governance:\n%s", got)
	}
	if got := log2.String(); !strings.Contains(got, "w3 (governance)") || strings.Contains(got, "w1 (") {
		t.Errorf("w2, configured as w1, warns about w1 or not about w3:\n%s", got)
	}
	res, err := w1.Client().Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range res.Items {
		got[w.ID] = w.Config
	}
	want := map[string]string{"w1": "differs from w3 (governance)", "w2": "differs from w3 (governance)", "w3": "differs from w1, w2 (governance)"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("worker %s: config %q, want %q", id, got[id], w)
		}
	}
}

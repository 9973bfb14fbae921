package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/servertest"
)

// runCLIAt runs the CLI with its clock set to now.
func runCLIAt(t *testing.T, srv *servertest.Server, now time.Time, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	code := cli.Run(context.Background(), cli.Invocation{
		Args: args, Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
		Now: func() time.Time { return now },
	})
	if code != 0 {
		t.Fatalf("manent %q: exit %d\n%s%s", args, code, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// The AGE column of list, history, activity and the tick columns of
// schedules are relative to the CLI's clock (the Factory's Now), so these
// are exact; -o json keeps the server's RFC 3339 time.
func TestTablesShowRelativeTimes(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	if code, _, stderr := runCLI(t, env, "deploy", "-f", writeDescriptor(t, "1.0.0"), "--wait"); code != 0 {
		t.Fatalf("deploy: exit %d\n%s", code, stderr)
	}
	list, err := srv.Client().List(context.Background(), api.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].FinishedAt == nil {
		t.Fatalf("list: %v %+v", err, list)
	}
	d := list.Items[0]

	for _, tt := range []struct {
		name string
		now  time.Time
		args []string
		want string
	}{
		{"list 3m", d.CreatedAt.Add(3*time.Minute + 59*time.Second), []string{"list"},
			`(?m)^` + d.ID + ` +billing +prod +1\.0\.0 +SUCCESS +token:admin +3m ago$`},
		{"list 2h", d.CreatedAt.Add(2*time.Hour + 5*time.Minute), []string{"list"}, `(?m) 2h ago$`},
		{"list 5d", d.CreatedAt.Add(5*24*time.Hour + time.Hour), []string{"list"}, `(?m) 5d ago$`},
		{"list just now", d.CreatedAt.Add(2 * time.Second), []string{"list"}, `(?m) just now$`},
		{"list clock behind", d.CreatedAt.Add(-3 * time.Second), []string{"list"}, `(?m) just now$`},
		{"history", d.FinishedAt.Add(45 * time.Second), []string{"history", "billing", "prod"},
			`(?m)^\* +` + d.ID + ` +1\.0\.0 +SUCCESS +token:admin +\d+s ago +45s ago +- +- +-$`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _ := runCLIAt(t, srv, tt.now, tt.args...)
			if !regexp.MustCompile(tt.want).MatchString(stdout) {
				t.Errorf("stdout does not match %s:\n%s", tt.want, stdout)
			}
		})
	}
	stdout, _ := runCLIAt(t, srv, d.CreatedAt.Add(time.Hour), "list", "-o", "json")
	if want := `"created_at": "` + d.CreatedAt.UTC().Format(time.RFC3339Nano); !bytes.Contains([]byte(stdout), []byte(want)) {
		t.Errorf("-o json has no absolute time %s:\n%s", want, stdout)
	}

	// A recurring schedule: its next tick is in the future.
	dir := t.TempDir()
	art := writeArtifact(t, dir, "x\n")
	sched := filepath.Join(dir, "s.yml")
	if err := os.WriteFile(sched, []byte("apiVersion: manent/v1\napplication: billing\nenvironment: nightly\nversion: 1.0.0\n"+
		"artifact: {url: \"file://"+art+"\"}\nschedule: {cron: \"@every 1h\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, env, "deploy", "-f", sched); code != 0 {
		t.Fatalf("schedule: exit %d\n%s", code, stderr)
	}
	ss, err := srv.Client().Schedules(context.Background())
	if err != nil || len(ss.Items) != 1 || ss.Items[0].NextTick == nil {
		t.Fatalf("schedules: %v %+v", err, ss)
	}
	stdout, _ = runCLIAt(t, srv, ss.Items[0].NextTick.Add(-5*time.Minute-30*time.Second), "schedules", "list")
	if want := `(?m)^sch_\S+ +billing +nightly +@every 1h +\S+ +- +in 5m +- +-$`; !regexp.MustCompile(want).MatchString(stdout) {
		t.Errorf("schedules list does not match %s:\n%s", want, stdout)
	}
}

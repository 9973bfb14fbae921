package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
)

// `manent deploy` while the server's PostgreSQL is away (a restart, a
// failover), end to end: a real server on PostgreSQL through a loopback
// proxy that cuts every connection. The server answers 503 "the database
// cannot be reached" with Retry-After: 5, and the CLI sends the
// submission again with one Idempotency-Key, four times. An outage shorter
// than that only delays it: one deploy, followed by --wait to SUCCESS,
// exit 0. A longer one: exit 4 naming the database, nothing stored, and
// the next invocation once the database is back creates one deploy, not
// two.
func TestDeployDuringDatabaseOutage(t *testing.T) {
	t.Parallel()
	db, px := enginetest.ProxiedPostgres(t)
	// The worker's cut-off (dead_after) far past the outages: the server
	// serves on.
	srv := servertest.Start(t, servertest.WithDatabase(db), servertest.WithConfig(func(c *node.Config) {
		c.Workers.DeadAfter = 10 * time.Minute
	}))
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	outage := func(d time.Duration) <-chan struct{} {
		px.Cut()
		healed := make(chan struct{})
		go func() {
			defer close(healed)
			<-time.After(d) // the outage's length, not a synchronisation
			px.Heal()
		}()
		t.Cleanup(func() { <-healed })
		return healed
	}

	healed := outage(3 * time.Second)
	code, stdout, stderr := runCLI(t, env, "deploy", "-f", writeDescriptor(t, "1.0.0"), "--wait", "-o", "json")
	<-healed
	if code != 0 {
		t.Fatalf("deploy --wait across a 3 s outage: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var d struct{ ID, State string }
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatalf("stdout is not the deployment: %v\n%s", err, stdout)
	}
	if ids := deployIDs(t, srv); len(ids) != 1 || ids[0] != d.ID || d.State != "SUCCESS" {
		t.Fatalf("server holds %v, CLI printed %s %s; want one deploy, SUCCESS", ids, d.ID, d.State)
	}

	// Longer than the CLI's retries (4 × Retry-After 5 s).
	healed = outage(40 * time.Second)
	code, stdout, stderr = runCLI(t, env, "deploy", "-f", writeDescriptor(t, "2.0.0"), "-o", "json")
	if code != 4 {
		t.Errorf("deploy during a 40 s outage: exit %d, want 4\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if want := "503 Service Unavailable: the database cannot be reached"; !strings.Contains(stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr)
	}
	<-healed
	if ids := deployIDs(t, srv); len(ids) != 1 {
		t.Fatalf("after the failed submission the server holds %v, want the first deploy only", ids)
	}
	code, stdout, stderr = runCLI(t, env, "deploy", "-f", writeDescriptor(t, "2.0.0"), "-o", "json")
	if code != 0 {
		t.Fatalf("deploy once the database is back: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if ids := deployIDs(t, srv); len(ids) != 2 {
		t.Fatalf("after the database came back the server holds %v, want 2 deploys", ids)
	}
}

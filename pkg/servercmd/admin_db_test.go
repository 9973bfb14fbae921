package servercmd

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

// adminDBTasks are the admin tasks that read or write the server's
// database (new-token reads none).
var adminDBTasks = [][]string{
	{"admin", "verify-audit"},
	{"admin", "workers"},
	{"admin", "recover", "--executor-id", "worker-1"},
	{"admin", "backup", "--to", "backup.db"},
}

// An admin task never creates or migrates a database: pointed at none (the
// default ./manent-data of another working directory, a mistyped
// --data-dir, a configuration whose data_dir holds nothing), it exits
// non-zero naming the database it looked for and how to point at the
// right one, and leaves nothing behind. verify-audit printed "audit log
// intact: 0 rows" and exited 0 over the empty database it had just made.
func TestAdminNeedsAnExistingDatabase(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	missing := filepath.Join(dir, "nonexistent")
	cfgDir := filepath.Join(dir, "etc")
	if err := os.Mkdir(cfgDir, 0o750); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(cfgDir, "manent-server.yaml")
	if err := os.WriteFile(cfgPath, []byte("data_dir: "+filepath.Join(dir, "cfgdata")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, task := range adminDBTasks {
		for _, c := range []struct {
			args     []string
			db, hint string
		}{
			{nil, filepath.Join(dir, "manent-data", "manent.db"), "--data-dir"},
			{[]string{"--data-dir", missing}, filepath.Join(missing, "manent.db"), "--data-dir"},
			{[]string{"--database", "sqlite:" + filepath.Join(missing, "x.db")}, filepath.Join(missing, "x.db"), "--database"},
			{[]string{"--config", cfgPath}, filepath.Join(dir, "cfgdata", "manent.db"), "--config"},
		} {
			args := append(append([]string{}, task...), c.args...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := Run(context.Background(), args, &stdout, &stderr, nil)
				if code == 0 || strings.Contains(stdout.String(), "intact") {
					t.Fatalf("exit %d, stdout %q; want an error", code, stdout.String())
				}
				for _, want := range []string{c.db, c.hint, "no manent database"} {
					if !strings.Contains(stderr.String(), want) {
						t.Errorf("stderr %q lacks %q", stderr.String(), want)
					}
				}
				for _, p := range []string{filepath.Join(dir, "manent-data"), missing, filepath.Join(dir, "cfgdata")} {
					if _, err := os.Stat(p); !os.IsNotExist(err) {
						t.Fatalf("%s was created (%v)", p, err)
					}
				}
			})
		}
	}

	// A file that is not a manent database is not migrated into one.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, task := range adminDBTasks {
		var stdout, stderr bytes.Buffer
		args := append(append([]string{}, task...), "--database", "sqlite:"+empty)
		if code := Run(context.Background(), args, &stdout, &stderr, nil); code == 0 || !strings.Contains(stderr.String(), empty) {
			t.Errorf("%q on an empty file: exit %d, stderr %q; want an error naming it", args, code, stderr.String())
		}
		if st, err := os.Stat(empty); err != nil || st.Size() != 0 {
			t.Fatalf("%q wrote into %s (%v)", args, empty, err)
		}
	}
}

// On the database a server made, the admin tasks work.
func TestAdminOnAServersDatabase(t *testing.T) {
	t.Chdir(t.TempDir()) // backup writes backup.db here
	// worker-1 ran on it (recover names it).
	data := dataWithWorker(t)
	// What each prints counts in words: "0 deploys", "1 row", never
	// "deploy(s)" or a Go slice.
	want := map[string]*regexp.Regexp{
		"verify-audit": regexp.MustCompile(`^audit log intact: (1 row|(0|[2-9]|\d\d+) rows)\n(anchor: \d+:[0-9a-f]{64} \(keep it outside the database; --anchor checks it later\)\n)?$`),
		"workers":      regexp.MustCompile(`(?s).`),
		"recover":      regexp.MustCompile(`^0 deploys of worker-1 handed back to the queue\n$`),
		"backup":       regexp.MustCompile(`^backed up .*manent\.db to backup\.db: \d+\.\d MiB in \S+\nthe copy holds no deploy that is not final: a server started on it resumes none\n$`),
	}
	for _, task := range adminDBTasks {
		var stdout, stderr bytes.Buffer
		if code := Run(context.Background(), append(append([]string{}, task...), "--data-dir", data), &stdout, &stderr, nil); code != 0 {
			t.Errorf("%q: exit %d: %s", task, code, stderr.String())
		}
		if re := want[task[1]]; !re.MatchString(stdout.String()) {
			t.Errorf("%q printed %q, want %s", task, stdout.String(), re)
		}
	}

	// A second backup to the same file is refused (usage, exit 2) and
	// leaves it as it was; the copy, restored as the docs say, is a
	// database the tasks work on.
	before, err := os.ReadFile("backup.db")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"admin", "backup", "--data-dir", data, "--to", "backup.db"}, &stdout, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "backup.db: file already exists") {
		t.Fatalf("backup over an existing file: exit %d, stderr %q", code, stderr.String())
	}
	if after, _ := os.ReadFile("backup.db"); !bytes.Equal(after, before) {
		t.Fatal("the existing backup changed")
	}
	restored := t.TempDir()
	if err := os.WriteFile(filepath.Join(restored, "manent.db"), before, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := Run(context.Background(), []string{"admin", "verify-audit", "--data-dir", restored}, &stdout, &stderr, nil); code != 0 || !strings.Contains(stdout.String(), "intact") {
		t.Fatalf("verify-audit on the restored copy: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
}

// On PostgreSQL, a database without manent's tables is not one: the admin
// tasks refuse it and create none.
func TestAdminNeedsAnExistingPostgresDatabase(t *testing.T) {
	url := enginetest.Postgres(t)
	for _, task := range adminDBTasks {
		var stdout, stderr bytes.Buffer
		args := append(append([]string{}, task...), "--database", url)
		if code := Run(context.Background(), args, &stdout, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "no manent database") || !strings.Contains(stderr.String(), "holds no manent tables") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and no manent database", task, code, stderr.String())
		}
	}
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var n int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables were created (%v)", n, err)
	}
}

// verify-audit prints its last row as an anchor; given back with --anchor,
// it sees what the chain alone cannot: rows deleted at the end with the
// head moved back (the chain then verifies). A malformed anchor is a usage
// error.
func TestVerifyAuditAnchor(t *testing.T) {
	ctx := context.Background()
	data, cfg, n := openNode(t)
	for i := 0; i < 5; i++ {
		if err := n.Store.AppendAudit(ctx, store.AuditEntry{Identity: "token:ci", Action: "deployment.submit", Target: fmt.Sprint(i), Outcome: "accepted"}); err != nil {
			t.Fatal(err)
		}
	}
	n.Close(time.Second)
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Run(ctx, append([]string{"admin", "verify-audit", "--data-dir", data}, args...), &stdout, &stderr, nil)
		return code, stdout.String(), stderr.String()
	}
	code, out, _ := run()
	m := regexp.MustCompile(`(?m)^anchor: (\d+:[0-9a-f]{64}) `).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("exit %d, stdout %q: want an anchor", code, out)
	}
	anchor := m[1]
	if code, out, errOut := run("--anchor", anchor); code != 0 || !strings.Contains(out, "1 anchor held") {
		t.Fatalf("with its own anchor: exit %d, %q %q", code, out, errOut)
	}
	// The last two rows deleted and the head moved back onto row 3.
	st, err := store.Open(ctx, cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM manent_audit WHERE seq > 3`,
		`UPDATE manent_audit_head SET seq = 3, hash = (SELECT hash FROM manent_audit WHERE seq = 3) WHERE id = 1`} {
		if _, err := st.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	if code, out, _ := run(); code != 0 {
		t.Fatalf("without the anchor the truncated chain should verify (exit %d, %q): the test shows nothing", code, out)
	}
	seq, _, _ := strings.Cut(anchor, ":")
	want := fmt.Sprintf("row %s: anchor %s: the chain ends at row 3, before the anchor's row %s: rows at the end were deleted and the head moved back", seq, anchor, seq)
	if code, out, errOut := run("--anchor", anchor); code != 1 || !strings.Contains(out, want) {
		t.Fatalf("with the anchor: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
	}
	if code, _, errOut := run("--anchor", "5:xyz"); code != 2 || !strings.Contains(errOut, `--anchor "5:xyz": want SEQ:HASH`) {
		t.Fatalf("a malformed anchor: exit %d, stderr %q", code, errOut)
	}
}

// admin recover of an executor id no server ever ran with (a typo) says
// so and exits 2: it printed "0 deploys of worker2 handed back", exit 0,
// read as "that worker had none".
func TestAdminRecoverOfAnUnknownWorker(t *testing.T) {
	data := dataWithWorker(t)
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"admin", "recover", "--executor-id", "worker1", "--data-dir", data}, &stdout, &stderr, nil)
	if code != 2 || stdout.Len() != 0 ||
		!strings.Contains(stderr.String(), "no worker worker1 has run on this database (its workers: worker-1;") ||
		!strings.Contains(stderr.String(), "nothing was recovered; check the executor id") {
		t.Fatalf("recover of an unknown id: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// admin recover on a SQLite database a server runs on is refused, saying
// what to do: stop that server, or restart it (it recovers the other
// executor ids' deploys itself at start).
func TestAdminRecoverOnARunningSQLiteServer(t *testing.T) {
	data, _, n := openNode(t)
	defer n.Close(time.Second)
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"admin", "recover", "--executor-id", "worker-9", "--data-dir", data}, &stdout, &stderr, nil)
	if code != 1 || !strings.Contains(stderr.String(), "another manent-server uses this SQLite database") ||
		!strings.Contains(stderr.String(), "stop it first — or just restart it") {
		t.Fatalf("admin recover beside a running server: exit %d, stderr %q", code, stderr.String())
	}
}

// dataWithWorker returns a data directory holding the database a server
// made, on which worker-1 ran.
func dataWithWorker(t *testing.T) string {
	t.Helper()
	data, _, n := openNode(t)
	if err := n.Store.RegisterWorker(context.Background(), store.WorkerStart{ID: "worker-1", DeadAfter: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	n.Close(time.Second)
	return data
}

// openNode opens a node, as a server does, on a new data directory with
// the default configuration, and returns the directory, the configuration
// and the node, which the caller closes.
func openNode(t *testing.T) (data string, cfg *node.Config, n *node.Node) {
	t.Helper()
	data = t.TempDir()
	cfg, err := loadConfig("", map[string]string{"data_dir": data})
	if err != nil {
		t.Fatal(err)
	}
	n, err = node.Open(context.Background(), cfg, node.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return data, cfg, n
}

// A database at another release's schema is refused by the admin tasks as
// their help and docs/operations.md (Admin tasks) say: exit 2, naming the
// release to use. It exited 1 — which verify-audit documents as "the audit
// log was tampered with" — so a job that pages on verify-audit's exit 1
// reported a tampered log after an upgrade that had migrated the database.
func TestAdminRefusesAnotherReleasesSchema(t *testing.T) {
	t.Chdir(t.TempDir()) // backup would write backup.db here
	data := dataWithWorker(t)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "manent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var newest int
	if err := db.QueryRow(`SELECT MAX(version) FROM manent_schema_migrations`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, change, undo, want string
	}{
		{"newer", fmt.Sprintf(`INSERT INTO manent_schema_migrations (version) VALUES (%d)`, newest+1),
			fmt.Sprintf(`DELETE FROM manent_schema_migrations WHERE version = %d`, newest+1), "use that release's manent-server"},
		{"older", fmt.Sprintf(`UPDATE manent_schema_migrations SET version = -version WHERE version = %d`, newest),
			fmt.Sprintf(`UPDATE manent_schema_migrations SET version = -version WHERE version = %d`, -newest), "an older release runs on it"},
	} {
		if _, err := db.Exec(c.change); err != nil {
			t.Fatal(err)
		}
		for _, task := range adminDBTasks {
			var stdout, stderr bytes.Buffer
			args := append(append([]string{}, task...), "--data-dir", data)
			if code := Run(context.Background(), args, &stdout, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("%s schema: %q: exit %d, stderr %q; want 2 and %q", c.name, task, code, stderr.String(), c.want)
			}
		}
		if _, err := db.Exec(c.undo); err != nil {
			t.Fatal(err)
		}
	}
}

// A PostgreSQL database that does not exist (a mistyped name in --database
// or the configuration) is no manent database either: exit 2 naming it,
// as for a missing SQLite file. It exited 1 with the driver's "connect to
// postgres: … database … does not exist" — for verify-audit, the exit of a
// tampered audit log.
func TestAdminOnAMissingPostgresDatabase(t *testing.T) {
	u, err := url.Parse(enginetest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path += "_missing"
	for _, task := range adminDBTasks {
		var stdout, stderr bytes.Buffer
		args := append(append([]string{}, task...), "--database", u.String())
		if code := Run(context.Background(), args, &stdout, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "no manent database") ||
			!strings.Contains(stderr.String(), "does not exist") || !strings.Contains(stderr.String(), "--database") {
			t.Errorf("%q: exit %d, stderr %q; want 2, no manent database, does not exist", task, code, stderr.String())
		}
	}
}

// verify-audit that cannot reach its database has no verdict on the chain:
// it exits 3, not the 1 of a tampered log (a job paging on 1 as tampering
// was paged for an outage), and names no password.
func TestVerifyAuditUncheckedIsNotTampered(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"admin", "verify-audit", "--database",
		"postgres://postgres:hunter2-secret@127.0.0.1:1/manent?sslmode=disable&connect_timeout=5"}, &stdout, &stderr, nil)
	if code != 3 || !strings.Contains(stderr.String(), "the audit log could not be checked") || strings.Contains(stderr.String(), "tampered") {
		t.Errorf("verify-audit of an unreachable database: exit %d, stderr %q; want 3, 'could not be checked'", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "hunter2-secret") {
		t.Errorf("the password is in the error: %q", stderr.String())
	}
}

// A restore resumes the deploys not final in the copy — a running step
// from its start, whatever it did after the backup — and the docs said to
// "check what they would do again before starting the workers", with
// nothing to check with: before a server runs on the copy, neither the
// API nor an admin task shows them, and the image has no sqlite3. backup
// now lists them, with the step each was running, as it writes the copy;
// a final deploy is not listed. A copy with none says so.
func TestBackupListsWhatARestoreResumes(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := context.Background()
	data, _, n := openNode(t)
	at := time.Date(2026, 12, 7, 13, 0, 0, 0, time.UTC)
	add := func(id, env string, state manent.State, running string) {
		t.Helper()
		err := n.Store.Tx(ctx, func(tx *sql.Tx) error {
			if err := n.Store.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: id, Application: "billing",
				Environment: env, Version: "1", State: state, Requester: "token:ci", CreatedAt: at}, Input: []byte(`{}`)}); err != nil {
				return err
			}
			at = at.Add(time.Second)
			return n.Store.PlanSteps(ctx, tx, id, []string{"deploy", "smoke", "activation"})
		})
		if err != nil {
			t.Fatal(err)
		}
		if running != "" {
			if _, err := n.Store.StepStarted(ctx, id, running, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The empty database first.
	var stdout, stderr bytes.Buffer
	if code := Run(ctx, []string{"admin", "backup", "--data-dir", data, "--to", "empty.db"}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "\nthe copy holds no deploy that is not final: a server started on it resumes none\n") {
		t.Fatalf("backup of a database with no deploy printed %q", stdout.String())
	}
	add("dpl_done", "prod", manent.StateSuccess, "")
	add("dpl_slow", "prod", manent.StatePending, "smoke")
	add("dpl_gated", "staging", manent.StateAwaitingApproval, "")
	n.Close(time.Second)

	stdout.Reset()
	if code := Run(ctx, []string{"admin", "backup", "--data-dir", data, "--to", "backup.db"}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	want := regexp.MustCompile(`(?s)^backed up .*manent\.db to backup\.db: \d+\.\d MiB in \S+\n` +
		`a server started on this copy resumes 2 deploys not final in it \(keep this list with the copy\):\n` +
		`ID +APPLICATION +ENVIRONMENT +STATE +STEP RUNNING\n` +
		`dpl_slow +billing +prod +PENDING +smoke\n` +
		`dpl_gated +billing +staging +AWAITING_APPROVAL +-\n` +
		`a step running in the copy runs again from its start: what it did after this backup is done again\.`)
	if !want.MatchString(out) || strings.Contains(out, "dpl_done") {
		t.Fatalf("backup printed\n%s\nwant it to match %s, without dpl_done", out, want)
	}
	// The copy is read, not written: nothing beside it.
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "backup.db empty.db" {
		t.Fatalf("the backups' directory holds %q, want the two copies alone", names)
	}
}

// The restore of docs/operations.md (Backups), step by step, on a data
// directory whose server is stopped: the current files moved aside, the
// copy put in place and checked with verify-audit before the server
// starts. A copy truncated on its way is refused there (exit 2, the file
// named, "malformed", damaged: another copy) and the files moved aside
// are whole, to be put back. A whole copy verifies; an anchor printed after the backup then
// reports the rows the restore took away, as the docs say it does.
func TestRestoreProcedure(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	data, _, n := openNode(t)
	audit := func(n *node.Node, what string) {
		t.Helper()
		if err := n.Store.AppendAudit(ctx, store.AuditEntry{Identity: "token:ci", Action: "deployment.submit", Target: what, Outcome: "accepted"}); err != nil {
			t.Fatal(err)
		}
	}
	audit(n, "before the backup")
	n.Close(time.Second)
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Run(ctx, append([]string{"admin"}, args...), &stdout, &stderr, nil)
		return code, stdout.String(), stderr.String()
	}
	if code, _, errOut := run("backup", "--data-dir", data, "--to", "backup.db"); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, errOut)
	}
	// Work goes on after the backup, and an anchor is kept.
	var err error
	if n, err = node.Open(ctx, mustConfig(t, data), node.Options{}); err != nil {
		t.Fatal(err)
	}
	audit(n, "after the backup")
	n.Close(time.Second)
	code, out, _ := run("verify-audit", "--data-dir", data)
	m := regexp.MustCompile(`(?m)^anchor: (\d+:[0-9a-f]{64}) `).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("verify-audit before the restore: exit %d, %q", code, out)
	}
	anchor := m[1]

	// Move the current files aside.
	aside := filepath.Join(dir, "before-restore")
	if err := os.Mkdir(aside, 0o700); err != nil {
		t.Fatal(err)
	}
	moved := map[string][]byte{}
	for _, f := range []string{"manent.db", "manent.db-wal", "manent.db-shm"} {
		b, err := os.ReadFile(filepath.Join(data, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		moved[f] = b
		if err := os.Rename(filepath.Join(data, f), filepath.Join(aside, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(data, node.WebKeyFile)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	whole, err := os.ReadFile("backup.db")
	if err != nil {
		t.Fatal(err)
	}

	// A copy cut short on its way: refused, nothing lost.
	if err := os.WriteFile(filepath.Join(data, "manent.db"), whole[:len(whole)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(data, "manent.db")
	// It says that the file is damaged and to take another copy; it said
	// "no manent database at …" and to point at the server's database
	// with --config, --data-dir or --database, which was where it looked.
	if code, _, errOut := run("verify-audit", "--data-dir", data); code != 2 || !strings.Contains(errOut, db) || !strings.Contains(errOut, "malformed") ||
		!strings.Contains(errOut, "the SQLite database file is damaged or is no database (a copy cut short or corrupted on its way?)") ||
		!strings.Contains(errOut, "Restore another copy") || strings.Contains(errOut, "Point at") {
		t.Fatalf("verify-audit of a truncated copy: exit %d, stderr %q; want 2 naming %s, malformed, damaged, another copy", code, errOut, db)
	}
	for f, b := range moved {
		if got, err := os.ReadFile(filepath.Join(aside, f)); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s moved aside changed (%v)", f, err)
		}
	}

	// The whole copy: it verifies, and the anchor taken since reports the
	// rows the restore took away.
	if err := os.WriteFile(db, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("verify-audit", "--data-dir", data); code != 0 || !strings.Contains(out, "audit log intact") {
		t.Fatalf("verify-audit of the restored copy: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ := run("verify-audit", "--data-dir", data, "--anchor", anchor); code != 1 || !strings.Contains(out, "rows at the end were deleted and the head moved back") {
		t.Fatalf("verify-audit --anchor of a run after the backup: exit %d, %q; want 1, the head moved back", code, out)
	}
}

// mustConfig is the configuration of a server on data.
func mustConfig(t *testing.T, data string) *node.Config {
	t.Helper()
	cfg, err := loadConfig("", map[string]string{"data_dir": data})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

package servercmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

func newAdminCmd(stdout, stderr io.Writer, plugins node.Registrar) *cobra.Command {
	admin := &cobra.Command{
		Use:   "admin",
		Short: "Administrative tasks on the server's database",
		Long: `Administrative tasks on the server's database.

Point a task at the server's database as the server is: --config with its
manent-server.yaml, --data-dir with its data directory, or --database with
its URL. A task never creates nor migrates a database: when there is none
there (a SQLite file that does not exist or holds no manent tables, a
PostgreSQL database that does not exist or holds none), or it is at
another release's schema, the task exits 2 naming the database it looked
for. A MANENT_* variable that is nearly one the server reads
(MANENT_DATADIR) is warned of, as serve does.`,
		// A mistyped task is a usage error (exit 2), not the help with exit 0.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q; run '%s --help' for the tasks", args[0], cmd.CommandPath(), cmd.CommandPath())}
			}
			return cmd.Help()
		},
	}
	var db adminFlags
	var executors []string
	recover := &cobra.Command{
		Use:   "recover --executor-id ID",
		Short: "Hand a dead worker's running deploys back to the queue",
		Long: `Hand the running (PENDING) deploys of a dead worker back to the deploy
queue, where a live worker resumes each from its last completed step.

Only for a worker that is gone for good: recovering a live worker's deploys
would run their current steps twice. On PostgreSQL a worker listed alive is
watched until workers.dead_after (its own, or this configuration's when
longer) has passed since its last heartbeat — by then a paused or cut-off
worker has stopped its steps itself — and refused if it beats; then it is
listed dead. A worker restarted with the same
executor id recovers its own deploys by itself. On PostgreSQL the live
workers do this by themselves once a worker is silent for
workers.dead_after (see admin workers); this command is for doing it now.
On SQLite a server does it at start for every other executor id.

An executor id no server ever ran with on the database (a typo: see admin
workers) recovers nothing and exits 2 saying so, naming the database's
workers.`,
		Example: `  manent-server admin recover --executor-id worker-2 --config /etc/manent/manent-server.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(executors) == 0 {
				return usageError{fmt.Errorf("--executor-id is required")}
			}
			cfg, err := db.load(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			cfg.ExecutorID = fmt.Sprintf("admin-%d", time.Now().UnixNano())
			n, err := node.Open(cmd.Context(), cfg, node.Options{Plugins: plugins, Logger: newLogger(stderr, "warn"), Once: true})
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("%w: stop it first — or just restart it: on SQLite a starting server recovers every other executor id's deploys itself", err)
			}
			if err != nil {
				return err
			}
			defer n.Close(5 * time.Second)
			// On SQLite this command holds the database's lock: no server
			// runs. On PostgreSQL a worker that still beats is alive.
			if n.Store.Postgres() {
				for _, id := range executors {
					if err := silent(cmd.Context(), n.Store, id, cfg.Workers.Heartbeat, cfg.Workers.DeadAfter, stderr); err != nil {
						return err
					}
				}
			}
			ids, err := n.Engine.Recover(executors)
			if err != nil {
				return fmt.Errorf("recover: %w", err)
			}
			// A mistyped id recovered nothing and said "0 deploys of
			// worker2 handed back", exit 0: read as "worker-2 had none".
			// Every worker that ran on the database has its row there.
			known, err := n.Store.Workers(cmd.Context())
			if err != nil {
				return err
			}
			names := make([]string, len(known))
			for i, w := range known {
				names[i] = w.ID
			}
			var unknown []string
			for _, id := range executors {
				if !slices.Contains(names, id) {
					unknown = append(unknown, id)
				}
			}
			if len(unknown) > 0 {
				what := fmt.Sprintf("no worker %s has run on this database (its workers: %s; manent-server admin workers lists them)", strings.Join(unknown, ", "), cmp.Or(strings.Join(names, ", "), "none"))
				if len(ids) == 0 {
					return usageError{fmt.Errorf("%s: nothing was recovered; check the executor id", what)}
				}
				fmt.Fprintf(stderr, "%s: check the executor id\n", what)
			}
			fmt.Fprintf(stdout, "%s of %s handed back to the queue\n", manent.Plural(len(ids), "deploy"), strings.Join(executors, ", "))
			for _, id := range ids {
				fmt.Fprintln(stdout, id)
			}
			return nil
		},
	}
	f := recover.Flags()
	f.Var(&listFlag{items: &executors, what: "an executor id"}, "executor-id", "executor id of the dead worker (repeatable, or comma-separated)")
	db.add(f)
	admin.AddCommand(recover, newVerifyAuditCmd(stdout, stderr), newWorkersCmd(stdout, stderr, plugins), newTokenCmd(stdout, stderr), newBackupCmd(stdout, stderr))
	return admin
}

// silent makes sure worker id no longer beats, and no longer runs a step
// (PostgreSQL): a worker listed alive is watched until its dead_after (or
// deadAfter, the larger) has passed since its last heartbeat — the bound
// by which a worker whose heartbeats stopped landing (paused, cut off from
// the database) has stopped its steps' processes itself (its lifeline), as
// the live workers wait before they take one over. If it beats meanwhile it
// is alive, and recovering its deploys would run their steps twice. A
// silent one is then listed dead, so that should it wake, its next
// heartbeat fails and it stops before its next step.
func silent(ctx context.Context, st *store.Store, id string, heartbeat, deadAfter time.Duration, stderr io.Writer) error {
	if heartbeat <= 0 {
		heartbeat = engine.DefaultHeartbeat
	}
	if deadAfter <= 0 {
		deadAfter = engine.DefaultDeadAfter
	}
	b, err := st.LastBeat(ctx, id)
	if err != nil || !b.Found {
		return err
	}
	if first := b.Last; b.State == store.WorkerAlive {
		window := max(deadAfter, b.DeadAfter, 2*heartbeat+time.Second)
		if b.Ago < window {
			fmt.Fprintf(stderr, "worker %s beat %s ago: making sure it beats no more (up to %s)\n", id, b.Ago.Round(time.Millisecond), (window - b.Ago).Round(time.Millisecond))
		}
		for b.State == store.WorkerAlive && b.Ago < window {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(100*time.Millisecond, window-b.Ago)):
			}
			if b, err = st.LastBeat(ctx, id); err != nil {
				return err
			}
			if b.State == store.WorkerAlive && b.Last != first {
				return fmt.Errorf("worker %s is alive: it beat %s ago, while this command watched; recovering its deploys would run their current steps twice. Stop it first (SIGTERM hands its deploys over by itself)", id, b.Ago.Round(time.Millisecond))
			}
		}
	}
	_, err = st.DeclareGone(ctx, id)
	return err
}

func newTokenCmd(stdout, stderr io.Writer) *cobra.Command {
	var name string
	var groups []string
	cmd := &cobra.Command{
		Use:   "new-token --name NAME [--group GROUP]...",
		Short: "Make a random API token and its auth.tokens entry",
		Long: `Make a random API token (mnt_ and 128 random bits) for a person, a CI job or
an agent, and the entry that declares it in auth.tokens of
manent-server.yaml. The server stores only the token's SHA-256, so the
token is printed once, alone on stdout (TOKEN=$(manent-server admin
new-token --name ci) keeps it out of the terminal); the entry to add and
what to do next go to stderr. Nothing is written anywhere: add the entry,
grant the subject token:NAME its permissions under rbac:, and restart the
server. An empty --group ("", or an empty item of a,,b) is refused (exit
2): leave the flag out for a token of no group.

Reads no configuration and no database.`,
		Example: `  manent-server admin new-token --name ci --group deployers
  TOKEN=$(manent-server admin new-token --name agent-prod-eu-1)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usageError{fmt.Errorf("--name is required (the token's name in auth.tokens; its subject is token:NAME)")}
			}
			token, tc, err := auth.NewStaticToken(name, groups)
			if err != nil {
				return usageError{err}
			}
			entry, err := yaml.Marshal([]auth.TokenConfig{tc})
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, token)
			fmt.Fprintf(stderr, "The token above is shown once. Add its entry to auth.tokens in manent-server.yaml:\n\nauth:\n  tokens:\n%s\n"+
				"then grant the subject %q its permissions under rbac: (see docs/security.md) and restart the server.\n",
				indent(string(entry), "    "), "token:"+tc.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the token's name: its subject is token:NAME")
	cmd.Flags().Var(&listFlag{items: &groups, what: "a group name"}, "group", "a group of the token (repeatable, or comma-separated), as RBAC subjects group:GROUP")
	return cmd
}

// listFlag is a repeatable flag whose values may also be comma-separated,
// as pflag's StringSlice, but that refuses an empty item: with StringSlice,
// --group "" (a variable left empty) was dropped without a word, and
// --executor-id "w1," took "" for an executor id.
type listFlag struct {
	items *[]string
	what  string // "a group name"
}

func (l *listFlag) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		if strings.TrimSpace(item) == "" {
			return fmt.Errorf("%s must not be empty (leave the flag out to give none)", l.what)
		}
		*l.items = append(*l.items, item)
	}
	return nil
}

func (l *listFlag) String() string {
	if l.items == nil {
		return ""
	}
	return strings.Join(*l.items, ",")
}

func (l *listFlag) Type() string { return "strings" }

// indent prefixes each line of s.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "")
}

func newVerifyAuditCmd(stdout, stderr io.Writer) *cobra.Command {
	var db adminFlags
	var anchors []string
	cmd := &cobra.Command{
		Use:   "verify-audit [--anchor SEQ:HASH]...",
		Short: "Check the audit log's hash chain",
		Long: `Walk the whole audit log and recompute its hash chain. An edited row, a
deleted or inserted row, or rows deleted at the end are each reported with
the row where it shows, and the command exits 1. Exit 0 means the chain is
intact; exit 2, that there is no manent database where it looked (it
creates none), that the SQLite file there is damaged (a copy cut short on
its way: restore another), or that the flags are wrong; exit 3, that the chain could not be
checked (the database could not be reached or read: try again), which a
job must not take for a tampered log.

The chain lives in the database it protects: whoever can write the audit
table can also delete its last rows and move the head back, or rewrite the
chain from an edited row on, and the chain then verifies. So each
successful run prints its last row as an anchor, "anchor: SEQ:HASH": keep
it outside the database (the job's log, a ticket, another system), and
pass it to a later run with --anchor; that row must still be there with
that hash, or the command exits 1 saying what changed.`,
		Example: `  manent-server admin verify-audit --data-dir ./manent-data
  manent-server admin verify-audit --anchor 18204:3f5c…e1 --anchor 17990:0b2d…7a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var want []store.AuditAnchor
			for _, a := range anchors {
				seq, hash, ok := strings.Cut(a, ":")
				n, err := strconv.ParseInt(seq, 10, 64)
				if !ok || err != nil || n < 1 || len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
					return usageError{fmt.Errorf("--anchor %q: want SEQ:HASH as verify-audit printed it (a row number, a colon, 64 hexadecimal digits)", manent.ClipText(a, 100))}
				}
				want = append(want, store.AuditAnchor{Seq: n, Hash: hash})
			}
			// An error here is no verdict on the chain: exit 3, not 1.
			unchecked := func(err error) error {
				if errors.As(err, new(usageError)) {
					return err
				}
				return uncheckedError{fmt.Errorf("the audit log could not be checked: %w", err)}
			}
			st, _, err := db.openStore(cmd.Context(), stderr)
			if err != nil {
				return unchecked(err)
			}
			defer st.Close()
			n, problems, err := st.VerifyAudit(cmd.Context())
			if err != nil {
				return unchecked(err)
			}
			for _, a := range want {
				p, err := st.CheckAuditAnchor(cmd.Context(), a)
				if err != nil {
					return unchecked(err)
				}
				if p != "" {
					problems = append(problems, store.AuditProblem{Seq: a.Seq, Problem: "anchor " + a.String() + ": " + p})
				}
			}
			for _, p := range problems {
				fmt.Fprintf(stdout, "row %d: %s\n", p.Seq, p.Problem)
			}
			if len(problems) > 0 {
				return fmt.Errorf("the audit log was tampered with: %s in %s", manent.Plural(len(problems), "problem"), manent.Plural(int(n), "row"))
			}
			fmt.Fprintf(stdout, "audit log intact: %s", manent.Plural(int(n), "row"))
			if len(want) > 0 {
				fmt.Fprintf(stdout, ", %s held", manent.Plural(len(want), "anchor"))
			}
			fmt.Fprintln(stdout)
			if last, err := st.AuditLast(cmd.Context()); err == nil && last.Seq > 0 {
				fmt.Fprintf(stdout, "anchor: %s (keep it outside the database; --anchor checks it later)\n", last)
			}
			return nil
		},
	}
	db.add(cmd.Flags())
	cmd.Flags().StringArrayVar(&anchors, "anchor", nil, "a row that must still be in the chain with its hash, SEQ:HASH as an earlier run printed it (repeatable)")
	return cmd
}

func newBackupCmd(stdout, stderr io.Writer) *cobra.Command {
	var db adminFlags
	var to string
	cmd := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Copy the SQLite database, online, to a new file",
		Long: `Copy the server's SQLite database to FILE while the server runs: the copy
is the database at one instant (every deploy with its steps, events, audit
entries and DBOS checkpoints), written under a temporary name beside FILE,
synced, then given its name — FILE is the whole copy or does not exist. It
is private (mode 0600): it holds the audit log and the deploys' inputs.
FILE must not exist (a backup never overwrites one), and its directory
must. The server's image has no sqlite3: this is the way to back it up.

To restore: stop the server; move manent.db, manent.db-wal and
manent.db-shm out of its data directory (keep them until the restored
server runs) and remove web-session.key (a sign-out made after the backup
is not in the copy: with the old key, a cookie signed out since would open
a session again; the server makes a new key, and every web session ends);
put the copy in place as manent.db; check it with "admin verify-audit"
(a copy cut short on its way is refused, exit 2); start the server.
The deploys that were running at the time of the backup resume from their
last step recorded in it: check what they would do again first. The
command lists them as it writes the copy (keep its output with the file):
each deploy not final in the copy, its state and the step it was running,
which runs again from its start on the restored server. The
inventory is the backup's too: a target deployed after the backup keeps
that release live; deploy such an environment again to bring both into
line.

On PostgreSQL the task exits 2: use pg_dump (manent's tables and the dbos
schema, both needed) or continuous archiving.`,
		Example: `  manent-server admin backup --data-dir ./manent-data --to /backup/manent-$(date +%F).db
  kubectl exec deploy/manent -- manent-server admin backup --to /data/manent-backup.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usageError{fmt.Errorf("--to is required: the new file to write the copy to")}
			}
			if fi, err := os.Stat(filepath.Dir(to)); err != nil || !fi.IsDir() {
				return usageError{fmt.Errorf("--to %s: the directory %s does not exist", to, filepath.Dir(to))}
			}
			st, cfg, err := db.openStore(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			defer st.Close()
			start := time.Now()
			size, resumed, err := st.Backup(cmd.Context(), to)
			if errors.Is(err, store.ErrBackupPostgres) {
				return usageError{err}
			}
			if errors.Is(err, os.ErrExist) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "backed up %s to %s: %.1f MiB in %s\n", store.Where(cfg.Database), to,
				float64(size)/(1<<20), time.Since(start).Round(time.Millisecond))
			return printResumed(stdout, resumed)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the new file to write the copy to (it must not exist)")
	db.add(cmd.Flags())
	return cmd
}

// printResumed lists the deploys a server started on a backup resumes:
// what the restore procedure says to check before starting one, which
// neither the API nor another task shows before a server runs on the copy.
func printResumed(w io.Writer, resumed []store.Resumed) error {
	if len(resumed) == 0 {
		_, err := fmt.Fprintln(w, "the copy holds no deploy that is not final: a server started on it resumes none")
		return err
	}
	fmt.Fprintf(w, "a server started on this copy resumes %s not final in it (keep this list with the copy):\n", manent.Plural(len(resumed), "deploy"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPPLICATION\tENVIRONMENT\tSTATE\tSTEP RUNNING")
	for _, r := range resumed {
		step := r.Step
		if step == "" {
			step = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Application, r.Environment, r.State, step)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "a step running in the copy runs again from its start: what it did after this backup is done again. A waiting deploy waits again; what was approved, cancelled or submitted after this backup is not in the copy.")
	return err
}

func newWorkersCmd(stdout, stderr io.Writer, plugins node.Registrar) *cobra.Command {
	var db adminFlags
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the workers sharing the database",
		Long: `List the manent-server workers that share the database (SPEC §11.3): id,
state (alive, leaving, dead), when each was last seen, and how many deploys
run on it: RUNNING those that hold one of its slots (at most its
workers.slots), WAITING those that hold none (between rollout waves, for
an approval, a freeze, an observation or a slot back; as of its last
heartbeat). A dead worker's deploys are taken over by a live worker
within workers.dead_after + 15 s (PostgreSQL); a count on a dead worker is
what still waits for that. CONFIG compares each worker's policy-relevant
configuration (governance, rbac, auth subjects, plugins.steps, allow-lists,
workflow version) with the live workers': "same", or "differs from w1
(governance)" — give every worker the same configuration, or a deploy
submitted through one may be refused at its config step on another.`,
		Example: `  manent-server admin workers --config /etc/manent/manent-server.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := db.load(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			cfg.ExecutorID = fmt.Sprintf("admin-%d", time.Now().UnixNano())
			n, err := node.Open(cmd.Context(), cfg, node.Options{Plugins: plugins, Logger: newLogger(stderr, "warn"), NoFileLock: true, Once: true})
			if err != nil {
				return err
			}
			defer n.Close(5 * time.Second)
			ws, err := n.Engine.Workers(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tLAST SEEN\tRUNNING\tWAITING\tVERSION\tCONFIG\tTAKEN OVER BY")
			for _, w := range ws {
				ago := time.Since(w.LastSeen).Round(time.Second)
				fmt.Fprintf(tw, "%s\t%s\t%s (%s ago)\t%d\t%d\t%s\t%s\t%s\n", w.ID, w.State, w.LastSeen.Format(time.RFC3339), ago, w.Running, w.Waiting, w.Version, w.ConfigNote, w.TakenOverBy)
			}
			return tw.Flush()
		},
	}
	db.add(cmd.Flags())
	return cmd
}

// adminFlags are the flags that point an admin task at the server's
// database.
type adminFlags struct{ config, dataDir, database string }

func (a *adminFlags) add(f *pflag.FlagSet) {
	f.StringVar(&a.config, "config", "", "the server's configuration file (manent-server.yaml)")
	f.StringVar(&a.dataDir, "data-dir", "", "the server's data directory (default ./manent-data)")
	f.StringVar(&a.database, "database", "", "the server's database: sqlite:<path> or postgres://…")
}

// load reads the configuration an admin task runs with and checks that
// its database exists at this build's schema. An admin task never creates
// nor migrates a database: run against the wrong directory, verify-audit
// reported "audit log intact: 0 rows" over the empty one it had just made.
// A missing database is a usage error (exit 2, apart from verify-audit's 1
// for a tampered log) naming what was tried and how to point elsewhere.
// A MANENT_* variable that is nearly a key's is warned of on stderr, as
// serve does (warnStrayVariables): MANENT_DATADIR=/srv/manent was ignored
// without a word, and the task looked in ./manent-data.
func (a *adminFlags) load(ctx context.Context, stderr io.Writer) (*node.Config, error) {
	cfg, err := loadConfig(a.config, map[string]string{"data_dir": a.dataDir, "database": a.database})
	if err != nil {
		return nil, usageError{err}
	}
	warnStrayVariables(newLogger(stderr, cfg.LogLevel), cfg)
	if err := store.CheckExisting(ctx, cfg.Database); errors.Is(err, store.ErrNoDatabase) {
		return nil, usageError{fmt.Errorf("%w (%s). Point at the server's database with --config <its manent-server.yaml>, --data-dir <its data directory> or --database <its URL>", err, a.origin())}
	} else if errors.Is(err, store.ErrDamaged) {
		return nil, usageError{fmt.Errorf("%w. Restore another copy (or put back the database files a restore moved aside)", err)}
	} else if otherRelease(err) {
		return nil, usageError{err}
	} else if err != nil {
		return nil, err
	}
	return cfg, nil
}

// openStore opens the database load found, for a task that needs the
// store alone (no engine), and checks its schema again on the open store:
// nothing is migrated. The caller closes it.
func (a *adminFlags) openStore(ctx context.Context, stderr io.Writer) (*store.Store, *node.Config, error) {
	cfg, err := a.load(ctx, stderr)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, cfg.Database)
	if err != nil {
		return nil, nil, err
	}
	if err := st.CheckSchema(ctx, store.Where(cfg.Database)); err != nil {
		st.Close()
		if otherRelease(err) {
			err = usageError{err}
		}
		return nil, nil, err
	}
	return st, cfg, nil
}

// otherRelease reports a database at another release's schema: like a
// missing one, a usage error (exit 2, as the help says), not verify-audit's
// exit 1 of a tampered log.
func otherRelease(err error) bool {
	return errors.Is(err, store.ErrSchemaNewer) || errors.Is(err, store.ErrSchemaOlder)
}

// origin says where the database URL came from, in the order of precedence.
func (a *adminFlags) origin() string {
	switch {
	case a.database != "":
		return "from --database"
	case os.Getenv("MANENT_DATABASE") != "":
		return "from MANENT_DATABASE"
	case a.config != "":
		return "from --config " + a.config + " (database, else data_dir)"
	case a.dataDir != "":
		return "from --data-dir"
	case os.Getenv("MANENT_DATA_DIR") != "":
		return "from MANENT_DATA_DIR"
	}
	wd, _ := os.Getwd()
	return "the default --data-dir ./manent-data, in the working directory " + wd
}

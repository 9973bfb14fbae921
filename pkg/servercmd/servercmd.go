// Package servercmd is the manent-server command line: `serve`, `admin`
// subcommands and `version`, reading manent-server.yaml with viper.
// cmd/manent-server only calls Main with the built-in plugins; the server
// itself is assembled by pkg/node.
//
// It imports pkg/node, pkg/store (the database URL, faults, the workers'
// heartbeats and whether a database exists), pkg/version, pkg/atomicfile
// (the trial server's record), pkg/auth (admin new-token, the check of auth and rbac), pkg/server (the
// defaults of its limits), pkg/web (the default of its sign-in limit),
// pkg/budget (the check of trusted_proxies), pkg/engine (the default heartbeat and dead_after, for admin recover and
// the check of workers:), plugins/local (the default of
// plugins.local.max_zip_entries), plugins/external (the default and bound
// of plugins.validate_timeout), pkg/yamlvalue, pkg/manent and pkg/suggest
// (placing and explaining the mistakes of manent-server.yaml).
package servercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/version"
)

// Main runs manent-server with the process's arguments and the given
// plugins (plugins/builtin.Register) and returns the exit code.
func Main(plugins node.Registrar) int {
	if err := hideProcess(); err != nil {
		fmt.Fprintf(os.Stderr, "Error: hide the process from its steps (prctl PR_SET_DUMPABLE): %v\n", err)
		return 1
	}
	if err := closeInheritedOnExec(); err != nil {
		fmt.Fprintf(os.Stderr, "Error: keep inherited files from the steps (close-on-exec): %v\n", err)
		return 1
	}
	return Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, plugins)
}

// Run runs manent-server with args; tests call it in-process.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, plugins node.Registrar) int {
	root := newRoot(stdout, stderr, plugins)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) || node.IsConfigError(err) || strings.Contains(err.Error(), "unknown flag") || strings.Contains(err.Error(), "unknown command") {
			return 2
		}
		var un uncheckedError
		if errors.As(err, &un) {
			return 3
		}
		return 1
	}
	return 0
}

type usageError struct{ error }

// uncheckedError is a check that could not be done (verify-audit with the
// database unreachable): exit 3, never the 1 of a check that failed.
type uncheckedError struct{ error }

func (e uncheckedError) Unwrap() error { return e.error }

func newRoot(stdout, stderr io.Writer, plugins node.Registrar) *cobra.Command {
	root := &cobra.Command{
		Use:           "manent-server",
		Short:         "The manent deploy orchestrator server",
		Long:          "manent-server checks submitted deploys and runs each one as a durable DBOS workflow.\nWith no configuration it starts a local trial server on 127.0.0.1:8080.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A flag's value that cannot be read is a usage error (exit 2), as an
	// unknown flag is: `admin new-token --group ""` exits 2 naming the flag.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCmd(stdout, stderr, plugins), newAdminCmd(stdout, stderr, plugins), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(stdout, "manent-server", version.String())
		},
	})
	return root
}

// trialCLIServer is the server the manent CLI talks to when nothing
// names one (pkg/cli.DefaultServer).
const trialCLIServer = "http://127.0.0.1:8080"

type serveOptions struct {
	config, listen, dataDir, database, executorID string
}

func newServeCmd(stdout, stderr io.Writer, plugins node.Registrar) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the API and the deploy workers",
		Long: `Run the HTTP API and the deploy workers.

With no --config the server runs in local trial mode (SPEC §8.1): it listens
on 127.0.0.1:8080, keeps everything in --data-dir (manent.db, admin.token,
work directories), allows file:// and http(s):// artifacts, and deploys with
the local plugin into <data-dir>/targets/<application>/<environment> when a
descriptor names no target. The admin token is MANENT_BOOTSTRAP_TOKEN when
set, otherwise it is generated, printed once and written to
<data-dir>/admin.token (mode 0600). Listening on a loopback address, the
trial server records that file's path for its address in
$XDG_CONFIG_HOME/manent/trial-servers.yaml (default ~/.config; mode 0600),
where the manent CLI finds it from any directory.

Several workers share one PostgreSQL database, each with its own
--executor-id (docs/operations.md): each records a heartbeat every
workers.heartbeat; a worker silent for workers.dead_after has its running
deploys taken over by another. A second process with a live worker's
executor id stops with an error instead of running its deploys too (one
restarted after a crash on the same host and data dir starts at once;
elsewhere it waits until the old one is silent for workers.dead_after).
SIGTERM stops taking deploys, lets the
running steps finish (up to 20s) and hands the rest over at once; with
shutdown_delay set it first goes on serving that long while /readyz
answers 503, so that load balancers stop sending it requests. A worker
that finds it was declared dead (it was paused), or whose heartbeat has
not reached the database for about two thirds of workers.dead_after (cut
off), stops its steps' processes and exits with an error: run it under a
supervisor. With SQLite, a second server on the same database file refuses
to start, and a server takes over at start the running deploys that
servers of other executor ids left on it.

Each server starts a second, small manent-server process, its lifeline:
if the server dies, however it dies, the lifeline stops its steps'
processes at once, so that a step taken over elsewhere never runs twice;
on PostgreSQL it also does when the server is paused past its cut-off.

A configuration mistake is reported by file, line and column with every
other one (exit 2) — those of governance.rules or governance.rego (the
file is read and checked), environments.*, artifacts.sources and
plugins.steps too — as is a database URL that cannot be parsed (a bad
port or sslmode; a database that cannot be reached is exit 1); an address
in use, naming what chose it (--listen, MANENT_LISTEN or the file's line),
or a data directory the server cannot write, naming the flag that chooses
another (exit 1). A
configuration that can accept no credential (no auth.tokens, no
auth.oidc, no MANENT_BOOTSTRAP_TOKEN) starts with a warning: every
request is refused 401; so does one whose rbac subjects, approvers or
freezes' allow name a token:<name> that auth.tokens has not (it matches
no one).

Limits (docs/security.md): limits.connections (6000, kept 1024 below the
open-file limit), limits.streams_per_identity (200) and limits.streams
(5000) event streams, limits.submissions_per_minute (120 submissions, dry runs and rollbacks per
identity),
limits.refusals_per_minute (60 audited refusals per identity),
limits.sign_ins_per_minute (10 refused web sign-ins per client address),
limits.bearer_failures_per_minute (60 refused API credentials per client
address; behind a reverse proxy, name it in trusted_proxies, or all its
clients are one address),
schedules.min_interval (1m) and schedules.max_per_environment (25).

A descriptor's secrets may not name the server's own variables as env:
(MANENT_*, callbacks.secret_env's, itsm.token_env's), may name only the
variables of secrets.env (default: those of plugins.pass_env; BILLING_*
patterns) as env:, and secrets.files_under (default: none, any path) lists the directories its
file: secrets must be under: the secrets step tells the submitter whether
a variable is set or a file exists.`,
		Example: `  # local trial: one command, SQLite in ./manent-data
  manent-server serve

  # several workers on PostgreSQL
  manent-server serve --config /etc/manent/manent-server.yaml --executor-id worker-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), o, stdout, stderr, plugins)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "configuration file (manent-server.yaml; relative paths in it are read from its directory); none means local trial mode")
	f.StringVar(&o.listen, "listen", "", "address to listen on (default 127.0.0.1:8080)")
	f.StringVar(&o.dataDir, "data-dir", "", "directory for the database, admin token and work directories (default ./manent-data)")
	f.StringVar(&o.database, "database", "", "sqlite:<path> or postgres://… (default sqlite:<data-dir>/manent.db)")
	f.StringVar(&o.executorID, "executor-id", "", "this worker's executor id (default worker-1); on PostgreSQL a restarted worker keeps its id to resume its deploys itself")
	return cmd
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

func serve(ctx context.Context, o serveOptions, stdout, stderr io.Writer, plugins node.Registrar) error {
	setup := &setupCheck{plugins: plugins}
	cfg, from, err := loadConfigFrom(o.config, map[string]string{
		"listen": o.listen, "data_dir": o.dataDir, "database": o.database, "executor_id": o.executorID,
	}, setup)
	if err != nil {
		return usageError{err}
	}
	log := newLogger(stderr, cfg.LogLevel)
	warnStrayVariables(log, cfg)
	for _, w := range missingPluginDirs(cfg, from) {
		log.Warn(w)
	}
	if err := checkDataDir(cfg.DataDir); err != nil {
		return err
	}
	// Local trial mode has a bootstrap admin token; a configured server has
	// one only when MANENT_BOOTSTRAP_TOKEN is set.
	token, created := os.Getenv("MANENT_BOOTSTRAP_TOKEN"), false
	if cfg.Trial {
		if token, created, err = bootstrapToken(cfg.DataDir); err != nil {
			return err
		}
	}
	if !cfg.Trial && token == "" && len(cfg.Auth.Tokens) == 0 && cfg.Auth.OIDC == nil {
		// A first configuration with only listen: and database: ran a
		// server every request of which was refused 401, without a word.
		log.Warn("no credential can be accepted: the configuration has no auth.tokens and no auth.oidc, and MANENT_BOOTSTRAP_TOKEN is not set, so every API request and sign-in is refused (401); add auth.tokens (manent-server admin new-token makes one) and rbac rules, or run without --config for local trial mode")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	fenced := make(chan error, 1)
	n, err := node.Open(ctx, cfg, node.Options{Plugins: plugins, BootstrapToken: token, Logger: log,
		Setup: setup.built, OnFenced: func(err error) { fenced <- err }})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		n.Close(time.Second)
		return listenError(cfg.Listen, from("listen"), err)
	}
	if err := n.Launch(ctx); err != nil {
		ln.Close()
		n.Close(time.Second)
		return err
	}
	ln = netutil.LimitListener(ln, connectionLimit(cfg.Limits.Connections, log))
	hs := &http.Server{
		Handler:           n.API,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Its shutdown waits for the requests in flight: the event streams,
	// which last as long as their deploys, end first.
	hs.RegisterOnShutdown(n.API.EndStreams)
	addr := "http://" + ln.Addr().String()
	mode := "configured"
	if cfg.Trial {
		mode = "local trial mode"
	}
	fmt.Fprintf(stdout, "manent-server %s listening on %s (%s, executor %s, data in %s)\n", version.Version, addr, mode, cfg.ExecutorID, cfg.DataDir)
	if created {
		fmt.Fprintf(stdout, "admin token (shown once, also in %s): %s\n", filepath.Join(cfg.DataDir, "admin.token"), token)
	}
	if cfg.Trial && os.Getenv("MANENT_BOOTSTRAP_TOKEN") == "" {
		// The CLI finds the admin token from any directory (SPEC §8.1).
		if rec, err := recordTrialServer(ln.Addr(), cfg.DataDir); err != nil {
			log.Warn("the CLI will find the admin token only in this directory", "err", err)
		} else if rec != "" {
			fmt.Fprintf(stdout, "the manent CLI finds this token from any directory (recorded in %s)\n", rec)
		}
	}
	if cfg.Trial && addr != trialCLIServer {
		// The CLI asks http://127.0.0.1:8080 unless told otherwise: a
		// trial server elsewhere (--listen) says how to reach it.
		fmt.Fprintf(stdout, "the manent CLI asks %s unless told otherwise: export MANENT_SERVER=%s (or pass --server %s)\n", trialCLIServer, addr, addr)
	}
	log.Info("listening", "addr", addr, "executor_id", cfg.ExecutorID, "database", shownDatabase(cfg.Database), "trial", cfg.Trial)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	// stopFenced stops a worker declared dead while paused, or cut off
	// from the database: its deploys run elsewhere now, or will. Stop at
	// once; a supervisor starts it again. Its steps' processes go first;
	// the rest may wait on a database that does not answer, so it gets a
	// few seconds.
	stopFenced := func(err error) error {
		n.Procs.Kill()
		_ = hs.Close()
		closed := make(chan struct{})
		go func() { n.Close(time.Second); close(closed) }()
		select {
		case <-closed:
		case <-time.After(fencedCloseTimeout):
			log.Error("stopping without closing the database: it does not answer", "waited", fencedCloseTimeout.String())
		}
		return err
	}
	select {
	case err := <-errc:
		n.Close(10 * time.Second)
		return err
	case err := <-fenced:
		return stopFenced(err)
	case <-ctx.Done():
	}
	stop() // a second signal now kills the process
	if d := cfg.ShutdownDelay; d > 0 {
		// Ready no more, serving still: the load balancers notice
		// (/readyz) and stop sending requests before they are refused.
		n.API.Stopping()
		log.Info("shutting down in "+d.String()+" (shutdown_delay): /readyz answers 503 meanwhile, requests are still served", "delay", d.String())
		select {
		case <-time.After(d):
		case err := <-errc:
			n.Close(10 * time.Second)
			return err
		case err := <-fenced:
			return stopFenced(err)
		}
	}
	log.Info("shutting down: no new requests or deploys; running steps get 20s to finish, then this worker leaves and the others take its deploys over")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("requests still in flight 10s into the shutdown are cut off", "error", err)
	}
	n.Close(20 * time.Second)
	log.Info("stopped")
	return nil
}

// checkDataDir makes the data directory and makes sure the server can
// write in it, so that one it cannot is named with the flag that chooses
// another, not reported later as a bare "permission denied" from the file
// that happened to be written first.
func checkDataDir(dir string) error {
	fail := func(err error) error {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("data directory %s cannot be written (%v): choose another with --data-dir (data_dir), or let the server's user create and write it", dir, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fail(err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// listenError says what to do when the address cannot be listened on,
// naming what chose it (from, as loadConfigFrom says: "--listen",
// "MANENT_LISTEN", "listen at <file>:<line>:<column>", "" for the
// default): the hint said --listen also when the address came from the
// file or the variable, where the operator then looked for a flag no one
// had passed.
func listenError(addr, from string, err error) error {
	choose := func(what string) string {
		if from != "" && from != "--listen" {
			return fmt.Sprintf("the address comes from %s: choose another %s there (or with --listen)", from, what)
		}
		return "use --listen to choose another " + what
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("listen on %s: %w (%s, or stop the server using it)", addr, err, choose("address"))
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("listen on %s: %w (ports below 1024 need privileges: %s)", addr, err, choose("port"))
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}

// fencedCloseTimeout bounds the close of a fenced worker (see serve).
const fencedCloseTimeout = 5 * time.Second

// shownDatabase is the database URL the log may show: a sqlite: URL as
// given, any other without its password (store.Where).
func shownDatabase(s string) string {
	if strings.HasPrefix(s, "sqlite:") {
		return s
	}
	return store.Where(s)
}

// connectionReserve is how many file descriptors the server keeps for
// itself — database files and connections, steps' pipes and processes,
// artifacts — whatever its clients hold.
const connectionReserve = 1024

// connectionLimit is how many connections the server holds open at once
// (limits.connections): beyond it, new ones wait in the kernel's queue
// until one closes. Without a bound, anonymous clients holding idle
// connections took every file descriptor of a server, and its running
// deploys could no longer open a file, a pipe or a database connection.
// The limit is kept connectionReserve below the process's descriptor
// limit (ulimit -n), and said so when that lowers it.
func connectionLimit(want int, log *slog.Logger) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return want
	}
	most := int(min(rl.Cur, 1<<30))
	if most > 2*connectionReserve {
		most -= connectionReserve
	} else {
		most /= 2
	}
	if want > most {
		log.Warn("limits.connections lowered to keep file descriptors for the server's own work; raise the limit on open files (ulimit -n) for more",
			"limits.connections", want, "lowered_to", most, "open_files_limit", rl.Cur)
		return most
	}
	return want
}

// Package node is the composition root of manent-server: from a Config it
// opens the store, registers the plugins, builds authentication and RBAC,
// admission, the DBOS engine and the HTTP API. The binary (pkg/servercmd)
// and every test that needs a real server (pkg/servertest, the engine and
// server fixtures, the agent end-to-end test) build their server here, so
// there is one wiring.
//
// Built-in plugins are not wired here: the caller passes a Registrar
// (plugins/builtin.Register from cmd/manent-server), as caddy wires its
// modules from cmd/.
//
// It imports pkg/admit, pkg/auth, pkg/budget (trusted_proxies), pkg/egress, pkg/engine, pkg/envconfig,
// pkg/governance, pkg/itsm, pkg/manent, pkg/notify, pkg/plugin, pkg/server,
// pkg/store, pkg/urlpolicy, pkg/web and plugins/external; that is every
// server-side package but the command that calls it (pkg/manent for its
// error type, whose field errors a configuration error spells out).
package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/budget"
	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/urlpolicy"
	"github.com/manent-io/manent/pkg/web"
	"github.com/manent-io/manent/plugins/external"
)

// Host is what plugin registration may use of the node being built.
type Host struct {
	Config *Config
	Store  *store.Store
	// Procs runs step commands in their own process groups and records
	// them under <data_dir>/procs/<executor_id> (SPEC §11.2).
	Procs *plugin.Procs
	// Environments is the environment configuration (environments,
	// descriptor_policy): what it gives each environment's target.
	Environments *envconfig.Defaults
}

// Registrar registers plugins into reg (plugins/builtin.Register).
type Registrar func(reg *plugin.Registry, host Host) error

// Options are what Open needs beside the configuration.
type Options struct {
	// Plugins registers the built-in plugins (external plugins found on
	// plugins.path are registered by Open).
	Plugins Registrar
	// BootstrapToken, when set, is an admin token (SPEC §8.1).
	BootstrapToken string
	// Guard replaces the guard built from auth.* and rbac (tests only).
	Guard server.Guard
	// OnStore is called with the migrated store before the engine and the
	// API are built (tests: a store.OnCommit listener that must run before
	// the API's own).
	OnStore func(*store.Store)
	Logger  *slog.Logger
	// OnFenced is called once when the other workers declared this one
	// dead and took its deploys over: it runs nothing more and must stop
	// (manent-server exits). Nil: it is only logged.
	OnFenced func(error)
	// NoFileLock opens a SQLite database beside the server that owns it
	// (admin commands that only read); a node opened so must not Launch.
	NoFileLock bool
	// Once is for a one-shot admin command under an executor id of its
	// own: it takes no executor lock (and leaves no lock file behind), and
	// creates nothing — the database must exist at this build's schema
	// (store.CheckExisting; it is not migrated), the data dir is not made,
	// nor the web UI's session key. A node opened so must not Launch.
	Once bool
	// Setup is what CheckSetup built from this cfg, used instead of
	// building it again (nil: Open builds it).
	Setup *Setup
}

// ConfigError is a mistake in the configuration: the server must not start
// (manent-server exits 2).
type ConfigError struct{ Err error }

// Error names every field mistake a *manent.Error carries ("invalid auth
// configuration: auth.tokens[0].name: …; …"), so the operator sees what to
// fix, not only that something is wrong.
func (e *ConfigError) Error() string {
	msg := e.Err.Error()
	var me *manent.Error
	if errors.As(e.Err, &me) && len(me.Fields) > 0 {
		parts := make([]string, len(me.Fields))
		for i, f := range me.Fields {
			parts[i] = f.Path + ": " + f.Message
		}
		msg += ": " + strings.Join(parts, "; ")
	}
	return msg
}
func (e *ConfigError) Unwrap() error { return e.Err }

func configError(err error) error {
	if err == nil {
		return nil
	}
	return &ConfigError{Err: err}
}

// Node is an assembled manent-server: call Launch to start working, serve
// API over HTTP, and Close when done.
type Node struct {
	Config   *Config
	Store    *store.Store
	Plugins  *plugin.Registry
	Admitter *admit.Admitter
	Engine   *engine.Engine
	API      *server.Server
	// Web is the web UI, mounted on API at every path outside /api/.
	Web  *web.Handler
	Log  *slog.Logger
	lock *store.FileLock
	// seatLock makes this the only process with its executor id and
	// data_dir on this host.
	seatLock *store.FileLock
	// Procs are the process groups of running step commands.
	Procs *plugin.Procs
	// procsRoot holds each executor id's Procs directory.
	procsRoot string
}

// Open assembles a node from cfg. Nothing runs until Launch.
func Open(ctx context.Context, cfg *Config, o Options) (n *Node, err error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if r := cfg.Retention; r.Deploys > 0 && (r.Workflows <= 0 || r.Deploys < r.Workflows) {
		return nil, configError(fmt.Errorf("retention.deploys (%s) must be at least retention.workflows (%s): a deploy's workflows go first", r.Deploys, r.Workflows))
	}
	if !o.Once {
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if cfg.Artifacts.IdleTimeout < 0 || cfg.Artifacts.Timeout < 0 || cfg.Artifacts.MaxBytes < 0 {
		return nil, configError(errors.New("artifacts.idle_timeout, artifacts.timeout and artifacts.max_bytes must not be negative"))
	}
	if cfg.Workers.Heartbeat < 0 || cfg.Workers.DeadAfter < 0 {
		return nil, configError(errors.New("workers.heartbeat and workers.dead_after must not be negative"))
	}
	// 0 is the engine's default (a Config built in code); the rule holds
	// between the values the engine will run with.
	if hb, da := cmp.Or(cfg.Workers.Heartbeat, engine.DefaultHeartbeat), cmp.Or(cfg.Workers.DeadAfter, engine.DefaultDeadAfter); da < 3*hb {
		return nil, configError(fmt.Errorf("workers.dead_after (%s) must be at least three workers.heartbeat (%s)", da, hb))
	}
	if o.Once {
		// A SQLite file is checked before it is opened for writing: that
		// would create it, or write the WAL mode into an empty one.
		if err := store.CheckExisting(ctx, cfg.Database); errors.Is(err, store.ErrDatabaseURL) {
			return nil, configError(err)
		} else if err != nil {
			return nil, err
		}
	}
	st, err := store.Open(ctx, cfg.Database)
	if errors.Is(err, store.ErrDatabaseURL) {
		return nil, configError(err)
	}
	if err != nil {
		return nil, err
	}
	st.SetLogger(log.With("component", "store"))
	// One server per SQLite file (SPEC §11.3).
	var lock *store.FileLock
	if !o.NoFileLock {
		if lock, err = store.LockFile(cfg.Database); err != nil {
			st.Close()
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			st.Close()
			lock.Unlock()
		}
	}()
	// Workers starting together migrate one after the other: manent's
	// tables here, DBOS's system schema in engine.New below.
	if o.Once {
		if err := st.CheckSchema(ctx, store.Where(cfg.Database)); err != nil {
			return nil, err
		}
	} else {
		unlock, err := st.LockMigrations(ctx)
		if err != nil {
			return nil, err
		}
		defer unlock()
		if err := st.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	if o.OnStore != nil {
		o.OnStore(st)
	}
	if err := checkPassEnv(cfg); err != nil {
		return nil, configError(err)
	}
	if un := plugin.Unmasked(plugin.PassEnvSecrets(cfg.Plugins.PassEnv)); len(un) > 0 {
		log.Warn("values given to steps are not masked in their logs: shorter than "+strconv.Itoa(plugin.MinMasked)+" characters (docs/security.md, masking)",
			"variables", strings.Join(un, ", "))
	}
	procsRoot := filepath.Join(dataDir, "procs")
	// One process per executor id and data_dir on this host, which also
	// tells a restart here that its predecessor is dead (engine.Config.Seat).
	seatPath := filepath.Join(procsRoot, fileName(cfg.ExecutorID)+".lock")
	var seatLock *store.FileLock
	if !o.Once {
		seatLock, err = store.LockPath(seatPath)
		if errors.Is(err, store.ErrHeld) {
			return nil, fmt.Errorf("executor id %s is in use: another manent-server on this host runs with it and data_dir %s; give each worker its own --executor-id (executor_id in manent-server.yaml)", cfg.ExecutorID, dataDir)
		}
		if err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			seatLock.Unlock()
		}
	}()
	// The seat: this host, this boot and this lock. A predecessor with the
	// same seat held the lock this process now holds, so it is dead.
	host, _ := os.Hostname()
	seat := host + ":" + seatPath
	if boot := plugin.BootID(); boot != "" {
		seat += " boot " + boot
	}
	procs := plugin.NewProcs(filepath.Join(procsRoot, fileName(cfg.ExecutorID)), 0)
	// What CheckSetup built and checked, else built here.
	setup := o.Setup
	if setup == nil {
		setup = &Setup{}
	}
	envs := setup.environments
	if envs == nil {
		if envs, err = envconfig.FromConfig(cfg.Environments, cfg.DescriptorPolicy); err != nil {
			return nil, configError(err)
		}
	}
	reg := plugin.NewRegistry()
	if o.Plugins != nil {
		if err := o.Plugins(reg, Host{Config: cfg, Store: st, Procs: procs, Environments: envs}); err != nil {
			return nil, fmt.Errorf("plugins: %w", err)
		}
	}
	found := setup.external
	if found == nil {
		found, err = external.Discover(cfg.Plugins.Path)
	}
	if err == nil {
		for _, p := range found {
			p.PassEnv, p.Procs, p.ValidateTimeout = cfg.Plugins.PassEnv, procs, cfg.Plugins.ValidateTimeout
		}
		err = external.Register(reg, found)
	}
	if err != nil {
		return nil, configError(fmt.Errorf("plugins.path: %w", err))
	}
	decider := setup.governance
	if decider == nil {
		if decider, err = governance.FromConfig(cfg.Governance.Rules, cfg.Governance.Rego); err != nil {
			return nil, configError(fmt.Errorf("governance: %w", err))
		}
	}
	secret, err := callbackSecret(cfg)
	if err != nil {
		return nil, configError(err)
	}
	var sources urlpolicy.Sources
	switch {
	case setup.sources != nil:
		sources = *setup.sources
	case len(cfg.Artifacts.Sources) > 0 || !cfg.Trial:
		if sources, err = urlpolicy.NewSources(cfg.Artifacts.Sources); err != nil {
			return nil, configError(err)
		}
	default:
		sources = urlpolicy.TrialSources()
	}
	callbacks := urlpolicy.Callbacks{Allow: cfg.Callbacks.Allow}
	if err := callbacks.Validate(); err != nil {
		return nil, configError(err)
	}
	if err := cfg.validateEgress(); err != nil {
		return nil, configError(err)
	}
	guard := o.Guard
	var tokens admit.Tokens
	if guard == nil {
		g, err := newGuard(cfg, o.BootstrapToken, log)
		if err != nil {
			return nil, configError(err)
		}
		guard, tokens = g, g.Authn
		if !o.Once {
			for _, w := range tokenPatternsNamingNoToken(cfg, o.BootstrapToken != "", decider) {
				log.Warn(w)
			}
		}
	}
	// A descriptor's env: secrets name only the variables allowed:
	// secrets.env, else those plugins.pass_env already gives every step.
	secretEnv, secretEnvFrom := cfg.Secrets.Env, "secrets.env"
	if len(secretEnv) == 0 {
		secretEnv, secretEnvFrom = cfg.Plugins.PassEnv, "plugins.pass_env (secrets.env unset)"
	}
	adm, err := admit.New(admit.Config{
		Store: st, Authorizer: guard, Tokens: tokens, Plugins: reg,
		Sources: sources, Callbacks: callbacks, CallbacksSigned: len(secret) > 0,
		ChatChannels: slices.Sorted(maps.Keys(cfg.Chat)),
		Environments: envs, Governance: decider, ChangeManagement: cfg.ITSM.URL != "",
		Pipeline: cfg.Pipeline.Steps, StepPlugins: cfg.Plugins.Steps,
		ServerEnv: serverEnv(cfg), SecretFilesUnder: cfg.Secrets.FilesUnder,
		SecretEnv: secretEnv, SecretEnvFrom: secretEnvFrom,
		Trial: cfg.Trial, TargetsDir: filepath.Join(dataDir, "targets"),
		Worker: cfg.ExecutorID, Shared: st.Postgres(),
		ScheduleMinInterval: cfg.Schedules.MinInterval, SchedulesPerEnvironment: cfg.Schedules.MaxPerEnvironment,
		Logger: log.With("component", "admit"),
	})
	if err != nil {
		return nil, configError(err)
	}
	settings, err := policyDigest(cfg, o.BootstrapToken != "")
	if err != nil {
		return nil, configError(fmt.Errorf("digest the configuration: %w", err))
	}
	var changes itsm.Provider
	if cfg.ITSM.URL != "" {
		changes = &itsm.HTTP{URL: cfg.ITSM.URL, Token: os.Getenv(cfg.ITSM.TokenEnv)}
	}
	eng, err := engine.New(ctx, st, engine.Config{
		ExecutorID: cfg.ExecutorID, Slots: cfg.Workers.Slots, DataDir: dataDir,
		RetryBase: cfg.Workers.RetryBase, RetryMax: cfg.Workers.RetryMax, QueuePoll: cfg.Workers.QueuePoll,
		MaxRecoveryAttempts: cfg.Workers.MaxRecoveryAttempts, SchedulerPoll: cfg.Workers.SchedulerPoll,
		MaxArtifactBytes:    cfg.Artifacts.MaxBytes,
		ArtifactIdleTimeout: cfg.Artifacts.IdleTimeout, ArtifactTimeout: cfg.Artifacts.Timeout,
		ArtifactFiles: func(p string) error { return sources.Allowed((&url.URL{Scheme: "file", Path: p}).String()) },
		Plugins:       reg, PassEnv: cfg.Plugins.PassEnv, Admitter: adm, ITSM: changes, ChangePoll: cfg.ITSM.Poll, ChangeGiveUp: cfg.ITSM.GiveUpAfter,
		Callbacks: callbacks, CallbackSecret: secret, Chat: cfg.Chat,
		Retention: engine.Retention{Workflows: cfg.Retention.Workflows, Logs: cfg.Retention.Logs,
			Deploys: cfg.Retention.Deploys, Every: cfg.Retention.Every},
		Heartbeat: cfg.Workers.Heartbeat, DeadAfter: cfg.Workers.DeadAfter, ForgetAfter: cfg.Workers.ForgetAfter, Seat: seat, OnFenced: o.OnFenced, Lease: procs.Lease,
		Settings:  settings,
		Artifacts: egress.New(cfg.ArtifactPolicy()), Health: egress.New(cfg.HealthPolicy()),
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	proxies, err := budget.ParseProxies(cfg.TrustedProxies)
	if err != nil {
		eng.Shutdown(0)
		return nil, fmt.Errorf("trusted_proxies: %w", err)
	}
	api := server.New(server.Config{
		Engine: eng, Admitter: adm, Guard: guard, Logger: log,
		SubmissionsPerMinute: cfg.Limits.SubmissionsPerMinute,
		StreamsPerIdentity:   cfg.Limits.StreamsPerIdentity, Streams: cfg.Limits.Streams,
		RefusalsPerMinute: cfg.Limits.RefusalsPerMinute, BearerFailuresPerMinute: cfg.Limits.BearerFailuresPerMinute,
		Proxies: proxies,
	})
	// The web UI's sessions are sealed with a key kept in the data dir.
	// A one-shot admin command serves no UI and makes no key.
	var ui *web.Handler
	if !o.Once {
		webSecret, err := web.LoadSecret(filepath.Join(dataDir, WebKeyFile))
		if err != nil {
			eng.Shutdown(0)
			return nil, err
		}
		if ui, err = web.New(web.Config{API: api, Guard: guard, Secret: webSecret, Sessions: st, Audit: st, OIDC: cfg.Auth.OIDC,
			SignInsPerMinute: cfg.Limits.SignInsPerMinute, Proxies: proxies, PathPrefix: cfg.Web.PathPrefix, Logger: log.With("component", "web")}); err != nil {
			eng.Shutdown(0)
			return nil, err
		}
		api.Mount(ui)
	}
	return &Node{Config: cfg, Store: st, Plugins: reg, Admitter: adm, Engine: eng, API: api, Web: ui, Log: log, lock: lock, seatLock: seatLock, Procs: procs, procsRoot: procsRoot}, nil
}

// WebKeyFile is the file in the data dir holding the web UI's session key
// (created on first start; servers that share sessions share it).
const WebKeyFile = "web-session.key"

// Launch starts the workers: first it stops the step processes a previous
// life of this executor left running (SPEC §11.2), then the queue,
// recovery of this executor's interrupted deploys, the schedules.
func (n *Node) Launch(ctx context.Context) error {
	// Before any step runs: the lifeline stops the steps' processes if
	// this worker dies (pkg/plugin/lifeline.go).
	if err := n.Procs.StartLifeline(n.Log); err != nil {
		n.Log.Error("if this worker dies, its steps' processes will run on until it restarts", "error", err)
	}
	// Registered first: on PostgreSQL another process may still run with
	// this executor id elsewhere, and its steps' processes are not ours.
	if err := n.Engine.StartWorker(ctx); err != nil {
		return err
	}
	stopped, err := n.Procs.Sweep(ctx)
	for _, s := range stopped {
		n.Log.Warn("stopped the processes of a step left running by a previous life of this worker", "step", s)
	}
	if err != nil {
		// The steps concerned check again before they run: they wait.
		n.Log.Error("step processes of a previous life of this worker are still running", "error", err)
	}
	// DBOS may still migrate or seed its tables at Launch: serialised too.
	if err := n.Store.WithMigrationLock(ctx, func() error { return n.Engine.Launch(ctx) }); err != nil {
		return err
	}
	if !n.Store.Postgres() {
		n.adoptOrphans(ctx)
		// The idle ones too: `admin workers` must not list a server long
		// gone as alive.
		gone, err := n.Store.DeclareOthersGone(ctx, n.Config.ExecutorID)
		if err != nil {
			n.Log.Warn("mark the servers of other executor ids dead", "error", err)
		} else if len(gone) > 0 {
			n.Log.Info("servers of other executor ids are gone (this server holds the SQLite database's lock): listed dead", "executor_ids", gone)
		}
	}
	return nil
}

// adoptOrphans takes over, on SQLite, the running deploys that servers of
// other executor ids left (one started with another --executor-id, then
// killed or stopped): this server holds the database's lock, so they run
// nowhere, and each would otherwise hold its application/environment's
// queue until someone restarted a server with that id. The processes
// their steps left are stopped first, as for this executor's own; an
// executor whose processes cannot be stopped is left alone (the log says
// so, and status names its worker).
func (n *Node) adoptOrphans(ctx context.Context) {
	ids, err := n.Engine.OrphanExecutors(ctx)
	if err != nil {
		n.Log.Error("look for deploys left by other executor ids", "error", err)
		return
	}
	for _, id := range ids {
		procs := plugin.NewProcs(filepath.Join(n.procsRoot, fileName(id)), 0)
		stopped, err := procs.Sweep(ctx)
		for _, s := range stopped {
			n.Log.Warn("stopped the processes of a step left running by another executor id", "executor_id", id, "step", s)
		}
		if err != nil {
			n.Log.Error("deploys of another executor id not taken over: the processes of their steps are still running; restart to try again",
				"executor_id", id, "error", err)
			continue
		}
		adopted, err := n.Engine.Adopt(ctx, id)
		if err != nil {
			n.Log.Error("take over the deploys of another executor id", "executor_id", id, "error", err)
			continue
		}
		n.Log.Warn("took over the running deploys a server of another executor id left on this SQLite database: they resume from their last completed step",
			"executor_id", id, "this_executor_id", n.Config.ExecutorID, "workflows", adopted)
	}
}

// Close stops the workers — running steps get timeout to finish, the rest
// is left to recovery, and the process groups of step commands still
// running are killed — and closes the database.
func (n *Node) Close(timeout time.Duration) {
	n.Engine.Shutdown(timeout)
	n.Procs.Kill()
	n.Procs.Close()
	n.Store.Close()
	n.lock.Unlock()
	n.seatLock.Unlock()
}

// checkPassEnv refuses a plugins.pass_env name that is not a variable name
// or that would hand a step a server secret: a MANENT_* variable (the
// server's own configuration, MANENT_BOOTSTRAP_TOKEN), callbacks.secret_env
// or itsm.token_env; and a secrets.env entry that is neither a variable
// name nor a prefix ending in `*` (the server's own variables it matches
// stay refused at admission).
func checkPassEnv(cfg *Config) error {
	var errs []error
	for i, name := range cfg.Plugins.PassEnv {
		if err := plugin.CheckEnvName(name); err != nil {
			errs = append(errs, fmt.Errorf("plugins.pass_env[%d]: %w", i, err))
			continue
		}
		switch {
		case strings.HasPrefix(name, "MANENT_"):
			errs = append(errs, fmt.Errorf("plugins.pass_env[%d]: %s: MANENT_* variables are the server's own configuration and never reach a step", i, name))
		case name == cfg.Callbacks.SecretEnv:
			errs = append(errs, fmt.Errorf("plugins.pass_env[%d]: %s holds the callback signing secret (callbacks.secret_env) and never reaches a step", i, name))
		case name == cfg.ITSM.TokenEnv:
			errs = append(errs, fmt.Errorf("plugins.pass_env[%d]: %s holds the ITSM token (itsm.token_env) and never reaches a step", i, name))
		}
	}
	for i, name := range cfg.Secrets.Env {
		if err := plugin.CheckEnvName(strings.TrimSuffix(name, "*")); err != nil && name != "*" {
			errs = append(errs, fmt.Errorf("secrets.env[%d]: %w: give a variable name, or a prefix ending in * (BILLING_*)", i, err))
		} else if strings.Contains(strings.TrimSuffix(name, "*"), "*") {
			errs = append(errs, fmt.Errorf("secrets.env[%d]: %q: only a trailing * is a pattern (BILLING_*)", i, name))
		}
	}
	return errors.Join(errs...)
}

// serverEnv names the variables besides MANENT_* that hold the server's
// secrets, by the key that names each: a descriptor's env: secret may not
// name one (its secrets step would tell whether it is set).
func serverEnv(cfg *Config) map[string]string {
	out := map[string]string{}
	if cfg.Callbacks.SecretEnv != "" {
		out[cfg.Callbacks.SecretEnv] = "callbacks.secret_env"
	}
	if cfg.ITSM.TokenEnv != "" {
		out[cfg.ITSM.TokenEnv] = "itsm.token_env"
	}
	return out
}

// fileName turns an executor id into a safe file name.
func fileName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "%%%02x", r)
		}
	}
	if s := b.String(); s != "" && s != "." && s != ".." {
		return s
	}
	return "_" + b.String()
}

// callbackSecret reads the callback signing secret from the environment
// variable callbacks.secret_env names (whsec_<base64>); none is allowed,
// and then descriptors with callbacks are refused.
func callbackSecret(cfg *Config) ([]byte, error) {
	if cfg.Callbacks.SecretEnv == "" {
		return nil, nil
	}
	v := os.Getenv(cfg.Callbacks.SecretEnv)
	if v == "" {
		return nil, fmt.Errorf("callbacks.secret_env: %s is not set", cfg.Callbacks.SecretEnv)
	}
	b, err := notify.ParseSecret(v)
	if err != nil {
		return nil, fmt.Errorf("callbacks.secret_env: %s: %w", cfg.Callbacks.SecretEnv, err)
	}
	return b, nil
}

// newGuard builds authentication (static tokens, OIDC, the bootstrap token)
// and RBAC from the configuration.
func newGuard(cfg *Config, bootstrap string, log *slog.Logger) (*server.AuthGuard, error) {
	authn, err := auth.New(auth.Config{Tokens: cfg.Auth.Tokens, OIDC: cfg.Auth.OIDC, BootstrapToken: bootstrap, Logger: log})
	if err != nil {
		return nil, err
	}
	rules := cfg.RBAC
	if bootstrap != "" {
		rules = append([]auth.RBACRule{auth.BootstrapRule()}, rules...)
	}
	policy, err := auth.NewPolicy(rules)
	if err != nil {
		return nil, err
	}
	return &server.AuthGuard{Authn: authn, Policy: policy}, nil
}

// tokenPatternsNamingNoToken says, for each identity pattern of rbac
// subjects, approvers and freezes' allow that is token:<name> without a
// glob, where no token of auth.tokens has that name (nor is it the
// bootstrap token's, when there is one), that it matches no one: a typo
// ("token:deployer" for "token:deploy") granted nothing, or left a deploy
// waiting for an approval no one could give, without a word. Said, not
// refused: a configuration that ran before must start after an upgrade,
// and the token may be meant to come (auth.tokens is read at start only).
func tokenPatternsNamingNoToken(cfg *Config, bootstrap bool, decider governance.Decider) []string {
	var names []string
	for _, t := range cfg.Auth.Tokens {
		names = append(names, t.Name)
	}
	known := "none"
	if len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	var out []string
	check := func(at string, patterns []string) {
		for i, p := range patterns {
			name, ok := strings.CutPrefix(p, "token:")
			if !ok || manent.HasGlob(p) || slices.Contains(names, name) ||
				(bootstrap && p == auth.BootstrapSubject) {
				continue
			}
			msg := fmt.Sprintf("%s[%d]: %q names no token of auth.tokens (%s)", at, i, p, known)
			if p == auth.BootstrapSubject {
				msg += "; it is the identity of MANENT_BOOTSTRAP_TOKEN, which is not set: it matches no one while it is not"
			} else {
				msg += ": it matches no one until a token of that name is added (manent-server admin new-token --name " + name + ") and the server restarted"
			}
			out = append(out, msg)
		}
	}
	for i, r := range cfg.RBAC {
		check(fmt.Sprintf("rbac[%d].subjects", i), r.Subjects)
	}
	if rules, ok := decider.(*governance.Rules); ok {
		at := "governance rules " + cfg.Governance.Rules + ": "
		for i, a := range rules.Approvals {
			check(fmt.Sprintf("%sapprovals[%d].approvers", at, i), a.Approvers)
		}
		for i, f := range rules.Freezes {
			check(fmt.Sprintf("%sfreezes[%d].allow", at, i), f.Allow)
		}
	}
	return out
}

// IsConfigError reports whether err is a configuration mistake.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

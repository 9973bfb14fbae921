// Package servercmd is the manent-server command line: `serve`, `admin`
// subcommands and `version`. cmd/manent-server only calls Main.
//
// It wires the built-in plugins, the store, the engine and the HTTP server.
package servercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/urlpolicy"
	"github.com/manent-io/manent/pkg/version"
	"github.com/manent-io/manent/plugins/clusterready"
	"github.com/manent-io/manent/plugins/external"
	httpplugin "github.com/manent-io/manent/plugins/http"
	"github.com/manent-io/manent/plugins/kubernetes"
	"github.com/manent-io/manent/plugins/local"
	"github.com/manent-io/manent/plugins/script"
)

// Main runs manent-server with the process's arguments and returns the exit code.
func Main() int {
	return Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
}

// Run runs manent-server with args; tests call it in-process.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) || strings.Contains(err.Error(), "unknown flag") || strings.Contains(err.Error(), "unknown command") {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ error }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "manent-server",
		Short:         "The manent deploy orchestrator server",
		Long:          "manent-server checks submitted deploys and runs each one as a durable DBOS workflow.\nWith no configuration it starts a local trial server on 127.0.0.1:8080.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(stdout, stderr), newAdminCmd(stdout, stderr), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(stdout, "manent-server", version.String())
		},
	})
	return root
}

type serveOptions struct {
	config, listen, dataDir, database, executorID string
}

func newServeCmd(stdout, stderr io.Writer) *cobra.Command {
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
<data-dir>/admin.token (mode 0600).`,
		Example: `  # local trial: one command, SQLite in ./manent-data
  manent-server serve

  # several workers on PostgreSQL
  manent-server serve --config /etc/manent/manent-server.yaml --executor-id worker-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "configuration file (manent-server.yaml); none means local trial mode")
	f.StringVar(&o.listen, "listen", "", "address to listen on (default 127.0.0.1:8080)")
	f.StringVar(&o.dataDir, "data-dir", "", "directory for the database, admin token and work directories (default ./manent-data)")
	f.StringVar(&o.database, "database", "", "sqlite:<path> or postgres://… (default sqlite:<data-dir>/manent.db)")
	f.StringVar(&o.executorID, "executor-id", "", "this worker's executor id (default worker-1); a restarted worker keeps its id to resume its deploys")
	return cmd
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// runtime is what serve and admin share: store and engine.
type runtime struct {
	cfg  *Config
	st   *store.Store
	eng  *engine.Engine
	log  *slog.Logger
	envs *envconfig.Defaults
	// signed says a callback secret is configured.
	signed  bool
	decider governance.Decider
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

func open(ctx context.Context, cfg *Config, log *slog.Logger) (*runtime, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	st, err := store.Open(ctx, cfg.Database)
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, err
	}
	reg := plugin.NewRegistry()
	if err := RegisterBuiltins(reg); err != nil {
		st.Close()
		return nil, err
	}
	if err := reg.RegisterTarget("kubernetes", kubernetes.New(kubernetes.Options{})); err != nil {
		st.Close()
		return nil, err
	}
	if err := reg.RegisterRunner("cluster-ready", clusterready.New(st)); err != nil {
		st.Close()
		return nil, err
	}
	if err := reg.RegisterTarget("http", httpplugin.New(urlpolicy.Callbacks{Allow: cfg.Plugins.HTTPAllow}.Client(0))); err != nil {
		st.Close()
		return nil, err
	}
	found, err := external.Discover(cfg.Plugins.Path)
	if err == nil {
		err = external.Register(reg, found)
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("plugins.path: %w", err)
	}
	decider, err := governance.FromConfig(cfg.Governance.Rules, cfg.Governance.Rego)
	if err != nil {
		st.Close()
		return nil, usageError{fmt.Errorf("governance: %w", err)}
	}
	var changes itsm.Provider
	if cfg.ITSM.URL != "" {
		changes = &itsm.HTTP{URL: cfg.ITSM.URL, Token: os.Getenv(cfg.ITSM.TokenEnv)}
	}
	secret, err := callbackSecret(cfg)
	if err != nil {
		st.Close()
		return nil, usageError{err}
	}
	envs, err := envconfig.FromConfig(cfg.Environments, cfg.DescriptorPolicy)
	if err != nil {
		st.Close()
		return nil, usageError{err}
	}
	dataDir, _ := filepath.Abs(cfg.DataDir)
	eng, err := engine.New(ctx, st, engine.Config{
		Environments: envs, Governance: decider, ITSM: changes, ChangePoll: cfg.ITSM.Poll, SchedulerPoll: cfg.Workers.SchedulerPoll, Callbacks: urlpolicy.Callbacks{Allow: cfg.Callbacks.Allow}, CallbackSecret: secret, Chat: cfg.Chat,
		ExecutorID: cfg.ExecutorID, Slots: cfg.Workers.Slots, DataDir: dataDir,
		RetryBase: cfg.Workers.RetryBase, QueuePoll: cfg.Workers.QueuePoll, MaxRecoveryAttempts: cfg.Workers.MaxRecoveryAttempts,
		MaxArtifactBytes: cfg.Artifacts.MaxBytes, Plugins: reg, Logger: log,
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &runtime{cfg: cfg, st: st, eng: eng, log: log, envs: envs, signed: len(secret) > 0, decider: decider}, nil
}

// RegisterBuiltins wires the built-in plugins (local, script) into reg.
func RegisterBuiltins(reg *plugin.Registry) error {
	sp := script.New()
	return errors.Join(
		reg.RegisterTarget("local", local.New()),
		reg.RegisterTarget("script", sp),
		reg.RegisterRunner("script", sp),
	)
}

func serve(ctx context.Context, o serveOptions, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(o.config, map[string]string{
		"listen": o.listen, "data_dir": o.dataDir, "database": o.database, "executor_id": o.executorID,
	})
	if err != nil {
		return usageError{err}
	}
	log := newLogger(stderr, cfg.LogLevel)
	// Local trial mode has a bootstrap admin token; a configured server has
	// one only when MANENT_BOOTSTRAP_TOKEN is set.
	token, created := os.Getenv("MANENT_BOOTSTRAP_TOKEN"), false
	if cfg.trial {
		if token, created, err = bootstrapToken(cfg.DataDir); err != nil {
			return err
		}
	}
	guard, err := newGuard(cfg, token, log)
	if err != nil {
		return usageError{err}
	}
	var sources *urlpolicy.Sources
	if len(cfg.Artifacts.Sources) > 0 || !cfg.trial {
		src, err := urlpolicy.NewSources(cfg.Artifacts.Sources)
		if err != nil {
			return usageError{err}
		}
		sources = &src
	}
	callbacks := urlpolicy.Callbacks{Allow: cfg.Callbacks.Allow}
	if err := callbacks.Validate(); err != nil {
		return usageError{err}
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	rt, err := open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer rt.st.Close()
	api := server.New(server.Config{
		Engine: rt.eng, Guard: guard, Logger: log,
		DataDir: cfg.DataDir, TrialMode: cfg.trial, Pipeline: cfg.Pipeline.Steps,
		Sources: sources, Callbacks: callbacks, SubmissionsPerMinute: cfg.Limits.SubmissionsPerMinute,
		Environments: rt.envs, CallbacksSigned: rt.signed, ChatChannels: slices.Sorted(maps.Keys(cfg.Chat)),
		Governance: rt.decider, ChangeManagement: cfg.ITSM.URL != "",
	})
	rt.eng.SetTick(api.Tick)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		rt.eng.Shutdown(time.Second)
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if err := rt.eng.Launch(ctx); err != nil {
		ln.Close()
		rt.eng.Shutdown(time.Second)
		return err
	}
	hs := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	addr := "http://" + ln.Addr().String()
	mode := "configured"
	if cfg.trial {
		mode = "local trial mode"
	}
	fmt.Fprintf(stdout, "manent-server %s listening on %s (%s, executor %s, data in %s)\n", version.Version, addr, mode, cfg.ExecutorID, cfg.DataDir)
	if created {
		fmt.Fprintf(stdout, "admin token (shown once, also in %s): %s\n", filepath.Join(cfg.DataDir, "admin.token"), token)
	}
	log.Info("listening", "addr", addr, "executor_id", cfg.ExecutorID, "database", redactDB(cfg.Database), "trial", cfg.trial)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		rt.eng.Shutdown(10 * time.Second)
		return err
	case <-ctx.Done():
	}
	stop() // a second signal now kills the process
	log.Info("shutting down: no new requests; running steps get 20s, the rest is left to recovery")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	rt.eng.Shutdown(20 * time.Second)
	log.Info("stopped")
	return nil
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

func redactDB(s string) string {
	if i := strings.Index(s, "@"); i > 0 && strings.HasPrefix(s, "postgres") {
		if j := strings.Index(s, "://"); j > 0 && j < i {
			return s[:j+3] + "…" + s[i:]
		}
	}
	return s
}

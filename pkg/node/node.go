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
// It imports every server-side package of the module (pkg/web included)
// but pkg/servercmd.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/manent-io/manent/pkg/admit"
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
	"github.com/manent-io/manent/pkg/web"
	"github.com/manent-io/manent/plugins/external"
)

// Host is what plugin registration may use of the node being built.
type Host struct {
	Config *Config
	Store  *store.Store
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
}

// ConfigError is a mistake in the configuration: the server must not start
// (manent-server exits 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
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
	Web *web.Handler
	Log *slog.Logger
}

// Open assembles a node from cfg. Nothing runs until Launch.
func Open(ctx context.Context, cfg *Config, o Options) (n *Node, err error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	st, err := store.Open(ctx, cfg.Database)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	if err := st.Migrate(ctx); err != nil {
		return nil, err
	}
	if o.OnStore != nil {
		o.OnStore(st)
	}
	reg := plugin.NewRegistry()
	if o.Plugins != nil {
		if err := o.Plugins(reg, Host{Config: cfg, Store: st}); err != nil {
			return nil, fmt.Errorf("plugins: %w", err)
		}
	}
	found, err := external.Discover(cfg.Plugins.Path)
	if err == nil {
		err = external.Register(reg, found)
	}
	if err != nil {
		return nil, configError(fmt.Errorf("plugins.path: %w", err))
	}
	decider, err := governance.FromConfig(cfg.Governance.Rules, cfg.Governance.Rego)
	if err != nil {
		return nil, configError(fmt.Errorf("governance: %w", err))
	}
	secret, err := callbackSecret(cfg)
	if err != nil {
		return nil, configError(err)
	}
	envs, err := envconfig.FromConfig(cfg.Environments, cfg.DescriptorPolicy)
	if err != nil {
		return nil, configError(err)
	}
	var sources urlpolicy.Sources
	switch {
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
	guard := o.Guard
	if guard == nil {
		g, err := newGuard(cfg, o.BootstrapToken, log)
		if err != nil {
			return nil, configError(err)
		}
		guard = g
	}
	adm, err := admit.New(admit.Config{
		Store: st, Authorizer: guard, Plugins: reg,
		Sources: sources, Callbacks: callbacks, CallbacksSigned: len(secret) > 0,
		ChatChannels: slices.Sorted(maps.Keys(cfg.Chat)),
		Environments: envs, Governance: decider, ChangeManagement: cfg.ITSM.URL != "",
		Pipeline: cfg.Pipeline.Steps, Trial: cfg.Trial, TargetsDir: filepath.Join(dataDir, "targets"),
		Logger: log.With("component", "admit"),
	})
	if err != nil {
		return nil, configError(err)
	}
	var changes itsm.Provider
	if cfg.ITSM.URL != "" {
		changes = &itsm.HTTP{URL: cfg.ITSM.URL, Token: os.Getenv(cfg.ITSM.TokenEnv)}
	}
	eng, err := engine.New(ctx, st, engine.Config{
		ExecutorID: cfg.ExecutorID, Slots: cfg.Workers.Slots, DataDir: dataDir,
		RetryBase: cfg.Workers.RetryBase, RetryMax: cfg.Workers.RetryMax, QueuePoll: cfg.Workers.QueuePoll,
		MaxRecoveryAttempts: cfg.Workers.MaxRecoveryAttempts, SchedulerPoll: cfg.Workers.SchedulerPoll,
		MaxArtifactBytes: cfg.Artifacts.MaxBytes, Plugins: reg, Admitter: adm,
		ITSM: changes, ChangePoll: cfg.ITSM.Poll,
		Callbacks: callbacks, CallbackSecret: secret, Chat: cfg.Chat,
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	api := server.New(server.Config{
		Engine: eng, Admitter: adm, Guard: guard, Logger: log,
		SubmissionsPerMinute: cfg.Limits.SubmissionsPerMinute,
	})
	// The web UI's sessions are sealed with a key kept in the data dir.
	webSecret, err := web.LoadSecret(filepath.Join(dataDir, WebKeyFile))
	if err != nil {
		return nil, err
	}
	ui, err := web.New(web.Config{API: api, Guard: guard, Secret: webSecret, OIDC: cfg.Auth.OIDC, Logger: log.With("component", "web")})
	if err != nil {
		return nil, err
	}
	api.Mount(ui)
	return &Node{Config: cfg, Store: st, Plugins: reg, Admitter: adm, Engine: eng, API: api, Web: ui, Log: log}, nil
}

// WebKeyFile is the file in the data dir holding the web UI's session key
// (created on first start; servers that share sessions share it).
const WebKeyFile = "web-session.key"

// Launch starts the workers: the queue, recovery of this executor's
// interrupted deploys, the schedules.
func (n *Node) Launch(ctx context.Context) error {
	return n.Engine.Launch(ctx)
}

// Close stops the workers — running steps get timeout to finish, the rest
// is left to recovery — and closes the database.
func (n *Node) Close(timeout time.Duration) {
	n.Engine.Shutdown(timeout)
	n.Store.Close()
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

// IsConfigError reports whether err is a configuration mistake.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

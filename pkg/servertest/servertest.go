// Package servertest runs a real manent-server in-process for tests: the
// store (a SQLite file in the test's temp dir, or a given database such as
// enginetest.Postgres), its migrations, the built-in plugins, the DBOS
// engine with fast retry and queue settings, and the HTTP API in local
// trial mode behind the admin token, on a random 127.0.0.1 port.
//
// It builds the server with pkg/node (the composition root the binary uses)
// and plugins/builtin; its SubmitFaults, a relay before such a server,
// loses submissions' answers after the commit, and SetReadFault fails the
// engine's reads of the database as an outage would. It imports pkg/node,
// plugins/builtin, pkg/enginetest (the relay), and pkg/api, pkg/engine,
// pkg/server and pkg/store for the handles it returns.
package servertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/plugins/builtin"
)

// DefaultToken is the admin token of a test server unless WithToken says otherwise.
const DefaultToken = "servertest-admin-token"

// Server is a running test server. Everything is shut down when the test ends.
type Server struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Token is the admin bearer token.
	Token string
	// DataDir holds the work directories and the trial targets
	// (<DataDir>/targets/<application>/<environment>).
	DataDir string
	Engine  *engine.Engine
	Store   *store.Store
	API     *server.Server
	HTTP    *httptest.Server
	Node    *node.Node

	closeOnce sync.Once
}

type options struct {
	database   string
	token      string
	executorID string
	slots      int
	logger     *slog.Logger
	beforeAPI  []func(*store.Store)
	config     []func(*node.Config)
}

// Option configures Start.
type Option func(*options)

// WithDatabase runs on the database at url (`sqlite:<path>` or
// `postgres://…`, e.g. from enginetest.Postgres) instead of a new SQLite
// file. Two servers on one PostgreSQL database are two workers.
func WithDatabase(url string) Option { return func(o *options) { o.database = url } }

// WithToken sets the admin token.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithExecutorID sets the worker's DBOS executor id (default "servertest").
func WithExecutorID(id string) Option { return func(o *options) { o.executorID = id } }

// WithSlots sets how many deploys the worker runs at once (default 4).
func WithSlots(n int) Option { return func(o *options) { o.slots = n } }

// WithLogger sends the server's logs to l (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithStore calls fn with the migrated store before the API is built, e.g.
// to register a store.OnCommit listener that runs before the API's own.
func WithStore(fn func(*store.Store)) Option {
	return func(o *options) { o.beforeAPI = append(o.beforeAPI, fn) }
}

// WithConfig changes the server's configuration (Config) before it opens.
func WithConfig(fn func(*node.Config)) Option {
	return func(o *options) { o.config = append(o.config, fn) }
}

// Start runs a server for t and stops it when t ends. It fails t if the
// server cannot start.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := New(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// New runs a server keeping its files (database, work directories,
// targets) in dir, for callers without a testing.TB (testscript setups);
// Close stops it.
func New(dir string, opts ...Option) (*Server, error) {
	o := options{token: DefaultToken, executorID: "servertest", slots: 4}
	for _, opt := range opts {
		opt(&o)
	}
	if o.database == "" {
		o.database = "sqlite:" + filepath.Join(dir, "manent.db")
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx := context.Background()
	cfg := Config(dir)
	cfg.Database, cfg.ExecutorID, cfg.Workers.Slots = o.database, o.executorID, o.slots
	for _, fn := range o.config {
		fn(cfg)
	}
	n, err := node.Open(ctx, cfg, node.Options{
		Plugins: builtin.Register, BootstrapToken: o.token, Logger: o.logger,
		OnStore: func(st *store.Store) {
			for _, fn := range o.beforeAPI {
				fn(st)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := n.Launch(ctx); err != nil {
		n.Close(time.Second)
		return nil, fmt.Errorf("launch engine: %w", err)
	}
	hs := httptest.NewServer(n.API)
	// As manent-server does: the HTTP shutdown ends the event streams.
	hs.Config.RegisterOnShutdown(n.API.EndStreams)
	return &Server{URL: hs.URL, Token: o.token, DataDir: cfg.DataDir, Engine: n.Engine, Store: n.Store, API: n.API, HTTP: hs, Node: n}, nil
}

// Config is the configuration of a test server keeping its files in dir:
// local trial mode with fast retries and queue polls. Tests that need a
// configured server change it and call node.Open themselves.
func Config(dir string) *node.Config {
	cfg := &node.Config{Trial: true, DataDir: filepath.Join(dir, "data"), ExecutorID: "servertest",
		Database: "sqlite:" + filepath.Join(dir, "manent.db")}
	cfg.Workers.Slots = 4
	cfg.Workers.RetryBase, cfg.Workers.RetryMax = 10*time.Millisecond, 50*time.Millisecond
	cfg.Workers.QueuePoll, cfg.Workers.SchedulerPoll = 50*time.Millisecond, time.Second
	cfg.Artifacts.MaxBytes = 1 << 30
	cfg.Limits.SubmissionsPerMinute = 120
	return cfg
}

// Close stops the server as the binary does: the HTTP server's shutdown
// (its event streams end with a last comment, and their clients
// reconnect), then the node (running steps get 5 s, their processes'
// lifeline ends, the store closes). It closed the connections, then the
// server: a client that reconnected in between held Close, and the node
// ran on, until its stream ended.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.HTTP.Config.Shutdown(ctx); err != nil {
			// A request still running: the tests that cut connections
			// see theirs cut, as before.
			s.HTTP.CloseClientConnections()
		}
		s.HTTP.Close()
		s.Node.Close(5 * time.Second)
	})
}

// Client returns an API client for the server with the admin token.
func (s *Server) Client() *api.Client {
	return api.NewClient(s.URL, s.Token, nil)
}

// SetReadFault makes the engine's reads that wait for the database answer
// what f returns for them, by what they read (engine.SetReadFault names
// them: "waiting wave" is a verdict's read of the wave that waits), until
// t ends: a *store.Fault stands for the database going away at that
// instant. It is process-wide: tests using it must not run in parallel.
func SetReadFault(t testing.TB, f func(op string) error) {
	t.Helper()
	engine.SetReadFault(f)
	t.Cleanup(func() { engine.SetReadFault(nil) })
}

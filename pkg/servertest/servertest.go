// Package servertest runs a real manent-server in-process for tests: the
// store (a SQLite file in the test's temp dir, or a given database such as
// enginetest.Postgres), its migrations, the built-in plugins, the DBOS
// engine with fast retry and queue settings, and the HTTP API in local
// trial mode behind the admin token, on a random 127.0.0.1 port.
//
// It imports pkg/api, pkg/engine, pkg/plugin, pkg/server, pkg/servercmd
// (for the built-in plugins) and pkg/store.
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
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/servercmd"
	"github.com/manent-io/manent/pkg/store"
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

	closeOnce sync.Once
}

type options struct {
	database   string
	token      string
	executorID string
	slots      int
	logger     *slog.Logger
	beforeAPI  []func(*store.Store)
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
	st, err := store.Open(ctx, o.database)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	reg := plugin.NewRegistry()
	if err := servercmd.RegisterBuiltins(reg); err != nil {
		st.Close()
		return nil, fmt.Errorf("plugins: %w", err)
	}
	dataDir := filepath.Join(dir, "data")
	eng, err := engine.New(ctx, st, engine.Config{
		ExecutorID: o.executorID, Slots: o.slots, DataDir: dataDir,
		RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond, QueuePoll: 50 * time.Millisecond,
		Plugins: reg, Logger: o.logger,
	})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	for _, fn := range o.beforeAPI {
		fn(st)
	}
	api := server.New(server.Config{
		Engine: eng, Guard: server.NewAdminGuard(o.token), Logger: o.logger,
		DataDir: dataDir, TrialMode: true,
	})
	if err := eng.Launch(ctx); err != nil {
		eng.Shutdown(time.Second)
		st.Close()
		return nil, fmt.Errorf("launch engine: %w", err)
	}
	hs := httptest.NewServer(api)
	return &Server{URL: hs.URL, Token: o.token, DataDir: dataDir, Engine: eng, Store: st, API: api, HTTP: hs}, nil
}

// Close stops the server: its connections (streams never end by
// themselves), the HTTP server, the engine (running steps get 5 s) and the
// store.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.HTTP.CloseClientConnections()
		s.HTTP.Close()
		s.Engine.Shutdown(5 * time.Second)
		s.Store.Close()
	})
}

// Client returns an API client for the server with the admin token.
func (s *Server) Client() *api.Client {
	return api.NewClient(s.URL, s.Token, nil)
}

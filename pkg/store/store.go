package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite" // database/sql driver "sqlite" (the read pool), and the write pool behind its gate
)

// Store is the application database.
type Store struct {
	db *sql.DB
	// rdb serves reads outside transactions. On SQLite it is a read-only
	// pool of its own: WAL readers never wait for the write lock, and a
	// burst of status and list calls never waits behind the workers'
	// writes for a connection of the write pool. On PostgreSQL it is db.
	rdb      *sql.DB
	pool     *pgxpool.Pool // PostgreSQL only
	postgres bool
	// ckpt runs SQLite's WAL checkpoints off the commit path
	// (checkpoint.go); nil on PostgreSQL.
	ckpt *checkpointer
	// writes is the SQLite write pool's connector (sqlitegate.go); nil on
	// PostgreSQL.
	writes *gatedConnector
	// hooks hands the events of each committed transaction to OnCommit
	// listeners (stream.go).
	hooks commitHooks
	// path is the SQLite database file ("" on PostgreSQL): Probe checks
	// the free space beside it.
	path string
	// beforePrune, set by tests, runs in PruneDeploys between choosing a
	// batch and the transaction that deletes it.
	beforePrune func(ids []string)
	// afterTx, set by tests, runs after each transaction of Tx ends, with
	// how long it ran from its BEGIN (what a writer holds SQLite for).
	afterTx func(took time.Duration)
}

// MinPostgresConns is the size of a worker's PostgreSQL pool when the
// database URL sets no pool_max_conns (pgx's own default is the larger of 4
// and the number of CPUs). Three connections are held for long stretches:
// DBOS's LISTEN connection, the migration lock held through the launch and
// the leader's advisory lock; a launching worker needs one more. A
// takeover used to be a fourth (a transaction keeping a dead worker's row
// locked while DBOS recovered its workflows on another connection), and
// with pgx's 4 on a 2-CPU machine it waited forever; TakeOver now holds no
// connection while recovery runs, so this floor no longer guards against
// that deadlock. It stays: it is harmless, and leaves room for the
// deploys' steps writing at once.
const MinPostgresConns = 10

// IdleTransactionTimeout is PostgreSQL's idle_in_transaction_session_timeout
// on a worker's connections, unless the database URL sets it. A worker
// paused or cut off from the database in the middle of a transaction
// leaves it open at the server, with its row locks (a queue claim, a
// worker row), and PostgreSQL notices a lost client only when TCP does:
// hours. The others' takeover would wait on those locks. Ending such a
// transaction after 10 s, within workers.dead_after (30 s by default),
// releases them before anyone may take the worker over; no transaction of
// manent or DBOS waits on anything but the database.
const IdleTransactionTimeout = 10 * time.Second

// Open opens the database named by url: `sqlite:<path>` (also
// `sqlite:///abs/path`) or `postgres://…`.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		if err := checkUserInfo(rawURL); err != nil {
			return nil, err
		}
		pcfg, err := pgxpool.ParseConfig(rawURL)
		if err != nil {
			return nil, postgresURLError(rawURL, err)
		}
		if !strings.Contains(rawURL, "pool_max_conns=") && pcfg.MaxConns < MinPostgresConns {
			pcfg.MaxConns = MinPostgresConns
		}
		rp := pcfg.ConnConfig.RuntimeParams
		if _, set := rp["idle_in_transaction_session_timeout"]; !set && !strings.Contains(rp["options"], "idle_in_transaction_session_timeout") {
			rp["idle_in_transaction_session_timeout"] = strconv.FormatInt(IdleTransactionTimeout.Milliseconds(), 10)
		}
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connect to postgres: %w", err)
		}
		db := stdlib.OpenDBFromPool(pool)
		return &Store{db: db, rdb: db, pool: pool, postgres: true}, nil
	case strings.HasPrefix(rawURL, "sqlite:"):
		path, err := sqlitePath(rawURL)
		if err != nil {
			return nil, err
		}
		busy, err := sqliteBusyTimeout(rawURL)
		if err != nil {
			return nil, err
		}
		if dir := filepath.Dir(path); dir != "." {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("create database directory: %w", err)
			}
		}
		// The database holds the deploys' settings as submitted, their
		// logs and the web sessions: made readable by the server's user
		// only (SQLite gives its -wal and -shm files the database file's
		// mode). An existing file keeps the mode it has.
		if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
		} else if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create sqlite %s: %w", path, err)
		}
		dsn := "file:" + path + "?_txlock=immediate" +
			"&_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")&_pragma=foreign_keys(1)" +
			"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(0)"
		// Writers queue in Go behind one gate (sqlitegate.go), so a
		// connection waiting its turn costs nothing: the pool is larger
		// than the read pool, and queries on it (DBOS reads its own
		// tables here) do not wait for connections held by queued writers.
		writes := &gatedConnector{dsn: dsn, gate: newWriteGate(busy), drv: &sqlite.Driver{}}
		db := sql.OpenDB(writes)
		db.SetMaxOpenConns(32)
		// Idle connections are kept: each holds its prepared statements,
		// and the deploys' steps and DBOS's queue use more than 8 at once.
		db.SetMaxIdleConns(32)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
		// Its connections cache their prepared statements like the write
		// pool's (stmtcache.go); nothing to gate.
		rdb := sql.OpenDB(&gatedConnector{dsn: "file:" + path + "?mode=ro" +
			"&_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")&_pragma=foreign_keys(1)", drv: &sqlite.Driver{}})
		// WAL readers never wait for the write lock nor for each other:
		// enough of them that a burst of GETs does not queue for a
		// connection.
		rdb.SetMaxOpenConns(32)
		rdb.SetMaxIdleConns(16)
		if err := rdb.PingContext(ctx); err != nil {
			rdb.Close()
			db.Close()
			return nil, fmt.Errorf("open sqlite %s for reading: %w", path, err)
		}
		return &Store{db: db, rdb: rdb, writes: writes, ckpt: startCheckpointer(db, checkpointEvery), path: path}, nil
	}
	shown := strconv.Quote(redact(rawURL))
	if !strings.Contains(rawURL, "://") || strings.TrimSpace(rawURL) != rawURL {
		// Neither quoted nor hinted at with its text: a key=value string
		// or a mistyped URL may hold the password anywhere.
		shown = "(not shown: it is no URL, and may hold a password; a libpq key=value string is not read)"
	}
	return nil, fmt.Errorf("%w: unsupported database %s: use sqlite:<path> or postgres://…", ErrDatabaseURL, shown)
}

// ErrDatabaseURL marks a database URL manent cannot use (an unknown scheme,
// no path, a bad parameter): a configuration mistake, not an outage.
var ErrDatabaseURL = errors.New("invalid database URL")

// checkUserInfo refuses a postgres URL whose user information holds an
// "@" that is not escaped (a password such as "p@ss"): pgx then takes the
// text after the first "@" for the host, and its error ("lookup
// ss@db.example: no such host") printed the end of the password.
func checkUserInfo(raw string) error {
	_, rest, _ := strings.Cut(raw, "://")
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if strings.Count(authority, "@") > 1 {
		return fmt.Errorf("%w: %s cannot be parsed: its user information holds an @ that is not escaped: write it %%40", ErrDatabaseURL, redact(raw))
	}
	return nil
}

// postgresURLError is a postgres URL pgx cannot parse (a bad port, an
// unknown sslmode, a bad parameter): a configuration mistake (exit 2), not
// an outage. pgx's reason is kept; the URL is shown as redact shows it, and
// what looks like a password in the reason is masked too, since pgx's own
// masking of a malformed URL is best effort.
func postgresURLError(raw string, err error) error {
	reason := err.Error()
	if _, after, ok := strings.Cut(reason, "`: "); ok && strings.HasPrefix(reason, "cannot parse `") {
		reason = after
	}
	for _, secret := range urlSecrets(raw) {
		reason = strings.ReplaceAll(reason, secret, "xxxxx")
	}
	return fmt.Errorf("%w: %s cannot be parsed: %s", ErrDatabaseURL, redact(raw), reason)
}

// urlSecrets are the passwords a database URL may hold, as written and
// unescaped: that of its user information and the values of its
// parameters named like one. Read from the text, not with url.Parse: the
// URL may not parse.
func urlSecrets(raw string) []string {
	var out []string
	add := func(s string) {
		for _, v := range []string{s, unescapeOr(s)} {
			if v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	_, rest, _ := strings.Cut(raw, "://")
	beforeQuery, query, _ := strings.Cut(rest, "?")
	if i := strings.LastIndex(beforeQuery, "@"); i >= 0 {
		if _, pw, ok := strings.Cut(beforeQuery[:i], ":"); ok {
			add(pw)
		}
	}
	query, _, _ = strings.Cut(query, "#")
	for _, kv := range strings.Split(query, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.Contains(strings.ToLower(unescapeOr(k)), "passw") {
			add(v)
		}
	}
	return out
}

func unescapeOr(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

func sqlitePath(raw string) (string, error) {
	rest := strings.TrimPrefix(raw, "sqlite:")
	rest = strings.TrimPrefix(rest, "//")
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	if rest == "" {
		return "", fmt.Errorf("%w: sqlite database URL %q has no path", ErrDatabaseURL, raw)
	}
	return rest, nil
}

// DefaultBusyTimeout is how long a SQLite statement waits for the write
// lock before the database answers busy (a 503 to API callers).
const DefaultBusyTimeout = 10 * time.Second

// sqliteBusyTimeout reads ?busy_timeout=<duration> of a sqlite: URL.
func sqliteBusyTimeout(raw string) (time.Duration, error) {
	_, query, ok := strings.Cut(raw, "?")
	if !ok {
		return DefaultBusyTimeout, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return 0, fmt.Errorf("%w: sqlite database URL %q: %w", ErrDatabaseURL, raw, err)
	}
	v := q.Get("busy_timeout")
	if v == "" {
		return DefaultBusyTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: sqlite database URL %q: busy_timeout %q is not a duration like 5s", ErrDatabaseURL, raw, v)
	}
	return d, nil
}

// redact is a database URL fit for a log line or an error (Where): the
// password of its user information and the values of its parameters named
// like one (password, sslpassword) become xxxxx, a fragment is dropped, and
// a query that does not parse is not shown. Of a value that is no URL with
// a host (a libpq key=value string, a mistyped postgres:/…) only the scheme
// is shown, if it has one: it may hold a password anywhere.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "(a value that is no URL, not shown)"
	}
	if u.Opaque != "" || u.Host == "" {
		return u.Scheme + ":…"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = "…"
		} else {
			hidden := false
			for k := range q {
				if strings.Contains(strings.ToLower(k), "passw") {
					q[k], hidden = []string{"xxxxx"}, true
				}
			}
			if hidden {
				u.RawQuery = q.Encode()
			}
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// DB returns the database handle (for DBOS's SQLite system database and
// transactional enqueue).
func (s *Store) DB() *sql.DB { return s.db }

// ReadDB returns the read-only pool: on SQLite a second pool that never
// takes the write lock, on PostgreSQL the same pool as DB.
func (s *Store) ReadDB() *sql.DB { return s.rdb }

// Pool returns the PostgreSQL pool, nil on SQLite.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Postgres reports whether the store is on PostgreSQL.
func (s *Store) Postgres() bool { return s.postgres }

// SetLogger gives the store's background work a logger: the SQLite
// checkpointer says there when, and why, the WAL cannot be copied into the
// database file (a full disk). Until it is set, that work logs nothing.
func (s *Store) SetLogger(l *slog.Logger) {
	if s.ckpt != nil && l != nil {
		s.ckpt.log.Store(l)
	}
}

// Close closes the database.
func (s *Store) Close() error {
	if s.ckpt != nil {
		s.ckpt.stop()
	}
	err := s.db.Close()
	if s.rdb != s.db {
		err = errors.Join(err, s.rdb.Close())
	}
	if s.pool != nil {
		s.pool.Close()
	}
	return err
}

// planned returns args for a query whose best plan depends on its
// arguments (a list filtered by a rare environment, application or state).
// pgx prepares and caches statements per connection, and after five runs
// PostgreSQL may switch a prepared statement to a generic plan that does
// not know the value: for `environment = $1 ORDER BY created_at DESC LIMIT
// 51` it walked the whole creation index filtering rows (8–45 ms at 50,000
// deploys for an environment with 50) instead of the environment's index
// (0.1 ms). On PostgreSQL the query runs as pgx's unnamed statement, which
// PostgreSQL plans for the values given every time.
func (s *Store) planned(args []any) []any {
	if !s.postgres {
		return args
	}
	return append([]any{pgx.QueryExecModeExec}, args...)
}

// q rewrites ? placeholders to $n on PostgreSQL.
func (s *Store) q(query string) string {
	if !s.postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Tx runs fn in a transaction, committing when it returns nil.
func (s *Store) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	began := time.Now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if s.afterTx != nil {
		defer func() { s.afterTx(time.Since(began)) }()
	}
	s.hooks.begin(tx)
	if err := fn(tx); err != nil {
		s.hooks.end(tx, false)
		_ = tx.Rollback()
		return err
	}
	err = tx.Commit()
	s.hooks.end(tx, err == nil)
	return err
}

// timeFormat is fixed-width so stored times sort as text.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

func fmtTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func fmtTimePtr(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return fmtTime(*t)
}

func parseTime(s sql.NullString) *time.Time {
	if !s.Valid || s.String == "" {
		return nil
	}
	t, err := time.Parse(timeFormat, s.String)
	if err != nil {
		return nil
	}
	return &t
}

// ErrNotFound is returned when a row does not exist.
var ErrNotFound = errors.New("not found")

// MinFreeDisk is the free space a SQLite database's file system must have
// for Probe: below it the database is as good as full.
const MinFreeDisk = 1 << 20

// CheckRoom is a *Fault "the database's disk is full" while less than
// MinFreeDisk is free beside a SQLite database file, nil otherwise (and on
// PostgreSQL, whose server says so itself). engine.Submit asks it before
// it records a deploy: with the disk full, a submission still fits in the
// WAL's frames of earlier writes, and was accepted while /readyz said the
// disk was full, only to fail at its first step that needed the disk.
func (s *Store) CheckRoom() error {
	if s.path == "" {
		return nil
	}
	if free, ok := diskFree(filepath.Dir(s.path)); ok && free < MinFreeDisk {
		return &Fault{Reason: "the database's disk is full", RetryAfter: 30 * time.Second,
			Err: fmt.Errorf("%d bytes free beside %s, less than %d", free, s.path, MinFreeDisk)}
	}
	return nil
}

// Probe proves the database can be written now: it updates one row of its
// own, in a transaction, within ctx. On SQLite it also wants MinFreeDisk
// free beside the database file: with the disk full, that one-row update
// still fits in the WAL's frames of earlier writes while every submission,
// which needs new pages, fails (a *Fault "the database's disk is full").
func (s *Store) Probe(ctx context.Context) error {
	if err := s.CheckRoom(); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO manent_probe (id, at) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET at = excluded.at`), fmtTime(time.Now()))
	return err
}

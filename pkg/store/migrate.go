package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrations embed.FS

// embeddedMigration is one embedded migration file and its version, the
// number its name starts with.
type embeddedMigration struct {
	name    string
	version int
}

// embeddedMigrations lists the embedded migrations in order of name.
func embeddedMigrations() ([]embeddedMigration, error) {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	ms := make([]embeddedMigration, len(entries))
	for i, e := range entries {
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: bad name", e.Name())
		}
		ms[i] = embeddedMigration{name: e.Name(), version: v}
	}
	if len(ms) == 0 {
		return nil, errors.New("no embedded migrations")
	}
	return ms, nil
}

// Migrate applies the embedded migrations not yet applied, each in its own
// transaction, on SQLite and PostgreSQL alike.
func (s *Store) Migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS manent_schema_migrations (version INTEGER PRIMARY KEY)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	ms, err := embeddedMigrations()
	if err != nil {
		return err
	}
	if err := s.refuseNewerSchema(ctx, ms[len(ms)-1].version); err != nil {
		return err
	}
	for _, m := range ms {
		version := m.version
		body, err := migrations.ReadFile("migrations/" + m.name)
		if err != nil {
			return err
		}
		err = s.Tx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM manent_schema_migrations WHERE version = ?`), version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			for _, stmt := range splitSQL(string(body)) {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
			}
			_, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_schema_migrations (version) VALUES (?)`), version)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	return nil
}

// ErrSchemaNewer is returned by Migrate when the database holds a migration
// this build does not know: a newer release migrated it.
var ErrSchemaNewer = errors.New("the database schema is newer than this manent-server")

// refuseNewerSchema fails when the database has a migration past known, the
// last one this build embeds. An older server would otherwise run on
// tables whose new columns and rows it does not understand (say, after a
// rollback of the binary, or an old worker restarted in the middle of an
// upgrade), writing what the newer release may misread.
func (s *Store) refuseNewerSchema(ctx context.Context, known int) error {
	var newest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(version) FROM manent_schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	if newest.Valid && newest.Int64 > int64(known) {
		return fmt.Errorf("%w: the database is at schema version %d, this build knows up to %d. A newer release migrated it; run that release or a later one (an older one must not write to it)", ErrSchemaNewer, newest.Int64, known)
	}
	return nil
}

// splitSQL splits a migration file on semicolons ending a line, dropping comments.
func splitSQL(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// migrationLockKey is the PostgreSQL advisory lock that serialises the
// migrations of workers starting together.
const migrationLockKey int64 = 0x6d616e656e74_00 // "manent" 00

// LockMigrations takes a PostgreSQL advisory lock on a dedicated
// connection, so several workers starting at once on an empty database
// migrate it (manent's tables and DBOS's system schema) one after the
// other; unlock releases it. On SQLite it does nothing: one server owns the
// file (LockFile).
func (s *Store) LockMigrations(ctx context.Context) (unlock func(), err error) {
	if !s.postgres {
		return func() {}, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	// pg_try_advisory_lock, polled: a session blocked in pg_advisory_lock is
	// a running statement, and DBOS's CREATE INDEX CONCURRENTLY waits for
	// every running statement to end — the holder would wait for the
	// waiters forever.
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", migrationLockKey).Scan(&got); err != nil {
			conn.Release()
			return nil, fmt.Errorf("migration lock: %w", err)
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			conn.Release()
			return nil, fmt.Errorf("migration lock: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx)) // ending the session releases the lock
		}
		conn.Release()
	}, nil
}

// WithMigrationLock runs fn holding the migration lock (LockMigrations).
func (s *Store) WithMigrationLock(ctx context.Context, fn func() error) error {
	unlock, err := s.LockMigrations(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

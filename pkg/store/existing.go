package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNoDatabase marks a database URL that names no manent database: a
// SQLite file that does not exist or holds no manent schema, a PostgreSQL
// database without manent's tables. Only a server creates a database;
// a task that reads one (manent-server admin …) must not make an empty one
// and report on it.
var ErrNoDatabase = errors.New("no manent database")

// ErrDamaged marks a SQLite file that is there but is no readable
// database: cut short or corrupted (a restored copy whose transfer broke
// off), or not a database at all. Pointing elsewhere does not help, as it
// does for ErrNoDatabase: another copy does.
var ErrDamaged = errors.New("the SQLite database file is damaged or is no database (a copy cut short or corrupted on its way?)")

// damaged reports SQLite's answer to a file that is no (whole) database.
func damaged(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// ErrSchemaOlder marks a database an older release left, not yet migrated
// to this build's schema (CheckExisting): only a server migrates it.
var ErrSchemaOlder = errors.New("the database schema is older than this manent-server's")

// Where names the database of a URL in messages: the absolute path of a
// SQLite file, a PostgreSQL URL without its password.
func Where(rawURL string) string {
	if strings.HasPrefix(rawURL, "sqlite:") {
		if p, err := sqlitePath(rawURL); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
	}
	return redact(rawURL)
}

// CheckExisting reports whether rawURL names a manent database at this
// build's schema, creating and changing nothing: not the file, not its
// directory, not a table. A missing database is ErrNoDatabase; one an older
// release left (not yet migrated) or a newer one migrated is an error
// saying what to run.
func CheckExisting(ctx context.Context, rawURL string) error {
	if !strings.HasPrefix(rawURL, "sqlite:") {
		st, err := Open(ctx, rawURL)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "3D000" /* invalid_catalog_name */ {
			// A mistyped database name: none to report on, as a
			// missing SQLite file.
			return fmt.Errorf("%w at %s: the database does not exist", ErrNoDatabase, Where(rawURL))
		}
		if err != nil {
			return err
		}
		defer st.Close()
		return st.CheckSchema(ctx, Where(rawURL))
	}
	path, err := sqlitePath(rawURL)
	if err != nil {
		return err
	}
	where := Where(rawURL)
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w at %s: the file does not exist", ErrNoDatabase, where)
	}
	if err != nil {
		return fmt.Errorf("open sqlite %s: %w", where, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w at %s: not a file", ErrNoDatabase, where)
	}
	if fi.Size() == 0 {
		return fmt.Errorf("%w at %s: the file is empty", ErrNoDatabase, where)
	}
	// Read-only: nothing is written, not even the WAL mode of the header.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("open sqlite %s: %w", where, err)
	}
	defer db.Close()
	return checkSchema(ctx, db, false, where)
}

// CheckSchema reports whether the store holds manent's schema at the
// version this build migrates to (see CheckExisting), changing nothing.
func (s *Store) CheckSchema(ctx context.Context, where string) error {
	return checkSchema(ctx, s.db, s.postgres, where)
}

func checkSchema(ctx context.Context, db *sql.DB, postgres bool, where string) error {
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'manent_schema_migrations'`
	if postgres {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'manent_schema_migrations'`
	}
	var n int
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		if damaged(err) {
			return fmt.Errorf("%w: %s: %w", ErrDamaged, where, err)
		}
		return fmt.Errorf("%w at %s: %w", ErrNoDatabase, where, err)
	}
	if n == 0 {
		return fmt.Errorf("%w at %s: it holds no manent tables", ErrNoDatabase, where)
	}
	var newest sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM manent_schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("read the schema version of %s: %w", where, err)
	}
	known, err := latestMigration()
	if err != nil {
		return err
	}
	switch {
	case !newest.Valid:
		return fmt.Errorf("%w at %s: it holds no manent schema version", ErrNoDatabase, where)
	case newest.Int64 > int64(known):
		return fmt.Errorf("%w: the database at %s is at schema version %d, this build knows up to %d. A newer release migrated it; use that release's manent-server", ErrSchemaNewer, where, newest.Int64, known)
	case newest.Int64 < int64(known):
		return fmt.Errorf("%w: the database at %s is at schema version %d, this build's is %d: an older release runs on it. Use that release's manent-server, or upgrade the server first (manent-server serve migrates the database as it starts)", ErrSchemaOlder, where, newest.Int64, known)
	}
	return nil
}

// latestMigration is the version of the last embedded migration.
func latestMigration() (int, error) {
	ms, err := embeddedMigrations()
	if err != nil {
		return 0, err
	}
	return ms[len(ms)-1].version, nil
}

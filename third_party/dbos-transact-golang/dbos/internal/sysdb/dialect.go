package sysdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// dialect.go: per-backend SQL fragments and behaviours.
//
// The same sysDB struct is reused across Postgres, CockroachDB, and SQLite.
// All per-backend differences (placeholder style, schema prefix, lock clauses,
// error classification, listen/notify support, migration set) live behind the
// Dialect interface so sysDB methods stay dialect-agnostic.
//
// Conventions
//   - Canonical query strings in sysDB are written in Postgres syntax with $N
//     placeholders and a "%s" schema-prefix slot rendered via fmt.Sprintf.
//     SQLite-flavor methods that diverge enough call dialect.RewriteQuery to
//     convert $N → ?
//   - SQL-level functions that don't exist in SQLite (gen_random_uuid) are not
//     used in canonical queries; Go callers supply explicit values. The database
//     clock is the exception: NowMsSQL renders it per dialect.

// DialectName identifies the backend. Stable string suitable for logging.
type DialectName string

const (
	DialectPostgres  DialectName = "postgres"
	DialectCockroach DialectName = "cockroach"
	DialectSQLite    DialectName = "sqlite"
)

// Dialect encapsulates per-backend SQL fragments and behaviours.
type Dialect interface {
	// Name returns a stable identifier for the dialect.
	Name() DialectName

	// SchemaPrefix returns the qualified-table prefix, e.g. `"dbos".` for
	// Postgres or "" for SQLite (no schemas). Includes the trailing dot.
	SchemaPrefix(schema string) string

	// RewriteQuery converts a canonical Postgres-style query (with $N
	// placeholders and a "%s" schema-prefix slot already rendered) into the
	// dialect's native form. For Postgres this is a no-op; for SQLite it
	// rewrites $N to ? in left-to-right order.
	RewriteQuery(query string) string

	// LockSkipLocked returns the "FOR UPDATE SKIP LOCKED" fragment, or "" for
	// dialects that don't support row-level locking (SQLite).
	LockSkipLocked() string

	// LockNoWait returns the "FOR UPDATE NOWAIT" fragment, or "".
	LockNoWait() string

	// LockNoKeyUpdate returns the "FOR NO KEY UPDATE" fragment, or "".
	LockNoKeyUpdate() string

	// LockUpdate returns the "FOR UPDATE" fragment, or "".
	LockUpdate() string

	// NowMsSQL returns an expression for the database clock in epoch milliseconds.
	NowMsSQL() string

	// SnapshotIsolation returns the IsoLevel to request when a transaction
	// needs snapshot-style semantics for queue dequeue. Postgres returns
	// RepeatableRead; SQLite returns Default (the IMMEDIATE BEGIN handles it).
	SnapshotIsolation() IsoLevel

	// QueueDequeueIsolation returns the IsoLevel for the queue dequeue transaction.
	QueueDequeueIsolation(budget DequeueBudget) IsoLevel

	// SupportsListenNotify reports whether the dialect supports
	// LISTEN/NOTIFY. False for CockroachDB and SQLite, which both fall back
	// to the polling-based notification loop.
	SupportsListenNotify() bool

	// SupportsArrayParameters reports whether the dialect can bind a Go slice
	// as a single array-typed parameter (e.g. pg's `= ANY($1)` with $1=[]string).
	// SQLite cannot — callers must expand the slice into multiple positional
	// binds and use `IN (?, ?, ...)`.
	SupportsArrayParameters() bool

	// SupportsDataModifyingCTE reports whether a CTE term may be an
	// INSERT/UPDATE/DELETE (pg yes, sqlite no).
	SupportsDataModifyingCTE() bool

	// SupportsAttributesContainment reports whether the dialect can filter
	// workflows by JSONB attribute containment (@>). SQLite's JSON functions
	// cannot faithfully reproduce it, so the filter is rejected there.
	SupportsAttributesContainment() bool

	// MergeJSONObjectSQL returns an expression that shallow-merges the JSON
	// object bound at placeholder $idx into column: keys from the parameter
	// overwrite the column's top-level keys, nested values are replaced rather
	// than merged, and null values are kept. A NULL or non-object column is
	// treated as an empty object.
	MergeJSONObjectSQL(column string, idx int) string

	// IsUniqueViolation reports whether err represents a unique-constraint
	// violation surfaced from the driver.
	IsUniqueViolation(err error) bool

	// IsForeignKeyViolation reports whether err represents a foreign-key
	// violation surfaced from the driver.
	IsForeignKeyViolation(err error) bool

	// IsRetryable reports whether err is a transient driver error that the
	// retry helper should re-attempt. The logger is optional; implementations
	// may emit a debug/warning describing why the retry was triggered. The
	// signature matches retryConfig.retryConditionChain so a method value can
	// be inserted into the chain directly.
	IsRetryable(err error, logger *slog.Logger) bool

	// IsContentionError reports whether err represents lock or serialization
	// contention (serialization failure, deadlock, lock-not-available on
	// pg/CRDB; busy/locked on SQLite). Callers such as the queue poller use it
	// to back off instead of retrying inline.
	IsContentionError(err error) bool

	// IsRetryableTransaction reports whether err is a transaction-level conflict
	// (serialization failure / deadlock / write-lock contention) that must be
	// retried by restarting the ENTIRE transaction with a fresh tx. This is
	// distinct from IsRetryable (transient connection-level errors) and is opted
	// in per call site via withRetryCondition. Same signature as IsRetryable so a
	// method value drops into the retry condition chain directly.
	IsRetryableTransaction(err error, logger *slog.Logger) bool
}

// DequeueBudget is what a dequeue shares with other sweeps, which sets its isolation.
type DequeueBudget int

const (
	DequeueBudgetLocal DequeueBudget = iota
	DequeueBudgetShared
	DequeueBudgetCrossPartition
)

// DetectDialect identifies the backend from a DBOS database URL by parsing
// the scheme.
//
// Postgres and CockroachDB are wire-compatible and share the postgres:
// scheme — neither pgx nor CRDB itself recognises a cockroach:/cockroachdb:
// scheme. The CRDB-vs-PG split is decided at runtime by querying the server
// (see isCockroachDB).
//
// Recognised schemes:
//
//	sqlite:, sqlite3:        → DialectSQLite
//	postgres:, postgresql:   → DialectPostgres (CRDB detected at runtime)
//
// If a user wants to pass modernc's URI-mode flags they can embed them
// inside a sqlite: URL, e.g. "sqlite:file:/path/x.db?_pragma=foreign_keys(1)";
// sqliteDSN trims the outer "sqlite:" and hands the rest to the driver.
func DetectDialect(rawURL string) (DialectName, error) {
	if rawURL == "" {
		return "", fmt.Errorf("database URL is empty")
	}
	// libpq key=value DSNs (e.g. "user='User Name#$%&!' host=localhost ...")
	// can contain characters that url.Parse rejects as invalid URL escapes.
	// Detect this form before falling through to url.Parse so DSNs with funny
	// characters in quoted values still route to Postgres.
	if looksLikePostgresKVDSN(rawURL) {
		return DialectPostgres, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("invalid database URL: %v", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "sqlite", "sqlite3":
		return DialectSQLite, nil
	case "postgres", "postgresql":
		return DialectPostgres, nil
	case "":
		return "", fmt.Errorf("database URL has no scheme: %q", rawURL)
	default:
		return "", fmt.Errorf("unsupported database scheme %q (want sqlite: or postgres:)", u.Scheme)
	}
}

// looksLikePostgresKVDSN matches the libpq key=value connection-string form by
// checking for a leading canonical keyword. It is intentionally permissive: we
// only need to distinguish kv-DSN from outright garbage so we can route it to
// Postgres; the actual parse still happens in pgxpool.ParseConfig.
func looksLikePostgresKVDSN(s string) bool {
	lower := strings.ToLower(strings.TrimSpace(s))
	for _, prefix := range []string{
		"user=", "host=", "hostaddr=", "port=", "dbname=", "database=",
		"password=", "sslmode=", "application_name=", "options=",
	} {
		if strings.HasPrefix(lower, prefix) {
			return true
		}
	}
	return false
}

/* ---------------------------------------------------------------------------
   Postgres
   ------------------------------------------------------------------------- */

type PostgresDialect struct{}

func (PostgresDialect) Name() DialectName { return DialectPostgres }
func (PostgresDialect) SchemaPrefix(schema string) string {
	return pgx.Identifier{schema}.Sanitize() + "."
}
func (PostgresDialect) RewriteQuery(q string) string { return q }
func (PostgresDialect) LockSkipLocked() string       { return "FOR UPDATE SKIP LOCKED" }
func (PostgresDialect) LockNoWait() string           { return "FOR UPDATE NOWAIT" }
func (PostgresDialect) LockNoKeyUpdate() string      { return "FOR NO KEY UPDATE" }
func (PostgresDialect) LockUpdate() string           { return "FOR UPDATE" }
func (PostgresDialect) NowMsSQL() string             { return "(EXTRACT(EPOCH FROM now()) * 1000)::bigint" }
func (PostgresDialect) SnapshotIsolation() IsoLevel  { return IsoLevelRepeatableRead }
func (PostgresDialect) QueueDequeueIsolation(budget DequeueBudget) IsoLevel {
	switch budget {
	case DequeueBudgetCrossPartition:
		return IsoLevelSerializable
	case DequeueBudgetShared:
		return IsoLevelRepeatableRead
	}
	return IsoLevelReadCommitted
}
func (PostgresDialect) SupportsListenNotify() bool          { return true }
func (PostgresDialect) SupportsArrayParameters() bool       { return true }
func (PostgresDialect) SupportsDataModifyingCTE() bool      { return true }
func (PostgresDialect) SupportsAttributesContainment() bool { return true }

func (PostgresDialect) MergeJSONObjectSQL(column string, idx int) string {
	return fmt.Sprintf(`(CASE WHEN jsonb_typeof(%[1]s) = 'object' THEN %[1]s ELSE '{}'::jsonb END || $%[2]d::jsonb)`, column, idx)
}

// pgErrCode extracts the SQLSTATE code from a pgconn.PgError, or "" if err is
// not a pg error.
func pgErrCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func (PostgresDialect) IsUniqueViolation(err error) bool {
	return pgErrCode(err) == pgerrcode.UniqueViolation
}
func (PostgresDialect) IsForeignKeyViolation(err error) bool {
	return pgErrCode(err) == pgerrcode.ForeignKeyViolation
}

// IsRetryable matches transient pg/CRDB driver errors that can be safely
// retried: closed transaction handles, connection-level SQLSTATEs, pgx
// connect failures, EOF/closed-conn strings, and net.Error. Serialization /
// deadlock SQLSTATEs are intentionally excluded — those require retrying the
// entire transaction and are opted in per call site via IsRetryableTransaction.
func (PostgresDialect) IsRetryable(err error, logger *slog.Logger) bool {
	if err == nil {
		return false
	}
	// context.DeadlineExceeded satisfies net.Error, so it would fall through to the
	// net.Error check below and read as a transient driver failure. It is not one:
	// either a caller's context expired (retrying can only fail again), or a DBOS
	// timeout error wraps it as its cause -- Recv/GetEvent/handle timeouts are
	// semantic outcomes on their own deadline, and retrying them loops forever
	// against a live context. context.Canceled is excluded for the same reason.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	// pgx surfaces ErrTxClosed for ops on a tx that has already finalized
	// the caller must retry with a fresh tx.
	if errors.Is(err, pgx.ErrTxClosed) {
		if logger != nil {
			logger.Warn("Transaction is closed, retrying requires a new transaction object", "error", err)
		}
		return true
	}
	var pgerr *pgconn.PgError
	if errors.As(err, &pgerr) {
		switch pgerr.Code {
		case pgerrcode.ConnectionException,
			pgerrcode.ConnectionDoesNotExist,
			pgerrcode.ConnectionFailure,
			pgerrcode.SQLClientUnableToEstablishSQLConnection,
			pgerrcode.SQLServerRejectedEstablishmentOfSQLConnection,
			pgerrcode.AdminShutdown,
			pgerrcode.CrashShutdown,
			pgerrcode.CannotConnectNow,
			pgerrcode.IdleInTransactionSessionTimeout:
			return true
		}
	}
	var cerr *pgconn.ConnectError
	if errors.As(err, &cerr) {
		return true
	}
	if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "conn closed") {
		return true
	}
	var nerr net.Error
	return errors.As(err, &nerr)
}

// IsRetryableTransaction matches pg/CRDB transaction-level conflicts that
// require restarting the whole transaction with a fresh tx: 40001
// serialization_failure (MVCC conflict) and 40P01 deadlock_detected.
func (PostgresDialect) IsRetryableTransaction(err error, logger *slog.Logger) bool {
	switch pgErrCode(err) {
	case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected:
		if logger != nil {
			logger.Warn("Retrying transaction-level conflict, requires a new transaction object", "error", err)
		}
		return true
	}
	return false
}

// IsContentionError matches the transaction-conflict SQLSTATEs plus 55P03
// lock_not_available (a FOR UPDATE NOWAIT that lost the race for a lock).
func (PostgresDialect) IsContentionError(err error) bool {
	switch pgErrCode(err) {
	case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected, pgerrcode.LockNotAvailable:
		return true
	}
	return false
}

/* ---------------------------------------------------------------------------
   CockroachDB

   Wire-compatible with Postgres but:
     - no LISTEN/NOTIFY (poll-based notification loop)
     - migration 10 needs application-layer handling (see system_database.go)
   ------------------------------------------------------------------------- */

type CockroachDialect struct{ PostgresDialect }

func (CockroachDialect) Name() DialectName          { return DialectCockroach }
func (CockroachDialect) SupportsListenNotify() bool { return false }

/* ---------------------------------------------------------------------------
   SQLite

   - "?" placeholders
   - no schemas (SchemaPrefix is "")
   - no row-level locking (SQLite serialises writers via IMMEDIATE BEGIN)
   - no LISTEN/NOTIFY (poll-based notification loop)
   - error classification by message substring (driver does not expose codes)
   ------------------------------------------------------------------------- */

type SqliteDialect struct{}

func (SqliteDialect) Name() DialectName            { return DialectSQLite }
func (SqliteDialect) SchemaPrefix(_ string) string { return "" }

// sqlitePlaceholderRe matches $N-style Postgres placeholders so they can be
// rewritten to sqlite's ?N form. Numbering is preserved so queries that
// reference the same argument multiple times (e.g. $26 in two CASE branches)
// still resolve to the same arg without the caller duplicating it.
//
// Caveat: the regex is not string-literal aware. A hard-coded SQL literal that
// embeds a $N-shaped substring (e.g. `WHERE note = 'see $1 for help'`) will be
// rewritten incorrectly. This is safe in practice because all canonical
// queries live in system_database.go and are vetted to avoid this pattern.
var sqlitePlaceholderRe = regexp.MustCompile(`\$(\d+)`)

func (SqliteDialect) RewriteQuery(q string) string {
	return sqlitePlaceholderRe.ReplaceAllString(q, "?$1")
}

func (SqliteDialect) LockSkipLocked() string  { return "" }
func (SqliteDialect) LockNoWait() string      { return "" }
func (SqliteDialect) LockNoKeyUpdate() string { return "" }
func (SqliteDialect) LockUpdate() string      { return "" }
func (SqliteDialect) NowMsSQL() string {
	// julianday keeps millisecond precision on every SQLite version, unlike unixepoch('subsec') (3.42+).
	return "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
}
func (SqliteDialect) SnapshotIsolation() IsoLevel                  { return IsoLevelDefault }
func (SqliteDialect) QueueDequeueIsolation(DequeueBudget) IsoLevel { return IsoLevelDefault }
func (SqliteDialect) SupportsListenNotify() bool                   { return false }
func (SqliteDialect) SupportsArrayParameters() bool                { return false }
func (SqliteDialect) SupportsDataModifyingCTE() bool               { return false }
func (SqliteDialect) SupportsAttributesContainment() bool          { return false }

// MergeJSONObjectSQL rebuilds the object from the column's entries that the
// parameter does not override, followed by every parameter entry. json_patch
// cannot be used: it drops null values and merges nested objects recursively.
// Virtual-table columns carry no JSON subtype, so objects, arrays and booleans
// are re-tagged with json(); strings, numbers and null pass through as SQL
// values that json_group_object encodes itself.
func (SqliteDialect) MergeJSONObjectSQL(column string, idx int) string {
	return fmt.Sprintf(`(SELECT json_group_object(key, CASE type
			WHEN 'object' THEN json(value) WHEN 'array' THEN json(value)
			WHEN 'true' THEN json('true') WHEN 'false' THEN json('false')
			ELSE value END) FROM (
		SELECT key, type, value FROM json_each(CASE WHEN json_type(%[1]s) = 'object' THEN %[1]s ELSE '{}' END)
		WHERE key NOT IN (SELECT key FROM json_each($%[2]d))
		UNION ALL
		SELECT key, type, value FROM json_each($%[2]d)
	))`, column, idx)
}

// Classify sqlite errors via the registered driver's ErrorCode extractor
// (see sqlite_driver.go). The extracted value is the extended result code
// (high byte = subcode, low byte = primary code); for retryable
// classification we mask down to the primary code so all SQLITE_BUSY_* /
// SQLITE_LOCKED_* variants match.
//
// The result codes are defined by SQLite itself and stable across drivers,
// so they are spelled out here rather than imported from a driver package.
const (
	sqliteBusy                 = 5    // SQLITE_BUSY
	sqliteLocked               = 6    // SQLITE_LOCKED
	sqliteConstraintForeignKey = 787  // SQLITE_CONSTRAINT_FOREIGNKEY (19 | 3<<8)
	sqliteConstraintPrimaryKey = 1555 // SQLITE_CONSTRAINT_PRIMARYKEY (19 | 6<<8)
	sqliteConstraintUnique     = 2067 // SQLITE_CONSTRAINT_UNIQUE (19 | 8<<8)
)

// sqliteCode extracts the extended result code from err via the registered
// driver, or -1 if no driver is registered or err is not a driver error.
func sqliteCode(err error) int {
	sqliteDriverMu.RLock()
	d := sqliteDriver
	sqliteDriverMu.RUnlock()
	if d == nil {
		return -1
	}
	return d.ErrorCode(err)
}

func (SqliteDialect) IsUniqueViolation(err error) bool {
	switch sqliteCode(err) {
	case sqliteConstraintUnique, sqliteConstraintPrimaryKey:
		return true
	}
	return false
}

func (SqliteDialect) IsForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqliteConstraintForeignKey
}

// IsRetryable matches SQLITE_BUSY / SQLITE_LOCKED and their extended variants
// (BUSY_RECOVERY, BUSY_SNAPSHOT, BUSY_TIMEOUT, LOCKED_SHAREDCACHE, ...) — all
// of which share the same primary result code in the low byte.
func (SqliteDialect) IsRetryable(err error, logger *slog.Logger) bool {
	code := sqliteCode(err)
	if code < 0 {
		return false
	}
	switch code & 0xFF {
	case sqliteBusy, sqliteLocked:
		if logger != nil {
			logger.Warn("Retrying transient sqlite error", "error", err)
		}
		return true
	}
	return false
}

// IsRetryableTransaction is identical to IsRetryable for SQLite: a busy/locked
// writer (SQLITE_BUSY / SQLITE_LOCKED) is both the transient and the
// transaction-conflict condition, and both are resolved the same way — retry
// with a fresh tx. The two methods stay distinct on the Dialect interface
// (pg/CRDB separate connection-level errors from serialization/deadlock
// conflicts) but collapse to the same check here.
func (d SqliteDialect) IsRetryableTransaction(err error, logger *slog.Logger) bool {
	return d.IsRetryable(err, logger)
}

// IsContentionError: busy/locked is also SQLite's contention signal.
func (d SqliteDialect) IsContentionError(err error) bool {
	return d.IsRetryable(err, nil)
}

/* ---------------------------------------------------------------------------
   helpers
   ------------------------------------------------------------------------- */

func dialectAnyClause(d Dialect, column string, placeholderIdx int) string {
	if d.SupportsArrayParameters() {
		return fmt.Sprintf("%s = ANY($%d)", column, placeholderIdx)
	}
	return fmt.Sprintf("%s IN (SELECT value FROM json_each($%d))", column, placeholderIdx)
}

// escapeLikePattern escapes the LIKE wildcards (% and _) and the escape
// character (\) so that s matches literally. Postgres uses backslash as the
// default LIKE escape character; SQLite needs an explicit ESCAPE '\'.
func escapeLikePattern(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func dialectLikeAnyClause(d Dialect, column string, placeholderIdx int) string {
	if d.SupportsArrayParameters() {
		return fmt.Sprintf("%s LIKE ANY($%d)", column, placeholderIdx)
	}
	return fmt.Sprintf("EXISTS (SELECT 1 FROM json_each($%d) WHERE %s LIKE value%s)", placeholderIdx, column, dialectLikeEscapeClause(d))
}

// dialectLikeEscapeClause declares backslash as the LIKE escape character on
// SQLite, which has no default. Postgres already defaults to backslash.
func dialectLikeEscapeClause(d Dialect) string {
	if d != nil && d.Name() == DialectSQLite {
		return ` ESCAPE '\'`
	}
	return ""
}

// dialectNoLimitClause returns the LIMIT clause that must precede an OFFSET when
// no row limit was requested. SQLite rejects a bare OFFSET and uses -1 as its
// "no limit" sentinel; Postgres accepts a bare OFFSET and so needs nothing.
func dialectNoLimitClause(d Dialect) string {
	if d.Name() == DialectSQLite {
		return " LIMIT -1"
	}
	return ""
}

func encodeArrayParam(d Dialect, slice any) (any, error) {
	if d.SupportsArrayParameters() {
		return slice, nil
	}
	b, err := json.Marshal(slice)
	if err != nil {
		return nil, fmt.Errorf("encode array param: %w", err)
	}
	return string(b), nil
}

package store

import (
	"context"
	"database/sql"
	"github.com/manent-io/manent/pkg/manent"
	"strings"
	"time"
)

// HotQuery is a query on a hot path (a status, a list, a poll), as the
// store issues it, for the EXPLAIN test.
type HotQuery struct {
	Name string
	SQL  string
	Args []any
	// Walk allows an ordered walk of an index that LIMIT stops early (the
	// unfiltered list) or of a covering index (a count per state); anything
	// else must SEARCH an index.
	Walk bool
	// Index, when set, must be in the plan: a SEARCH of another index can
	// still read most of the table (every SUCCESS deploy).
	Index string
}

// HotQueries returns the store's hot queries with sample arguments.
func HotQueries() []HotQuery {
	list := func(f Filter) (string, []any) {
		f.Limit = 50
		q, a, err := listQuery(f)
		if err != nil {
			panic(err)
		}
		return q, a
	}
	var out []HotQuery
	add := func(name string, walk bool, q string, args ...any) {
		out = append(out, HotQuery{Name: name, SQL: q, Args: args, Walk: walk})
	}
	q, a := list(Filter{})
	add("list", true, q, a...)
	q, a = list(Filter{Application: "app-7"})
	add("list ?application", false, q, a...)
	q, a = list(Filter{Environment: "env-rare"})
	add("list ?environment", false, q, a...)
	q, a = list(Filter{Application: "app-7", Environment: "env-1"})
	add("list ?application&environment", false, q, a...)
	q, a = list(Filter{States: []manent.State{manent.StateError}})
	add("list ?state", false, q, a...)
	q, a = headsQuery([]string{"dpl_1", "dpl_2"}, true, time.Now().Add(-time.Minute))
	add("SSE heads", false, q, a...)
	add("status", false, `SELECT `+deploymentColumns+` FROM manent_deployments WHERE id = ?`, "dpl_1")
	add("steps", false, stepsQuery, "dpl_1")
	add("steps of a list page", false, stepsOfQuery(3), "dpl_1", "dpl_2", "dpl_3")
	add("events", false, `SELECT deployment_id, seq, type, time, data FROM manent_events WHERE deployment_id = ? AND seq > ? ORDER BY seq`, "dpl_1", 0)
	add("queue of an environment", false, queueQuery, "app-7", "env-1", "PENDING", "ENQUEUED", "PENDING")
	add("unfinished (sweeper, activity)", false, unfinishedQuery(deploymentColumns))
	add("promotion successes", false, successesQuery, "app-7", "1", "SUCCESS")
	add("promotion refusal: latest deploy of a version", false, latestOfVersionQuery, "app-7", "7", "env-3")
	add("promotion rolled back", false, rolledBackQuery, "app-7", "env-1", "SUCCESS", "2026-01-01T00:00:00Z", "app-7", "env-1", "1")
	add("count by state (metrics)", true, countByStateQuery)
	add("retention candidates", false, `SELECT id FROM manent_deployments
		WHERE finished_at < ? AND workflows_deleted_at IS NULL AND state IN (`+finalStates()+`)
		ORDER BY finished_at LIMIT ?`, fmtTime(time.Now().Add(-time.Hour)), 100)
	now := time.Now()
	add("rollback: release before", false, releaseBeforeQuery, "app-7", "env-1", "dpl_4999", "4999", fmtTime(now))
	add("rollback: latest success of a version", false, latestSuccessQuery, "app-7", "env-1", "7")
	q, a = finishedSinceQuery("app-7", "env-1", now.Add(-30*24*time.Hour))
	add("dora of an environment", false, q, a...)
	q, a = finishedSinceQuery("", "", now.Add(-time.Hour))
	add("dora of everything", false, q, a...)
	out = append(out, HotQuery{Name: "retention: rollbacks promotion reads", SQL: rollbacksKeptQuery, Index: "manent_deployments_rollbacks"})
	add("web session revoked", false, sessionRevokedQuery, sessionKey("c2Vzc2lvbi1pZC0xMjM0NTY"))
	add("prune revoked web sessions", false, pruneRevokedQuery, now.Unix(), revokedPruneBatch)
	return out
}

// Explain returns the query plan of query, one line per node. On
// PostgreSQL sequential scans are disabled first: a Seq Scan that remains
// means no index can serve the query.
func (s *Store) Explain(ctx context.Context, query string, args []any) (string, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback() }()
	var rows *sql.Rows
	if s.postgres {
		if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return "", err
		}
		rows, err = tx.QueryContext(ctx, "EXPLAIN "+s.q(query), args...)
	} else {
		rows, err = tx.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	}
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		if v, ok := vals[len(vals)-1].(string); ok {
			lines = append(lines, v)
		} else if b, ok := vals[len(vals)-1].([]byte); ok {
			lines = append(lines, string(b))
		}
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// SessionKey is the row key of a web session id.
func SessionKey(id string) string { return sessionKey(id) }

// Q rebinds placeholders for the store's database.
func (s *Store) Q(query string) string { return s.q(query) }

// OnStatementCached calls fn with the text of each statement a SQLite
// connection keeps prepared from now on (stmtcache.go), until restore.
func OnStatementCached(fn func(query string)) (restore func()) {
	testHookCached.Store(&fn)
	return func() { testHookCached.Store(nil) }
}

// AuditHashOf is the chain hash of an entry, for tests that forge one.
var AuditHashOf = auditHash

// SetBeforePrune sets what PruneDeploys runs between choosing its batch and
// deleting it (a submission arriving in between).
func (s *Store) SetBeforePrune(f func(ids []string)) { s.beforePrune = f }

// SetAfterTx sets what runs after each transaction of Tx ends, with how
// long it ran.
func (s *Store) SetAfterTx(f func(took time.Duration)) { s.afterTx = f }

// SetPruneChunk sets how many log lines one transaction of retention
// removes; it returns what restores it.
func SetPruneChunk(n int) (restore func()) {
	was := pruneChunk
	pruneChunk = n
	return func() { pruneChunk = was }
}

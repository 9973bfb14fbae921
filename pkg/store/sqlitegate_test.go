package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, not synchronising on time
	}
}

func (g *writeGate) waiting() (hi, lo int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.hi), len(g.lo)
}

// Writers get the gate one at a time, interactive ones first, each lane
// first come, first served.
func TestWriteGateOrder(t *testing.T) {
	g := newWriteGate(time.Minute)
	ctx := context.Background()
	if held, err := g.enter(ctx); !held || err != nil {
		t.Fatalf("an idle gate: held %v, %v", held, err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	queue := func(name string, interactive bool, wantHi, wantLo int) {
		c := ctx
		if interactive {
			c = Interactive(ctx)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := g.enter(c)
			if !held || err != nil {
				t.Errorf("%s: held %v, %v", name, held, err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			g.leave()
		}()
		waitFor(t, name+" to queue", func() bool { hi, lo := g.waiting(); return hi == wantHi && lo == wantLo })
	}
	queue("bg1", false, 0, 1)
	queue("bg2", false, 0, 2)
	queue("req1", true, 1, 2)
	queue("req2", true, 2, 2)
	g.leave()
	wg.Wait()
	want := []string{"req1", "req2", "bg1", "bg2"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	if held, _ := g.enter(ctx); !held {
		t.Fatal("the gate is not free after everyone left")
	}
}

// A writer that waits past the timeout goes on without the gate; one whose
// context ends gives up with its error; neither leaves the gate stuck.
func TestWriteGateGivingUp(t *testing.T) {
	g := newWriteGate(20 * time.Millisecond)
	if held, _ := g.enter(context.Background()); !held {
		t.Fatal("an idle gate")
	}
	held, err := g.enter(context.Background())
	if held || err != nil {
		t.Fatalf("past the timeout: held %v, %v; want on its way without the gate", held, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.timeout = time.Minute
	done := make(chan error, 1)
	go func() { _, err := g.enter(ctx); done <- err }()
	waitFor(t, "the writer to queue", func() bool { _, lo := g.waiting(); return lo == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled writer: %v", err)
	}
	if hi, lo := g.waiting(); hi+lo != 0 {
		t.Fatalf("%d writers still in line", hi+lo)
	}
	g.leave()
	if held, _ := g.enter(context.Background()); !held {
		t.Fatal("the gate is stuck")
	}
}

// mayWrite on the statements manent and DBOS run — every WITH statement of
// pkg/store and third_party/dbos-transact-golang as SQLite gets it (schema
// prefix empty, $n rewritten to ?) — and on what could fool a scanner. A
// write taken for a read would run outside the gate (and be refused in a
// read-only transaction): whatever is unsure may write.
func TestMayWrite(t *testing.T) {
	// DBOS's queue poll, GetQueuePartitions (no application name, no
	// shard key).
	const partitions = `
		WITH RECURSIVE partitions(pk) AS (
			SELECT MIN(queue_partition_key) FROM workflow_status
			WHERE queue_name = ? AND status = 'ENQUEUED' AND status IN ('ENQUEUED', 'PENDING') AND queue_partition_key IS NOT NULL
			UNION ALL
			SELECT (SELECT MIN(queue_partition_key) FROM workflow_status
			        WHERE queue_name = ? AND status = 'ENQUEUED' AND status IN ('ENQUEUED', 'PENDING') AND queue_partition_key > partitions.pk)
			FROM partitions WHERE partitions.pk IS NOT NULL
		)
		SELECT pk FROM partitions WHERE pk IS NOT NULL`
	for _, c := range []struct {
		q     string
		write bool
	}{
		{"SELECT 1", false},
		{"  select x FROM t", false},
		{"\n\t(SELECT 1)", false},
		{"PRAGMA user_version", false},
		{"pragma main.user_version;", false},
		{"PRAGMA wal_autocheckpoint", false},
		{"PRAGMA wal_checkpoint(PASSIVE)", false}, // no write lock: checkpoint.go runs it off the gate
		{"pragma main.wal_checkpoint( passive );", false},
		{"SELECT 1;", false},
		{"SELECT 1; -- done", false},
		{"SELECT ';' FROM t", false},
		{`SELECT "a;b", [c;d] FROM t /* ; DELETE FROM t */`, false},

		// A PRAGMA with a value or an argument, and a second statement
		// after the first, may write.
		{"PRAGMA user_version = 3", true},
		{"PRAGMA user_version=3", true},
		{"PRAGMA main.user_version = -1", true},
		{"PRAGMA journal_mode = WAL", true},
		{"PRAGMA journal_mode(WAL)", true},
		{"PRAGMA foreign_keys = ON", true},
		{"PRAGMA wal_autocheckpoint=1000", true},
		{"PRAGMA wal_checkpoint(TRUNCATE)", true},
		{"PRAGMA wal_checkpoint(RESTART)", true},
		{"PRAGMA wal_checkpoint(FULL)", true},
		{"PRAGMA table_info(t)", true},
		{"PRAGMA user_version; DELETE FROM t", true},
		{"PRAGMA 'unterminated", true},
		{"PRAGMAS x", true},
		{"SELECT 1; DELETE FROM t", true},
		{"select 1 ;\nDELETE FROM t", true},
		{"(SELECT 1); UPDATE t SET a = 1", true},
		{"SELECT 'a;b'; DELETE FROM t", true},
		{"SELECT 1 /* unterminated; DELETE FROM t", true},
		{"EXPLAIN SELECT 1; DELETE FROM t", true},
		{"VALUES (1); DELETE FROM t", true},
		{"EXPLAIN QUERY PLAN SELECT 1", false},
		{"VALUES (1), (2)", false},
		{"INSERT INTO t VALUES (1) RETURNING id", true},
		{"UPDATE t SET a = 1 RETURNING a", true},
		{"DELETE FROM t", true},
		{"REPLACE INTO t VALUES (1)", true},

		// Reads: DBOS's partition poll, with and without the shard key
		// and application name it adds; its fork tree (ListForkDescendants).
		{partitions, false},
		{`
		WITH RECURSIVE partitions(pk) AS (
			SELECT MIN(queue_partition_key) FROM workflow_status
			WHERE queue_name = ? AND status = 'ENQUEUED' AND status IN ('ENQUEUED', 'PENDING') AND shard_key = ? AND (application_name = ? OR application_name IS NULL) AND queue_partition_key IS NOT NULL
			UNION ALL
			SELECT (SELECT MIN(queue_partition_key) FROM workflow_status
			        WHERE queue_name = ? AND status = 'ENQUEUED' AND status IN ('ENQUEUED', 'PENDING') AND shard_key = ? AND (application_name = ? OR application_name IS NULL) AND queue_partition_key > partitions.pk)
			FROM partitions WHERE partitions.pk IS NOT NULL
		)
		SELECT pk FROM partitions WHERE pk IS NOT NULL`, false},
		{`WITH RECURSIVE fork_tree(root, id) AS (
			SELECT forked_from, workflow_uuid
			FROM workflow_status
			WHERE forked_from IN (SELECT value FROM json_each(?))
			UNION
			SELECT t.root, w.workflow_uuid
			FROM workflow_status w
			INNER JOIN fork_tree t ON w.forked_from = t.id AND w.shard_key = ?
		)
		SELECT root, id FROM fork_tree WHERE id <> root ORDER BY root, id`, false},

		// Writes: DBOS's cancel and resume (an UPDATE in a CTE, the main
		// statement a SELECT), its ConsumeMessage, manent's appendEventsPG,
		// the retention tests' fills.
		{`WITH existing AS (
			SELECT workflow_uuid FROM workflow_status WHERE workflow_uuid IN (SELECT value FROM json_each(?))
		), updated AS (
			UPDATE workflow_status
			SET status = ?, updated_at = ?, completed_at = ?, started_at_epoch_ms = NULL,
			    queue_name = NULL, deduplication_id = NULL, owner_xid = NULL, suspend_key = NULL
			WHERE workflow_uuid IN (SELECT value FROM json_each(?)) AND status NOT IN (?, ?, ?)
			RETURNING workflow_uuid
		)
		SELECT workflow_uuid FROM existing`, true},
		{`WITH existing AS (
			SELECT workflow_uuid FROM workflow_status WHERE workflow_uuid IN (SELECT value FROM json_each(?))
		), updated AS (
			UPDATE workflow_status
			SET status = ?, queue_name = ?, recovery_attempts = ?,
			    workflow_deadline_epoch_ms = NULL, deduplication_id = NULL, owner_xid = NULL, suspend_key = NULL,
			    started_at_epoch_ms = NULL, updated_at = ?, completed_at = NULL
			WHERE workflow_uuid IN (SELECT value FROM json_each(?)) AND status NOT IN (?, ?)
			RETURNING workflow_uuid
		)
		SELECT workflow_uuid FROM existing`, true},
		{`
    WITH oldest_entry AS (
        SELECT message_uuid
        FROM notifications
        WHERE destination_uuid = ? AND topic = ? AND consumed = false
        ORDER BY created_at_epoch_ms ASC
        LIMIT 1
    )
    UPDATE notifications
    SET consumed = true, consumed_by_function_id = ?
    WHERE message_uuid = (SELECT message_uuid FROM oldest_entry)
    RETURNING message, serialization`, true},
		{`WITH n AS (UPDATE manent_deployments SET next_seq = next_seq + ? WHERE id = ? RETURNING next_seq - ? AS first, cancel_requested)
		INSERT INTO manent_events (deployment_id, seq, type, time, data)
		SELECT ?, n.first + v.o, v.t, v.ti, v.d FROM n, (VALUES (0::bigint, ?::text, ?::text, ?::text)) AS v(o, t, ti, d) RETURNING seq, (SELECT cancel_requested FROM n)`, true},
		{`WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < 40)
			INSERT INTO manent_events (deployment_id, seq, type, time, data)
			SELECT d.id, 1000 + g.x, 'log', d.created_at, 'x' FROM manent_deployments d, g`, true},
		{`INSERT INTO manent_events (deployment_id, seq, type, time, data)
				WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n+1 FROM c WHERE n < 9)
				SELECT 'd', 1000+n, 'log', '2026-01-01T00:00:00.000000000Z', '{}' FROM c`, true},

		// The forms of a WITH clause.
		{"with x as (select 1) select * from x", false},
		{"WITH x AS (SELECT 1) VALUES (1)", false},
		{"WITH x(a, b) AS MATERIALIZED (SELECT 1, 2), y AS NOT MATERIALIZED (SELECT 3) SELECT * FROM x, y;", false},
		{`WITH "q" AS (SELECT 1), [r] AS (SELECT 2), ` + "`s`" + ` AS (SELECT 3) SELECT * FROM "q", [r], ` + "`s`", false},
		{"WITH x AS (SELECT deleted_at, updated_by FROM t) SELECT * FROM x", false},
		{"WITH x AS (SELECT 'DELETE FROM t', \"update\", 'it''s' FROM t /* INSERT */) -- UPDATE\nSELECT * FROM x", false},
		{"WITH x AS (SELECT 1) DELETE FROM t", true},
		{"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", true},
		{"WITH x AS (SELECT 1) REPLACE INTO t SELECT * FROM x", true},
		{"WITH x AS (SELECT 1) UPDATE t SET a = (SELECT * FROM x) RETURNING a", true},
		{"WITH x AS (DELETE FROM t RETURNING a) SELECT * FROM x", true},
		{"WITH x AS (SELECT 1) SELECT * FROM t FOR UPDATE", true},
		{"WITH x AS (SELECT 1) SELECT * FROM x; DELETE FROM t", true},
		{"WITH x AS (SELECT replace(a, 'b', 'c') FROM t) SELECT * FROM x", true}, // replace() reads, but REPLACE may be a write
		{"WITHOUT x AS (SELECT 1) SELECT 1", true},
		{"WITH x AS (SELECT 'unterminated) SELECT 1", true},
		{"WITH x AS (SELECT 1 /* unterminated) SELECT 1", true},
		{"WITH x AS (SELECT 1 SELECT * FROM x", true},
		{"WITH x AS (SELECT 1)) SELECT * FROM x", true},
		{"WITH x AS SELECT 1 SELECT * FROM x", true},
		{"WITH x (SELECT 1) SELECT * FROM x", true},
		{"WITH x AS (SELECT 1),", true},
		{"WITH x AS (SELECT 1)", true},
		{"WITH", true},
	} {
		if got := mayWrite(c.q); got != c.write {
			t.Errorf("mayWrite(%q) = %v, want %v", c.q, got, c.write)
		}
	}
}

// Many goroutines writing through the real pool, interactive and not, in
// transactions and outside: every write lands, none meets "database is
// locked" (they queue in the gate, not in SQLite's busy handler).
func TestGatedPoolConcurrentWrites(t *testing.T) {
	st, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := st.DB()
	if _, err := db.Exec(`CREATE TABLE gate_test (w INTEGER, i INTEGER)`); err != nil {
		t.Fatal(err)
	}
	const writers, each = 24, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ctx := context.Background()
			if w%2 == 0 {
				ctx = Interactive(ctx)
			}
			for i := 0; i < each; i++ {
				var err error
				switch i % 3 {
				case 0:
					_, err = db.ExecContext(ctx, `INSERT INTO gate_test VALUES (?, ?)`, w, i)
				case 1:
					var n int
					err = db.QueryRowContext(ctx, `INSERT INTO gate_test VALUES (?, ?) RETURNING i`, w, i).Scan(&n)
				default:
					err = st.Tx(ctx, func(tx *sql.Tx) error {
						var n int
						if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM gate_test`).Scan(&n); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, `INSERT INTO gate_test VALUES (?, ?)`, w, i)
						return err
					})
				}
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var n int
	if err := st.ReadDB().QueryRow(`SELECT COUNT(*) FROM gate_test`).Scan(&n); err != nil || n != writers*each {
		t.Fatalf("%d rows (%v), want %d", n, err, writers*each)
	}
}

// A transaction that opens a second one on another connection waits for
// itself: the second gives up after the busy timeout with "database is
// locked", as SQLite alone would answer, instead of hanging.
func TestGatedPoolNestedTransactionFails(t *testing.T) {
	st := gatedStoreBusy(t, 100*time.Millisecond, "")
	ctx := context.Background()
	err := st.Tx(ctx, func(*sql.Tx) error {
		return st.Tx(ctx, func(*sql.Tx) error { return nil })
	})
	if f := AsFault(err); f == nil || f.Reason != "the database is busy" {
		t.Fatalf("nested transaction: %v, want a busy fault", err)
	}
}

// Every write transaction runs on the pool's one writer connection, whichever
// pooled connection database/sql hands out, so its page cache stays warm: a
// TEMP table (visible to its own connection only) created in one write
// transaction is seen by all the later ones, from many goroutines. A
// transaction cancelled halfway leaves the writer usable and its rows gone.
func TestGatedPoolWritesOnOneConnection(t *testing.T) {
	st, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE kept (i INTEGER)`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `CREATE TEMP TABLE on_writer (x INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Concurrent transactions each hold a pooled connection while they
	// wait for the gate: they come from many connections. The first one
	// holds the gate until the others have taken connections of their own,
	// so they overlap however fast the machine is.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	holding, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.Tx(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO on_writer VALUES (?)`, i)
				if i == 0 {
					close(holding)
					<-release
				}
				return err
			}); err != nil {
				errs <- fmt.Errorf("transaction %d on another connection than the writer: %w", i, err)
			}
		}()
		if i == 0 {
			<-holding
		}
	}
	for deadline := time.Now().Add(30 * time.Second); st.DB().Stats().OpenConnections < 4; {
		if time.Now().After(deadline) {
			t.Fatalf("%d pooled connections after 30 s: the test needs transactions from several", st.DB().Stats().OpenConnections)
		}
		time.Sleep(time.Millisecond) // polls the condition, with its deadline above
	}
	releaseOnce.Do(func() { close(release) })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// An autocommit write goes to the writer too.
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO on_writer VALUES (100)`); err != nil {
		t.Fatalf("autocommit write: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	err = st.Tx(cctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(cctx, `INSERT INTO kept VALUES (1)`); err != nil {
			return err
		}
		cancel()
		_, err := tx.ExecContext(cctx, `INSERT INTO kept VALUES (2)`)
		return err
	})
	if err == nil {
		t.Fatal("a cancelled transaction committed")
	}
	var n int
	if err := st.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO kept VALUES (3)`); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM on_writer`).Scan(&n)
	}); err != nil {
		t.Fatalf("the writer after a cancelled transaction: %v", err)
	}
	if n != 33 {
		t.Fatalf("on_writer has %d rows, want 33", n)
	}
	var kept []int
	rows, err := st.ReadDB().QueryContext(ctx, `SELECT i FROM kept ORDER BY i`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var i int
		_ = rows.Scan(&i)
		kept = append(kept, i)
	}
	rows.Close()
	if fmt.Sprint(kept) != "[3]" {
		t.Fatalf("kept = %v, want [3]: the cancelled transaction's row must be gone", kept)
	}
}

// A read-only transaction takes no place in the writers' queue: it runs
// while another transaction holds the write lock, reads a snapshot, and
// refuses a write instead of waiting for the lock.
func TestGatedPoolReadOnlyTransaction(t *testing.T) {
	st := gatedStore(t, `CREATE TABLE ro_test (i INTEGER)`)
	ctx := context.Background()
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO ro_test VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	// A writer holds the gate and SQLite's write lock for the whole test.
	w, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Rollback()
	if _, err := w.ExecContext(ctx, `INSERT INTO ro_test VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ro, err := st.DB().BeginTx(rctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("a read-only transaction while a writer holds the lock: %v", err)
	}
	defer ro.Rollback()
	var n int
	if err := ro.QueryRowContext(rctx, `SELECT COUNT(*) FROM ro_test`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("read-only count = %d (%v), want 1: the writer's row is not committed", n, err)
	}
	if _, err := ro.ExecContext(rctx, `INSERT INTO ro_test VALUES (3)`); !errors.Is(err, errWriteInReadOnly) {
		t.Fatalf("a write in a read-only transaction: %v, want errWriteInReadOnly", err)
	}
	if err := ro.QueryRowContext(rctx, `INSERT INTO ro_test VALUES (4) RETURNING i`).Scan(&n); !errors.Is(err, errWriteInReadOnly) {
		t.Fatalf("INSERT … RETURNING in a read-only transaction: %v, want errWriteInReadOnly", err)
	}
}

// A writer connection found in a state it should never be in — still inside
// a transaction that database/sql abandoned — is replaced, and the write
// goes on: one bad connection must not stop every write of the server.
func TestGatedPoolReplacesAStuckWriter(t *testing.T) {
	st := gatedStore(t, `CREATE TABLE stuck (i INTEGER)`)
	ctx := context.Background()
	stuck := st.writes.hotWriter()
	if stuck == nil {
		t.Fatal("no writer connection")
	}
	// Leave a transaction open on the writer, as a connection discarded
	// mid-transaction would.
	if _, err := stuck.sq().BeginTx(ctx, driver.TxOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := st.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO stuck VALUES (?)`, i)
			return err
		}); err != nil {
			t.Fatalf("write %d with a stuck writer: %v", i, err)
		}
	}
	if st.writes.hotWriter() == stuck {
		t.Fatal("the stuck writer is still the writer")
	}
	// An autocommit write never joins a transaction left open on the
	// writer (it would never commit).
	stuck = st.writes.hotWriter()
	if _, err := stuck.sq().BeginTx(ctx, driver.TxOptions{}); err != nil {
		t.Fatal(err)
	}
	stuck.txOpen = true
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO stuck VALUES (3)`); err != nil {
		t.Fatalf("autocommit write with a stuck writer: %v", err)
	}
	var n int
	if err := st.ReadDB().QueryRowContext(ctx, `SELECT COUNT(*) FROM stuck`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d rows (%v), want 4: every write committed", n, err)
	}
}

// gatedStore opens a store on a new SQLite file, closed when t ends, and
// runs setup on it.
func gatedStore(t *testing.T, setup string) *Store {
	t.Helper()
	return gatedStoreBusy(t, 0, setup)
}

// gatedStoreBusy is gatedStore with SQLite's busy timeout set (0: the
// store's default), and setup run only when given.
func gatedStoreBusy(t *testing.T, busy time.Duration, setup string) *Store {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "m.db")
	if busy > 0 {
		dsn += "?busy_timeout=" + busy.String()
	}
	st, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if setup == "" {
		return st
	}
	if _, err := st.DB().ExecContext(context.Background(), setup); err != nil {
		t.Fatal(err)
	}
	return st
}

// Closing the pool while the gate's holder works on the writer waits for
// it to leave: database/sql closes its connector at once, in-use
// connections or not, and the connector closed the writer under the
// holder's feet — a DBOS queue poll (its WITH … query runs on the writer)
// still reading when a test's store closed crashed the whole test binary
// (pkg/server, CI). The holder's statements and commit succeed; the writer
// is closed after it.
func TestGatedPoolCloseWaitsForTheWriter(t *testing.T) {
	st := gatedStore(t, `CREATE TABLE closing (i INTEGER)`)
	ctx := context.Background()
	db := st.DB()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO closing VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	// DB.Close marks the pool closed before it closes its connector: once
	// it is, the connector's Close runs or is about to.
	waitFor(t, "the pool to be closed", func() bool { return db.PingContext(ctx) != nil })
	select {
	case err := <-closed:
		t.Fatalf("the pool closed (%v) while a transaction held its writer", err)
	default:
	}
	for i := 2; i <= 50; i++ {
		if _, err := tx.ExecContext(ctx, `INSERT INTO closing VALUES (?)`, i); err != nil {
			t.Fatalf("insert %d after the pool began to close: %v", i, err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM closing`).Scan(&n); err != nil || n != 50 {
		t.Fatalf("count in the transaction: %d %v, want 50", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit after the pool began to close: %v", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pool did not close within 30 s of the writer's holder leaving")
	}
}

// A statement prepared inside a write transaction is closed by database/sql
// after Commit or Rollback returns (Tx.closePrepared): it was prepared on
// the writer, and closed there once the gate had gone to the next writer,
// on a connection another goroutine may be writing on (a modernc.org/sqlite
// connection is not safe for concurrent use). Nothing is finalized on the
// writer after its transaction has left the gate: the writer's statements
// are counted (sqlite3_next_stmt) as the gate is left and once Commit or
// Rollback has returned.
func TestGatedPoolPreparedInATransaction(t *testing.T) {
	st := gatedStore(t, `CREATE TABLE prepared_tx (i INTEGER)`)
	ctx := context.Background()
	db := st.DB()
	for i, end := range []string{"commit", "rollback", "commit"} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := st.writes.hotWriter()
		s, err := tx.PrepareContext(ctx, `INSERT INTO prepared_tx VALUES (?)`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ExecContext(ctx, i); err != nil {
			t.Fatal(err)
		}
		atLeave := -1
		hook := func() { atLeave = writerStmts(w) }
		testHookLeaving.Store(&hook)
		if end == "commit" {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		testHookLeaving.Store(nil)
		if err != nil {
			t.Fatalf("%s: %v", end, err)
		}
		if atLeave < 0 {
			t.Fatalf("%s: the transaction did not leave the gate", end)
		}
		if after := writerStmts(w); after != atLeave {
			t.Fatalf("%s: the writer had %d statements as the transaction left the gate, %d once %s returned: "+
				"a statement was finalized on the writer after the gate was handed on", end, atLeave, after, end)
		}
	}
	var n int
	if err := st.ReadDB().QueryRowContext(ctx, `SELECT COUNT(*) FROM prepared_tx`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows (%v), want 2: the committed transactions' rows", n, err)
	}
}

// writerStmts counts the statements prepared on w's SQLite connection.
func writerStmts(w *gatedConn) int {
	db := uintptr(reflect.ValueOf(w.inner).Elem().FieldByName("db").Uint())
	tls := libc.NewTLS()
	defer tls.Close()
	n := 0
	for p := sqlite3.Xsqlite3_next_stmt(tls, db, 0); p != 0; p = sqlite3.Xsqlite3_next_stmt(tls, db, p) {
		n++
	}
	return n
}

// A statement prepared on the pool (DB.Prepare) runs where any statement
// would: an autocommit write takes its place in the gate, and the same
// statement used in a transaction (Tx.Stmt) runs in that transaction, on
// the writer. It ran on the pooled connection it was prepared on: past the
// gate, and, in a transaction, outside it (SQLite then answered "database
// is locked", the transaction holding the write lock on the writer).
func TestGatedPoolPreparedOnThePool(t *testing.T) {
	st := gatedStoreBusy(t, 200*time.Millisecond, `CREATE TABLE prepared_db (i INTEGER)`)
	ctx := context.Background()
	db := st.DB()
	// One connection: Tx.Stmt then finds the statement prepared on the
	// transaction's own connection.
	db.SetMaxOpenConns(1)
	s, err := db.PrepareContext(ctx, `INSERT INTO prepared_db VALUES (?)`)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// The autocommit write waits for the gate's holder.
	gate := st.writes.gate
	gate.timeout = time.Minute
	if held, _ := gate.enter(ctx); !held {
		t.Fatal("the gate is not free")
	}
	var leaveOnce sync.Once
	defer leaveOnce.Do(gate.leave)
	done := make(chan error, 1)
	go func() { _, err := s.ExecContext(ctx, 1); done <- err }()
	waitFor(t, "the prepared write to queue for the gate", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the prepared write ran (%v) while another writer held the gate", err)
		default:
		}
		_, lo := gate.waiting()
		return lo == 1
	})
	leaveOnce.Do(gate.leave)
	if err := <-done; err != nil {
		t.Fatalf("the prepared write after the gate's holder left: %v", err)
	}

	// In a transaction it is part of the transaction.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.StmtContext(ctx, s).ExecContext(ctx, 2); err != nil {
		tx.Rollback()
		t.Fatalf("the pool's statement in a transaction: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.ReadDB().QueryRowContext(ctx, `SELECT COUNT(*) FROM prepared_db`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows (%v), want 1: the rolled back transaction's row must be gone", n, err)
	}
}

// A WITH … SELECT outside a transaction (DBOS polls its queue partitions
// with one) reads past the gate: it took the gate and the writer, and
// waited behind every writer in line. A WITH … that writes still queues.
func TestGatedPoolCTEReadPassesTheGate(t *testing.T) {
	st := gatedStore(t, `CREATE TABLE cte (i INTEGER)`)
	ctx := context.Background()
	db := st.DB()
	if _, err := db.ExecContext(ctx, `INSERT INTO cte VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	gate := st.writes.gate
	gate.timeout = time.Minute
	if held, _ := gate.enter(ctx); !held {
		t.Fatal("the gate is not free")
	}
	var leaveOnce sync.Once
	defer leaveOnce.Do(gate.leave)
	run := func(q string) (queued bool, n int) {
		t.Helper()
		type answer struct {
			n   int
			err error
		}
		done := make(chan answer, 1)
		go func() {
			var a answer
			a.err = db.QueryRowContext(ctx, q).Scan(&a.n)
			done <- a
		}()
		var a answer
		waitFor(t, "the query to answer or queue", func() bool {
			select {
			case a = <-done:
				return true
			default:
			}
			_, lo := gate.waiting()
			queued = lo > 0
			return queued
		})
		if queued {
			leaveOnce.Do(gate.leave)
			a = <-done
		}
		if a.err != nil {
			t.Fatalf("%s: %v", q, a.err)
		}
		return queued, a.n
	}
	if queued, n := run(`WITH RECURSIVE c(x) AS (SELECT MIN(i) FROM cte UNION ALL SELECT (SELECT MIN(i) FROM cte WHERE i > c.x) FROM c WHERE c.x IS NOT NULL)
		SELECT COUNT(x) FROM c`); queued || n != 2 {
		t.Fatalf("a WITH … SELECT: queued for the gate %v, answered %d; want not queued, 2", queued, n)
	}
	if queued, n := run(`WITH x AS (SELECT 3 AS i) INSERT INTO cte SELECT i FROM x RETURNING i`); !queued || n != 3 {
		t.Fatalf("a WITH … INSERT … RETURNING: queued for the gate %v, answered %d; want queued, 3", queued, n)
	}
}

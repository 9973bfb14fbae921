package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// SQLite lets one writer at a time hold its write lock. Left to itself, a
// connection that finds the lock taken sleeps in SQLite's busy handler, for
// 1, 2, 5 … up to 100 ms between tries and in no particular order: under 50
// clients a submit waited 400+ ms at p99 for a lock held ~1 ms at a time.
//
// writeGate queues the writers of this process in Go instead, each write
// transaction starting the moment the previous one ends. It wraps the
// driver: every transaction of the write pool (BEGIN IMMEDIATE, manent's and
// DBOS's alike) and every statement executed outside a transaction takes the
// gate until it ends. Reads outside transactions (the read pool, and
// queries on the write pool) never take it. A prepared statement runs as
// its text would (gatedStmt): in its connection's transaction, or as a
// statement of its own.
//
// Two lanes: a write made for a person waiting on an HTTP answer (its
// context marked with Interactive: submit, approve, cancel…) goes before
// the background writes of running deploys, which are seconds long anyway;
// each lane is first come, first served. Background writes cannot starve:
// interactive ones are bounded by the request limits.
//
// A writer that waits longer than the busy timeout goes on without the gate,
// to SQLite's own busy handling: the behaviour without a gate, so a
// transaction that opens a second one on another connection (which would
// otherwise wait for itself) ends with "database is locked" as before.
type writeGate struct {
	mu      sync.Mutex
	busy    bool
	hi, lo  []chan struct{} // waiting writers, interactive and background
	timeout time.Duration
}

func newWriteGate(timeout time.Duration) *writeGate {
	return &writeGate{timeout: timeout}
}

type interactiveKey struct{}

// Interactive marks ctx as serving a person waiting for an answer: its
// SQLite writes go before those of background work.
func Interactive(ctx context.Context) context.Context {
	return context.WithValue(ctx, interactiveKey{}, true)
}

func isInteractive(ctx context.Context) bool {
	v, _ := ctx.Value(interactiveKey{}).(bool)
	return v
}

// enter waits for the gate; it reports whether it holds it.
func (g *writeGate) enter(ctx context.Context) (bool, error) {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return true, nil
	}
	ch := make(chan struct{}, 1)
	lane := &g.lo
	if isInteractive(ctx) {
		lane = &g.hi
	}
	*lane = append(*lane, ch)
	g.mu.Unlock()

	t := time.NewTimer(g.timeout)
	defer t.Stop()
	var err error
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
	}
	// Give up the place in line; if the gate was handed over meanwhile,
	// hand it on.
	g.mu.Lock()
	for i, w := range *lane {
		if w == ch {
			*lane = append((*lane)[:i:i], (*lane)[i+1:]...)
			g.mu.Unlock()
			return false, err
		}
	}
	g.mu.Unlock()
	<-ch
	g.leave()
	return false, err
}

// leave hands the gate to the next writer, interactive ones first.
func (g *writeGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, lane := range []*[]chan struct{}{&g.hi, &g.lo} {
		if len(*lane) > 0 {
			next := (*lane)[0]
			*lane = (*lane)[1:]
			next <- struct{}{}
			return
		}
	}
	g.busy = false
}

// gatedConnector opens modernc.org/sqlite connections behind a writeGate.
type gatedConnector struct {
	dsn  string
	gate *writeGate
	drv  *sqlite.Driver

	// writer is the one connection the gate's holder writes on. In WAL
	// mode a connection drops its whole page cache whenever another
	// connection has written since its last transaction; with writes
	// spread over the pool every write transaction began cold and read
	// each page it touched back from the WAL (a fifth of the engine's CPU
	// went to those reads). Writes take turns anyway: on one connection
	// they find their pages in its cache. Used only by the gate's holder,
	// opened on first use, dropped when it breaks.
	writerMu sync.Mutex
	writer   *gatedConn
	closed   bool // Close was called: no writer opens again
}

func (c *gatedConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &gatedConn{inner: conn, gate: c.gate, owner: c, stmts: map[string]*cachedStmt{}}, nil
}

// hotWriter returns the writer connection, opening it if needed; nil when
// it cannot be opened (the caller writes on its own connection). Only the
// gate's holder calls it.
func (c *gatedConnector) hotWriter() *gatedConn {
	if c == nil {
		return nil
	}
	c.writerMu.Lock()
	defer c.writerMu.Unlock()
	if c.closed {
		return nil
	}
	if c.writer == nil {
		conn, err := c.drv.Open(c.dsn)
		if err != nil {
			return nil
		}
		c.writer = &gatedConn{inner: conn, stmts: map[string]*cachedStmt{}}
	}
	return c.writer
}

// dropWriter closes the writer after an error that may have left it in a
// bad state (the next writer opens a new one): only ErrBadConn, the error
// database/sql itself discards connections for.
func (c *gatedConnector) dropWriter(w *gatedConn, err error) {
	if errors.Is(err, driver.ErrBadConn) {
		c.discardWriter(w)
	}
}

// usableWriter is hotWriter for an autocommit write: a writer left inside
// a transaction is replaced first (an autocommit write run in it would
// never commit). Only the gate's holder calls it.
func (c *gatedConnector) usableWriter() *gatedConn {
	w := c.hotWriter()
	if w != nil && w.txOpen {
		c.discardWriter(w)
		w = c.hotWriter()
	}
	return w
}

// discardWriter closes w if it is still the writer, whatever its state.
func (c *gatedConnector) discardWriter(w *gatedConn) {
	c.writerMu.Lock()
	defer c.writerMu.Unlock()
	if c.writer == w {
		c.writer = nil
		_ = w.Close()
	}
}

// Close closes the writer; database/sql calls it when the pool closes —
// at once, whatever its connections are doing. The gate's holder may be
// working on the writer (a transaction, the rows of an INSERT … RETURNING
// still read): closing a
// modernc.org/sqlite connection under a statement running on it crashes
// the process. Close takes the gate first, so the holder ends its work;
// one still at it past the busy timeout has the writer closed when it
// leaves, by a goroutine that waits for the gate.
func (c *gatedConnector) Close() error {
	c.writerMu.Lock()
	c.closed = true
	c.writerMu.Unlock()
	if c.gate == nil {
		c.closeWriter()
		return nil
	}
	if held, _ := c.gate.enter(context.Background()); held {
		c.closeWriter()
		c.gate.leave()
		return nil
	}
	go func() {
		for {
			if held, _ := c.gate.enter(context.Background()); held {
				c.closeWriter()
				c.gate.leave()
				return
			}
		}
	}()
	return nil
}

// closeWriter closes the writer, if one is open.
func (c *gatedConnector) closeWriter() {
	c.writerMu.Lock()
	defer c.writerMu.Unlock()
	if c.writer != nil {
		_ = c.writer.Close()
		c.writer = nil
	}
}

func (c *gatedConnector) Driver() driver.Driver { return c.drv }

// The interfaces modernc.org/sqlite's connection implements and
// database/sql uses; gatedConn passes each through.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type gatedConn struct {
	inner driver.Conn
	gate  *writeGate // nil: a read-only pool, nothing to gate
	owner *gatedConnector
	mu    sync.Mutex
	inTx  bool // a transaction is open on this connection
	held  bool // … and holds the gate
	// w is the pool's writer connection while this connection's
	// transaction runs on it (gate held); nil otherwise.
	w *gatedConn
	// ro: the open transaction is read-only (no gate); a write in it is
	// refused rather than left to wait for SQLite's lock.
	ro bool
	// txOpen (the writer only): a transaction of the gate's holder is
	// open on it. Found set by an autocommit write, it means the writer
	// was left inside a transaction: the write must not join it.
	txOpen bool
	// stmts are this connection's prepared statements by query text
	// (stmtcache.go): database/sql used by itself prepares every
	// statement anew, and SQLite's parser was a quarter of the engine's
	// CPU. database/sql never uses a connection concurrently: no lock.
	stmts map[string]*cachedStmt
}

func (c *gatedConn) sq() sqliteConn { return c.inner.(sqliteConn) }

func (c *gatedConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inTx, c.w, c.ro = false, nil, false
	if c.held {
		c.held = false
		if hook := testHookLeaving.Load(); hook != nil {
			(*hook)()
		}
		c.gate.leave()
	}
}

// testHookLeaving, when set (by a test), is called as a transaction leaves
// the gate.
var testHookLeaving atomic.Pointer[func()]

func (c *gatedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *gatedConn) Close() error {
	if w := c.writerOf(); w != nil {
		// database/sql gave up on this connection inside a transaction
		// that ran on the writer: the writer may still be in it.
		c.owner.discardWriter(w)
	}
	c.release()
	c.closeStmts()
	return c.inner.Close()
}

func (c *gatedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.gate == nil {
		return c.sq().BeginTx(ctx, opts)
	}
	if opts.ReadOnly {
		// A read-only transaction (DBOS's check before each step) is a
		// deferred BEGIN on this connection: a snapshot for its reads,
		// no write lock, no place in the writers' queue.
		tx, err := c.sq().BeginTx(ctx, opts)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.inTx, c.ro = true, true
		c.mu.Unlock()
		return &gatedTx{inner: tx, conn: c}, nil
	}
	held, err := c.gate.enter(ctx)
	if err != nil {
		return nil, err
	}
	var w *gatedConn
	if held && c.owner != nil {
		w = c.owner.hotWriter()
	}
	c.mu.Lock()
	c.inTx, c.held, c.w = true, held, w
	c.mu.Unlock()
	on := c
	if w != nil {
		on = w
	}
	tx, err := on.sq().BeginTx(ctx, opts)
	if err != nil && w != nil && ctx.Err() == nil {
		// The writer is in a state it should never be in (a transaction
		// left open by a connection database/sql discarded, say): close
		// it — the next writer opens a fresh one — and begin here.
		c.owner.discardWriter(w)
		c.mu.Lock()
		c.w = nil
		c.mu.Unlock()
		tx, err = c.sq().BeginTx(ctx, opts)
	}
	if err != nil {
		c.release()
		return nil, err
	}
	if w := c.writerOf(); w != nil {
		w.txOpen = true
	}
	return &gatedTx{inner: tx, conn: c}, nil
}

// writerOf is the writer this connection's transaction runs on, or nil.
func (c *gatedConn) writerOf() *gatedConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w
}

// PrepareContext returns a statement that runs as the connection's
// ExecContext and QueryContext would run its text: in the connection's
// transaction (on the writer when it holds the gate), or, outside one, a
// write in the gate on the writer. It holds no SQLite statement of its own
// (the connections keep theirs, stmtcache.go), so its Close does nothing:
// database/sql closes a statement prepared in a transaction after Commit
// or Rollback has returned, when the gate is another writer's, and a
// statement of the pool (DB.Prepare) used in a transaction (Tx.Stmt) ran
// where it was prepared, outside the transaction. The text is prepared
// where it would run now, so a mistake in it fails here.
func (c *gatedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	on := c
	if w := c.writerOf(); w != nil {
		on = w
	}
	_, done, err := on.stmt(ctx, query)
	if err != nil && err != driver.ErrSkip {
		return nil, err
	}
	if done != nil {
		done()
	}
	return &gatedStmt{conn: c, query: query}, nil
}

// gatedStmt is a statement prepared on a gatedConn: its text, run through
// the connection.
type gatedStmt struct {
	conn  *gatedConn
	query string
}

func (s *gatedStmt) Close() error  { return nil }
func (s *gatedStmt) NumInput() int { return -1 } // as modernc.org/sqlite's statements

func (s *gatedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.conn.ExecContext(ctx, s.query, args)
}

func (s *gatedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.conn.QueryContext(ctx, s.query, args)
}

// Exec and Query are the driver.Stmt methods database/sql calls only when
// the Context ones are missing.
func (s *gatedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), namedValues(args))
}

func (s *gatedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), namedValues(args))
}

func namedValues(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}

// ExecContext outside a transaction is a write of its own (an autocommit
// INSERT, UPDATE or DELETE): it takes the gate for its duration.
func (c *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.mu.Lock()
	inTx, w, ro := c.inTx, c.w, c.ro
	c.mu.Unlock()
	if ro && mayWrite(query) {
		return nil, errWriteInReadOnly
	}
	if inTx {
		if w != nil {
			return w.exec(ctx, query, args)
		}
		return c.exec(ctx, query, args)
	}
	if c.gate == nil {
		return c.exec(ctx, query, args)
	}
	held, err := c.gate.enter(ctx)
	if err != nil {
		return nil, err
	}
	if !held {
		return c.exec(ctx, query, args)
	}
	defer c.gate.leave()
	if w := c.owner.usableWriter(); w != nil {
		res, err := w.exec(ctx, query, args)
		c.owner.dropWriter(w, err)
		return res, err
	}
	return c.exec(ctx, query, args)
}

// QueryContext outside a transaction takes the gate when the statement
// may write (INSERT … RETURNING, UPDATE … RETURNING, WITH … DELETE …): a
// writer past the gate would make the gate's holder wait in SQLite's busy
// handler. The rows are read before the gate is left.
func (c *gatedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.mu.Lock()
	inTx, w, ro := c.inTx, c.w, c.ro
	c.mu.Unlock()
	if ro && mayWrite(query) {
		return nil, errWriteInReadOnly
	}
	if w != nil {
		return w.query(ctx, query, args)
	}
	if inTx || c.gate == nil || !mayWrite(query) {
		return c.query(ctx, query, args)
	}
	held, err := c.gate.enter(ctx)
	if err != nil {
		return nil, err
	}
	on := c
	if held {
		if w := c.owner.usableWriter(); w != nil {
			on = w
		}
	}
	rows, err := on.query(ctx, query, args)
	if on != c {
		c.owner.dropWriter(on, err)
	}
	if err != nil {
		if held {
			c.gate.leave()
		}
		return nil, err
	}
	if !held {
		return rows, nil
	}
	return &gatedRows{Rows: rows, gate: c.gate}, nil
}

// errWriteInReadOnly refuses a write in a transaction begun read-only.
var errWriteInReadOnly = errors.New("sqlite: a write in a read-only transaction")

// gatedRows leaves the gate when its statement is done.
type gatedRows struct {
	driver.Rows
	gate *writeGate
	once sync.Once
}

func (r *gatedRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.gate.leave)
	return err
}

// mayWrite reports whether a statement may write: anything but SELECT,
// EXPLAIN, VALUES, a PRAGMA that reads and a WITH … statement that only
// reads. A second statement after a `;` may write whatever the first one
// is: `SELECT 1; DELETE FROM t` took no gate, as a read.
func mayWrite(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	if len(q) >= len("PRAGMA") && strings.EqualFold(q[:len("PRAGMA")], "PRAGMA") {
		return !pragmaReads(q)
	}
	for _, read := range []string{"SELECT", "EXPLAIN", "VALUES"} {
		if len(q) >= len(read) && strings.EqualFold(q[:len(read)], read) {
			return !oneStatement(q)
		}
	}
	return !cteReads(q)
}

// oneStatement reports whether q is one statement: no `;` outside its
// strings, quoted identifiers and comments but one at its end. Whatever
// sqlTokens cannot read for sure is taken for more.
func oneStatement(q string) bool {
	if strings.IndexByte(q, ';') < 0 {
		return true // the hot path: no tokens to read
	}
	toks, ok := sqlTokens(q)
	if !ok {
		return false
	}
	for i, t := range toks {
		if t == ";" && i != len(toks)-1 {
			return false
		}
	}
	return true
}

// pragmaReads reports whether q, a PRAGMA, only reads: `PRAGMA name` or
// `PRAGMA schema.name`, which read a setting, and `PRAGMA
// wal_checkpoint(PASSIVE)`, which takes no write lock (checkpoint.go runs
// it beside the writers, off the gate). A PRAGMA with a value (`PRAGMA
// user_version = 3`) or an argument (`wal_checkpoint(TRUNCATE)`, which
// waits for the writers and blocks them) may write; so may one followed
// by a second statement. A read with an argument (`PRAGMA table_info(t)`)
// is taken for a write too: manent runs none outside its tests.
func pragmaReads(q string) bool {
	toks, ok := sqlTokens(q)
	if !ok || len(toks) == 0 || toks[0] != "PRAGMA" {
		return false
	}
	if n := len(toks); toks[n-1] == ";" {
		toks = toks[:n-1]
	}
	word := func(t string) bool { return t != "" && !strings.ContainsAny(t[:1], "(),;.'") }
	if len(toks) >= 4 && toks[2] == "." && word(toks[1]) {
		toks = append(toks[:1], toks[3:]...) // the schema is no matter
	}
	switch {
	case len(toks) == 2:
		return word(toks[1])
	case len(toks) == 5:
		return toks[1] == "WAL_CHECKPOINT" && toks[2] == "(" && toks[3] == "PASSIVE" && toks[4] == ")"
	}
	return false
}

// cteReads reports whether q is a WITH … statement that only reads: its
// common table expressions are followed by a SELECT or VALUES, and no
// INSERT, UPDATE, DELETE, REPLACE, MERGE or INTO appears anywhere in it (a
// CTE may hold one on PostgreSQL; FOR UPDATE locks; replace() is a
// function too, and is taken for a write). Its words are read with
// strings, quoted identifiers and comments skipped; whatever it cannot
// read for sure (an unterminated string, parentheses that do not match, a
// second statement, an unexpected token) may write. DBOS polls its queue
// partitions with a WITH RECURSIVE … SELECT: as a write it took the gate
// and the writer, and queued behind real writers.
func cteReads(q string) bool {
	toks, ok := sqlTokens(q)
	if !ok {
		return false
	}
	depth := 0
	for i, t := range toks {
		switch t {
		case "(":
			depth++
		case ")":
			if depth--; depth < 0 {
				return false
			}
		case ";":
			if i != len(toks)-1 {
				return false
			}
		case "INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "INTO":
			return false
		}
	}
	if depth != 0 {
		return false
	}
	i := 0
	next := func() string {
		if i < len(toks) {
			i++
			return toks[i-1]
		}
		return ""
	}
	// skip consumes a parenthesised group, its opening one already read.
	skip := func() bool {
		for d := 1; d > 0; {
			switch next() {
			case "(":
				d++
			case ")":
				d--
			case "":
				return false
			}
		}
		return true
	}
	if next() != "WITH" {
		return false
	}
	t := next()
	if t == "RECURSIVE" {
		t = next()
	}
	for {
		// name [(columns)] AS [[NOT] MATERIALIZED] (statement)
		if t == "" || t == "(" || t == ")" || t == "," || t == ";" {
			return false
		}
		t = next()
		if t == "(" {
			if !skip() {
				return false
			}
			t = next()
		}
		if t != "AS" {
			return false
		}
		t = next()
		if t == "NOT" {
			t = next()
			if t != "MATERIALIZED" {
				return false
			}
			t = next()
		} else if t == "MATERIALIZED" {
			t = next()
		}
		if t != "(" || !skip() {
			return false
		}
		if t = next(); t != "," {
			break
		}
		t = next()
	}
	return t == "SELECT" || t == "VALUES"
}

// sqlTokens splits a statement into its words (upper-cased), parentheses,
// commas, dots and semicolons; a string or quoted identifier is one token
// `'`, comments, numbers' signs, operators and parameters' marks are
// skipped.
// ok is false for an unterminated string, identifier or comment.
func sqlTokens(q string) (toks []string, ok bool) {
	word := func(c byte) bool {
		return c == '_' || c == '$' || c >= 0x80 || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case word(c):
			j := i
			for j < len(q) && word(q[j]) {
				j++
			}
			toks = append(toks, strings.ToUpper(q[i:j]))
			i = j
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end := c
			if c == '[' {
				end = ']'
			}
			// A doubled quote inside is the quote itself: scanning on
			// from the second one gives the same end.
			j := strings.IndexByte(q[i+1:], end)
			if j < 0 {
				return nil, false
			}
			toks = append(toks, "'")
			i += j + 2
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				return toks, true
			}
			i += j + 1
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				return nil, false
			}
			i += j + 4
		case c == '(' || c == ')' || c == ',' || c == ';' || c == '.':
			toks = append(toks, string(c))
			i++
		default:
			i++
		}
	}
	return toks, true
}

func (c *gatedConn) Ping(ctx context.Context) error              { return c.sq().Ping(ctx) }
func (c *gatedConn) ResetSession(ctx context.Context) error      { return c.sq().ResetSession(ctx) }
func (c *gatedConn) IsValid() bool                               { return c.sq().IsValid() }
func (c *gatedConn) CheckNamedValue(nv *driver.NamedValue) error { return checkNamedValue(c.inner, nv) }

// checkNamedValue defers to the driver's own conversion when it has one.
func checkNamedValue(inner driver.Conn, nv *driver.NamedValue) error {
	if nvc, ok := inner.(driver.NamedValueChecker); ok {
		return nvc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type gatedTx struct {
	inner driver.Tx
	conn  *gatedConn
}

func (t *gatedTx) Commit() error {
	return t.end(t.inner.Commit)
}

func (t *gatedTx) Rollback() error {
	return t.end(t.inner.Rollback)
}

// end commits or rolls back, then leaves the writer and the gate.
func (t *gatedTx) end(fn func() error) error {
	w := t.conn.writerOf()
	err := fn()
	if w != nil {
		w.txOpen = false
		t.conn.owner.dropWriter(w, err)
	}
	t.conn.release()
	return err
}

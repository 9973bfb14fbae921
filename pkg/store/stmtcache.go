package store

import (
	"context"
	"database/sql/driver"
	"reflect"
	"sync/atomic"
)

// maxCachedStmts bounds the prepared statements kept per connection. The
// statements manent and DBOS run repeatedly are a few dozen; queries built
// with a varying number of placeholders (IN lists, multi-row inserts) past
// the bound are prepared for one use, as without a cache.
const maxCachedStmts = 256

// testHookCached, when set (by a test, see export_test.go), is called with
// the text of each statement a connection keeps prepared.
var testHookCached atomic.Pointer[func(query string)]

// cachedStmt is a prepared statement of one connection; busy while a call
// or its rows use it.
type cachedStmt struct {
	st   driver.Stmt
	busy bool
}

type stmtContext interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// stmt returns the connection's prepared statement for query, preparing it
// the first time. A statement whose rows are still open (the same query
// run again while iterating its own results) is not shared: the caller gets
// a statement of its own, closed after use (done closes or frees it).
func (c *gatedConn) stmt(ctx context.Context, query string) (st stmtContext, done func(), err error) {
	if cs, ok := c.stmts[query]; ok && !cs.busy {
		cs.busy = true
		return cs.st.(stmtContext), func() { cs.busy = false }, nil
	}
	ds, err := c.sq().PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	sc, ok := ds.(stmtContext)
	if !ok {
		ds.Close()
		return nil, nil, driver.ErrSkip
	}
	if _, taken := c.stmts[query]; taken || len(c.stmts) >= maxCachedStmts {
		return sc, func() { _ = sc.Close() }, nil
	}
	cs := &cachedStmt{st: sc, busy: true}
	c.stmts[query] = cs
	if hook := testHookCached.Load(); hook != nil {
		(*hook)(query)
	}
	return sc, func() { cs.busy = false }, nil
}

func (c *gatedConn) exec(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, done, err := c.stmt(ctx, query)
	if err == driver.ErrSkip {
		return c.sq().ExecContext(ctx, query, args)
	}
	if err != nil {
		return nil, err
	}
	defer done()
	return st.ExecContext(ctx, args)
}

func (c *gatedConn) query(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st, done, err := c.stmt(ctx, query)
	if err == driver.ErrSkip {
		return c.sq().QueryContext(ctx, query, args)
	}
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args)
	if err != nil {
		done()
		return nil, err
	}
	return &stmtRows{Rows: rows, done: done}, nil
}

// stmtRows gives its statement back when closed.
type stmtRows struct {
	driver.Rows
	done func()
}

func (r *stmtRows) Close() error {
	err := r.Rows.Close()
	if r.done != nil {
		r.done()
		r.done = nil
	}
	return err
}

// closeStmts finalizes the connection's statements before it closes.
func (c *gatedConn) closeStmts() {
	for q, cs := range c.stmts {
		_ = cs.st.Close()
		delete(c.stmts, q)
	}
}

// The column-type methods of modernc.org/sqlite's rows, passed through so
// that wrapping hides nothing from database/sql's ColumnTypes.
type columnTyper interface {
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

func (r *stmtRows) ColumnTypeDatabaseTypeName(i int) string {
	if ct, ok := r.Rows.(columnTyper); ok {
		return ct.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *stmtRows) ColumnTypeLength(i int) (int64, bool) {
	if ct, ok := r.Rows.(columnTyper); ok {
		return ct.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *stmtRows) ColumnTypeNullable(i int) (bool, bool) {
	if ct, ok := r.Rows.(columnTyper); ok {
		return ct.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *stmtRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	if ct, ok := r.Rows.(columnTyper); ok {
		return ct.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *stmtRows) ColumnTypeScanType(i int) reflect.Type {
	if ct, ok := r.Rows.(columnTyper); ok {
		return ct.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

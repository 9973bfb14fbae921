package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
)

// The statements a deploy runs on SQLite — manent's and DBOS's: the queue's
// polls and claims, the check before each step, the records — are kept
// prepared by each connection (stmtcache.go). SQLite prepares a statement
// again each time it is bound, though, when its planner compared a
// parameter with the literal of a partial index's predicate (status =
// $2 against `WHERE status IN ('ENQUEUED', 'PENDING')`): the cache then
// saves nothing, and the parser was a tenth of a deploy's CPU. This test
// runs deploys on a real server, collects every statement its connections
// cached, and checks with SQLite itself that binding none of them expires
// it.
func TestDeployStatementsArePreparedOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	restore := store.OnStatementCached(func(q string) {
		mu.Lock()
		seen[q] = true
		mu.Unlock()
	})
	t.Cleanup(restore)

	dir := t.TempDir()
	db := filepath.Join(dir, "manent.db")
	srv := servertest.Start(t, servertest.WithDatabase("sqlite:"+db))
	ctx := context.Background()
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	var ids []string
	// Two deploys of one environment (the second waits its turn in the
	// partition) and one of another.
	for i, env := range []string{"prod", "prod", "staging"} {
		res, err := c.Submit(ctx, fmt.Appendf(nil, "apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: 1.0.%d\nartifact: {url: \"file://%s\"}\n", env, i, art), false)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	for _, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		d, err := c.Wait(wctx, id, 20*time.Millisecond)
		cancel()
		if err != nil || d.State != manent.StateSuccess {
			t.Fatalf("deploy %s: %v, %v", id, d, err)
		}
	}
	srv.Close()

	// The statements that run again and again: not the schema's (CREATE,
	// ALTER, PRAGMA), which run once at start.
	mu.Lock()
	queries := make([]string, 0, len(seen))
	for q := range seen {
		switch word, _, _ := strings.Cut(strings.TrimSpace(q), " "); strings.ToUpper(strings.TrimSpace(word)) {
		case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE":
			queries = append(queries, q)
		}
	}
	mu.Unlock()
	sort.Strings(queries)
	// Not vacuous: the queue's poll and claim, and manent's step record,
	// are among them.
	for _, want := range []string{"ORDER BY priority ASC, created_at ASC", "RETURNING workflow_uuid", "manent_steps"} {
		found := false
		for _, q := range queries {
			found = found || strings.Contains(q, want)
		}
		if !found {
			t.Errorf("no cached statement contains %q among %d", want, len(queries))
		}
	}

	t.Logf("%d statements cached by the server's connections", len(queries))
	tls := libc.NewTLS()
	defer tls.Close()
	conn := openRaw(t, tls, db)
	defer sqlite3.Xsqlite3_close_v2(tls, conn)
	for _, q := range queries {
		expired, err := expires(tls, conn, q)
		if err != nil && strings.HasPrefix(err.Error(), "no such table") {
			// A migration's statement on a table it then renamed: it ran
			// once, at start.
			t.Logf("not prepared again (%v):\n%s", err, q)
			continue
		}
		if err != nil {
			t.Errorf("prepare: %v:\n%s", err, q)
			continue
		}
		if expired {
			t.Errorf("binding a parameter makes SQLite prepare this statement again, on every run:\n%s", q)
		}
	}
}

// openRaw opens the SQLite database at path, read-only, through the C API.
func openRaw(t *testing.T, tls *libc.TLS, path string) uintptr {
	t.Helper()
	name, err := libc.CString(path)
	if err != nil {
		t.Fatal(err)
	}
	defer libc.Xfree(tls, name)
	pdb := libc.Xmalloc(tls, ptrSize)
	defer libc.Xfree(tls, pdb)
	if rc := sqlite3.Xsqlite3_open_v2(tls, name, pdb, sqlite3.SQLITE_OPEN_READONLY, 0); rc != sqlite3.SQLITE_OK {
		t.Fatalf("open %s: %d", path, rc)
	}
	return readPtr(pdb)
}

const ptrSize = 8 // bytes of a pointer (64-bit platforms)

// readPtr reads the pointer the C API wrote at p, in C memory.
func readPtr(p uintptr) uintptr { return *(*uintptr)(unsafe.Add(unsafe.Pointer(nil), p)) }

// expires prepares q on conn, binds NULL to each of its parameters and
// reports whether that expired the statement (sqlite3_expired), which
// makes its next step prepare it again.
func expires(tls *libc.TLS, conn uintptr, q string) (bool, error) {
	text, err := libc.CString(q)
	if err != nil {
		return false, err
	}
	defer libc.Xfree(tls, text)
	pst := libc.Xmalloc(tls, ptrSize)
	defer libc.Xfree(tls, pst)
	if rc := sqlite3.Xsqlite3_prepare_v2(tls, conn, text, -1, pst, 0); rc != sqlite3.SQLITE_OK {
		return false, errors.New(libc.GoString(sqlite3.Xsqlite3_errmsg(tls, conn)))
	}
	st := readPtr(pst)
	defer sqlite3.Xsqlite3_finalize(tls, st)
	for i := int32(1); i <= sqlite3.Xsqlite3_bind_parameter_count(tls, st); i++ {
		sqlite3.Xsqlite3_bind_null(tls, st, i)
	}
	return sqlite3.Xsqlite3_expired(tls, st) != 0, nil
}

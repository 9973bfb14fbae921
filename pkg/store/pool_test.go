package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// A PostgreSQL pool has room for the four connections held while their
// holders wait for one more (see MinPostgresConns) unless the URL says
// otherwise.
func TestPostgresPoolFloor(t *testing.T) {
	url := enginetest.Postgres(t)
	st := openStore(t, url)
	if got := st.Pool().Config().MaxConns; got < store.MinPostgresConns {
		t.Fatalf("pool of %d connections, want at least %d", got, store.MinPostgresConns)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	st = openStore(t, url+sep+"pool_max_conns=6")
	if got := st.Pool().Config().MaxConns; got != 6 {
		t.Fatalf("pool_max_conns=6 gave %d connections", got)
	}
}

// A transaction a paused or cut-off worker leaves open is ended by
// PostgreSQL after IdleTransactionTimeout, unless the URL sets its own.
func TestPostgresIdleTransactionTimeout(t *testing.T) {
	url := enginetest.Postgres(t)
	show := func(st *store.Store) string {
		var v string
		if err := st.Pool().QueryRow(context.Background(), "SHOW idle_in_transaction_session_timeout").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := show(openStore(t, url)); got != "10s" {
		t.Fatalf("idle_in_transaction_session_timeout = %s, want 10s", got)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	if got := show(openStore(t, url+sep+"idle_in_transaction_session_timeout=2min")); got != "2min" {
		t.Fatalf("with the URL's 2min: %s", got)
	}
}

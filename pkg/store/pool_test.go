package store_test

import (
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

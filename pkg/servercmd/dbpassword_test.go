package servercmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/manent-io/manent/pkg/enginetest"
)

// The PostgreSQL password never reaches the server's output, wherever the
// URL holds it: libpq and pgx read it from the user information or from a
// ?password= parameter. The "listening" line and DBOS's "Connecting to
// system database" printed the second whole, and an admin task's "no
// manent database at …" quoted it.
func TestDatabasePasswordIsNeverPrinted(t *testing.T) {
	// A trial server records itself for the CLI under $XDG_CONFIG_HOME.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	admin := os.Getenv(enginetest.PostgresEnv)
	password := "pw" + randomHex(t)
	role := "manent_pw_" + randomHex(t)
	if admin != "" {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	}
	db := enginetest.Postgres(t) // dropped before the role
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	{
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+strings.TrimPrefix(u.Path, "/")+" OWNER TO "+role); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
	}
	q := u.Query()
	q.Set("password", password)
	u.User, u.RawQuery = url.User(role), q.Encode()
	inQuery := u.String()
	u.User, u.RawQuery = url.UserPassword(role, password), ""
	inUser := u.String()

	for _, dsn := range []string{inQuery, inUser} {
		// An admin task on a database without manent's tables names it.
		var stdout, stderr bytes.Buffer
		if code := Run(context.Background(), []string{"admin", "verify-audit", "--database", dsn}, &stdout, &stderr, nil); code == 0 {
			t.Fatalf("verify-audit on an empty database: exit 0")
		}
		if out := stdout.String() + stderr.String(); strings.Contains(out, password) || !strings.Contains(out, "no manent database") {
			t.Errorf("verify-audit printed the password or no reason:\n%s", out)
		}
	}
	for _, dsn := range []string{inQuery, inUser} {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr enginetest.SyncBuffer
		done := make(chan int, 1)
		go func() {
			done <- Run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database", dsn}, &stdout, &stderr, nil)
		}()
		enginetest.Eventually(t, time.Minute, func() bool { return strings.Contains(stderr.String(), `"msg":"listening"`) },
			"the server did not start: %s %s", stdout.String(), stderr.String())
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the server did not stop within a minute")
		}
		out := stdout.String() + stderr.String()
		if strings.Contains(out, password) {
			t.Errorf("the server printed the database password:\n%s", out)
		}
		if !strings.Contains(out, `"database":"postgres://`) {
			t.Errorf("the server did not name its database:\n%s", out)
		}
	}
}

func randomHex(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// Package enginetest gives tests a real database — a SQLite file in a temp
// dir, and a fresh PostgreSQL database when MANENT_TEST_POSTGRES names a
// server — so every engine and server test runs on both; and the few
// helpers tests across the module share: Eventually (a wait on a
// condition), SyncBuffer (output read while it is written), and the two
// relays that lose things on the way — Relay before an HTTP server (drop a
// request, lose an answer after the commit) and PGProxy before PostgreSQL
// (the database going away under a running server).
//
// It imports nothing of this module.
package enginetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresEnv names the admin URL of a PostgreSQL server for tests, e.g.
// postgres://postgres@127.0.0.1:5432/postgres. CI sets it.
const PostgresEnv = "MANENT_TEST_POSTGRES"

// RequirePostgresEnv, when set to 1, makes a missing PostgreSQL a failure
// instead of a skip (CI sets it so the PostgreSQL suite can never be
// skipped silently).
const RequirePostgresEnv = "MANENT_TEST_REQUIRE_POSTGRES"

// Databases runs fn once per database engine, as subtests "sqlite" and
// "postgres".
func Databases(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		fn(t, SQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, Postgres(t))
	})
}

// SQLite returns the URL of a new SQLite file in t's temp dir.
func SQLite(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "manent.db")
}

// Postgres creates a fresh database on the server named by
// MANENT_TEST_POSTGRES, dropped when the test ends, and returns its URL.
// Without the variable the test is skipped (or fails when
// MANENT_TEST_REQUIRE_POSTGRES=1).
func Postgres(t testing.TB) string {
	t.Helper()
	return PostgresCreatedWith(t, "")
}

// PostgresCreatedWith is Postgres with options after CREATE DATABASE's
// name, e.g. "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' TEMPLATE template0"
// for a database that does not order text by bytes.
func PostgresCreatedWith(t testing.TB, options string) string {
	t.Helper()
	admin := os.Getenv(PostgresEnv)
	if admin == "" {
		if os.Getenv(RequirePostgresEnv) == "1" {
			t.Fatalf("%s is not set but %s=1", PostgresEnv, RequirePostgresEnv)
		}
		t.Skipf("no PostgreSQL: set %s to run this test on PostgreSQL", PostgresEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to %s: %v", PostgresEnv, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "manent_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" "+options); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	u.Path = "/" + name
	return u.String()
}

// PostgresAs makes a login role, not a superuser, the owner of the
// database at dbURL (one of Postgres's), runs setup there as the admin
// (e.g. a REVOKE from PUBLIC), and returns dbURL as that role. The
// database, then the role, are dropped when the test ends.
func PostgresAs(t testing.TB, dbURL string, setup ...string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	var b [6]byte
	_, _ = rand.Read(b[:])
	role, password := "manent_test_role_"+hex.EncodeToString(b[:]), "pw"+hex.EncodeToString(b[:])
	exec := func(ctx context.Context, dsn string, stmts ...string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := os.Getenv(PostgresEnv)
	if err := exec(ctx, admin, "CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = exec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)", "DROP ROLE IF EXISTS "+role)
	})
	if err := exec(ctx, admin, "ALTER DATABASE "+name+" OWNER TO "+role); err != nil {
		t.Fatal(err)
	}
	if err := exec(ctx, dbURL, setup...); err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	return u.String()
}

// Eventually polls cond every 20 ms until it is true or timeout passes,
// then fails the test with msg. It is a wait on a condition, not a sleep.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return
		}
		select {
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("condition not met after %s: %s", timeout, fmt.Sprintf(format, args...))
		case <-tick.C:
		}
	}
}

package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/store"
)

// What the server says of its database URL — the "listening" log line,
// admin backup's report, an error — never holds its password: not that of
// the user information, not a ?password= or ?sslpassword= parameter (libpq
// and pgx read both), and nothing of a value that is no URL (a libpq
// key=value string holds password=…, a mistyped postgres:/ URL holds it
// after the colon).
func TestWhereHidesTheDatabasePassword(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"postgres://manent:S3CRET@db.example:5432/manent?sslmode=require", "postgres://manent:xxxxx@db.example:5432/manent?sslmode=require"},
		{"postgres://manent@db.example/manent?password=S3CRET&sslmode=require", "postgres://manent@db.example/manent?password=xxxxx&sslmode=require"},
		{"postgresql://manent@db.example/manent?sslpassword=S3CRET&sslkey=/k", "postgresql://manent@db.example/manent?sslkey=%2Fk&sslpassword=xxxxx"},
		{"postgres://manent@db.example/manent?PassWord=S3CRET", "postgres://manent@db.example/manent?PassWord=xxxxx"},
		{"postgres://manent@db.example/manent?password=S3CRET&bad=%zz", "postgres://manent@db.example/manent?…"},
		{"postgres://manent@db.example/manent#S3CRET", "postgres://manent@db.example/manent"},
		{"postgres://db.example/manent?sslmode=disable", "postgres://db.example/manent?sslmode=disable"},
		{"host=db.example password=S3CRET user=manent dbname=manent", "(a value that is no URL, not shown)"},
		{" postgres://manent:S3CRET@db.example/manent", "(a value that is no URL, not shown)"},
		{"postgres:/manent:S3CRET@db.example/manent", "postgres:…"},
		{"postgres:manent:S3CRET@db.example/manent", "postgres:…"},
		{"mysql://manent:S3CRET@db.example/manent", "mysql://manent:xxxxx@db.example/manent"},
	}
	for _, tt := range tests {
		if got := store.Where(tt.raw); got != tt.want {
			t.Errorf("Where(%q) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

// A database URL manent cannot use is refused naming what it can use,
// without quoting the password the value may hold.
func TestUnsupportedDatabaseHidesThePassword(t *testing.T) {
	for _, raw := range []string{
		"host=db.example password=S3CRET user=manent dbname=manent",
		" postgres://manent:S3CRET@db.example/manent",
		"postgres:/manent:S3CRET@db.example/manent",
		"mysql://manent@db.example/manent?password=S3CRET",
	} {
		_, err := store.Open(context.Background(), raw)
		if !errors.Is(err, store.ErrDatabaseURL) || strings.Contains(err.Error(), "S3CRET") || !strings.Contains(err.Error(), "use sqlite:<path> or postgres://") {
			t.Errorf("Open(%q): %v, want an ErrDatabaseURL naming what to use without the password", raw, err)
		}
	}
}

// A SQLite database the server creates, with its -wal and -shm files, is
// readable by its user only: it holds the deploys' settings as submitted
// (credentials the readers see redacted), their logs and the web sessions.
// It was created 0644, readable by every local user wherever the
// directory let them through (a database: outside data_dir, a data_dir
// made 0755 beforehand).
func TestSQLiteFilesAreTheServersOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manent.db")
	st, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for group and others", p, perm)
		}
	}
}

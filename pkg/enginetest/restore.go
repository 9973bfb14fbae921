package enginetest

import (
	"os"
	"path/filepath"
	"testing"
)

// RestoreSQLite copies a stopped server's SQLite files (manent.db and its
// -wal and -shm) from directory from to directory to, replacing what is
// there: a backup taken, or a backup restored.
func RestoreSQLite(t testing.TB, from, to string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		name := "manent.db" + suffix
		_ = os.Remove(filepath.Join(to, name))
		data, err := os.ReadFile(filepath.Join(from, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

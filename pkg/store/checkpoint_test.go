package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckpointerCopiesTheWAL: commits do not checkpoint (the write
// connections run with wal_autocheckpoint 0), yet the rows reach the
// database file because the background checkpointer copies them there.
// Without the checkpointer the main file would stay at its size before the
// writes until the last connection closed.
func TestCheckpointerCopiesTheWAL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	st, err := Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var auto int
	if err := st.DB().QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Fatalf("write connection wal_autocheckpoint = %d, want 0 (checkpoints run off the commit path)", auto)
	}

	if _, err := st.DB().ExecContext(ctx, "CREATE TABLE filler (b BLOB)"); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	blob := []byte(strings.Repeat("x", 64<<10))
	for i := 0; i < 64; i++ { // 4 MiB, about 1,000 pages: one automatic checkpoint's worth
		if _, err := st.DB().ExecContext(ctx, "INSERT INTO filler (b) VALUES (?)", blob); err != nil {
			t.Fatal(err)
		}
	}
	runs := st.ckpt.runs.Load()
	deadline := time.Now().Add(20 * time.Second)
	for st.ckpt.runs.Load() < runs+2 || fileSize(t, path) < before+4<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes after 4 MiB of writes (was %d), %d checkpoints ran",
				fileSize(t, path), before, st.ckpt.runs.Load())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// TestCheckpointerStopsOnClose: Close ends the loop (no goroutine left).
func TestCheckpointerStopsOnClose(t *testing.T) {
	st, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	c := st.ckpt
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("checkpointer still running after Close")
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

package store

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
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

// TestCheckpointerSaysOnceWhyTheWALCannotBeCopied: with the database's
// disk full, every checkpoint fails. The store's logger (the server's JSON
// log) says so once, with the reason, and once more when checkpoints
// succeed again — it wrote a text line through the global logger on every
// failure, two a second, and never said the disk was full. The database
// lives on a real tmpfs; mounting one needs root (CAP_SYS_ADMIN), so the
// test is skipped without it.
func TestCheckpointerSaysOnceWhyTheWALCannotBeCopied(t *testing.T) {
	ctx := context.Background()
	dir := enginetest.SmallDisk(t, "8m")
	st, err := Open(ctx, "sqlite:"+filepath.Join(dir, "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs enginetest.SyncBuffer
	st.SetLogger(slog.New(slog.NewJSONHandler(&logs, nil)))
	if _, err := st.DB().ExecContext(ctx, "CREATE TABLE filler (b BLOB)"); err != nil {
		t.Fatal(err)
	}

	// Fill the disk, then leave 1.5 MiB: room for 1 MiB more of WAL, not
	// for the database file to take that 1 MiB in too.
	fill := filepath.Join(dir, "fill")
	f := enginetest.FillDisk(t, fill)
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size - 3<<19); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	blob := []byte(strings.Repeat("x", 64<<10))
	for i := 0; i < 16; i++ {
		if _, err := tx.ExecContext(ctx, "INSERT INTO filler (b) VALUES (?)", blob); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	const failed = "sqlite: the WAL cannot be copied into the database file: the database's disk is full"
	enginetest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(logs.String(), failed) },
		"the log to say that checkpoints fail because the disk is full")
	tries := st.ckpt.tries.Load()
	enginetest.Eventually(t, 20*time.Second, func() bool { return st.ckpt.tries.Load() >= tries+4 },
		"four more checkpoints to be tried")
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	const again = "sqlite: the WAL is copied into the database file again"
	enginetest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(logs.String(), again) },
		"the log to say that checkpoints succeed again")

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["msg"] != failed || lines[1]["msg"] != again {
		t.Fatalf("log:\n%s\nwant one line %q, then one %q", logs.String(), failed, again)
	}
	// The told failure and the three tries after it that had ended when
	// the fourth began: that one may run once there is room again.
	if n, _ := lines[1]["failed_checkpoints"].(float64); n < 4 {
		t.Fatalf("failed_checkpoints = %v, want at least 4 (the failures the log told once)", lines[1]["failed_checkpoints"])
	}
}

package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// A backup taken while deploys are written is the database at one
// instant: every deploy in the copy has the audit entry committed with it
// and the copy's audit chain is intact. It is private (0600), leaves no
// temporary file, and never overwrites a file.
func TestBackupIsConsistentWhileWritten(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, "sqlite:"+filepath.Join(dir, "manent.db"))
	ctx := context.Background()
	var written, committed atomic.Int64
	write := func() {
		i := written.Add(1)
		id := fmt.Sprintf("dpl_%06d", i)
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			rec := &store.Record{Deployment: manent.Deployment{ID: id, Application: "app", Environment: "env", Version: "1",
				State: manent.StateEnqueued, Requester: "token:t", CreatedAt: time.Now()}, Input: []byte(`{}`)}
			if err := st.InsertDeployment(ctx, tx, rec); err != nil {
				return err
			}
			return st.AppendAuditTx(ctx, tx, store.AuditEntry{Identity: "token:t", Action: "deployment.create", Target: id, Outcome: "accepted"})
		})
		if err != nil {
			t.Error(err)
			return
		}
		committed.Add(1)
	}
	for range 200 {
		write()
	}
	// Writers go on during the backup (bounded: 5,000 deploys at most).
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for written.Load() < 5000 {
			select {
			case <-stop:
				return
			default:
				write()
			}
		}
	}()
	// 250 committed before the backup starts: the copy holds them all.
	enginetest.Eventually(t, 30*time.Second, func() bool { return committed.Load() >= 250 }, "the writers to go on")
	out := filepath.Join(dir, "backup", "manent-backup.db")
	if err := os.Mkdir(filepath.Dir(out), 0o700); err != nil {
		t.Fatal(err)
	}
	size, resumed, err := st.Backup(ctx, out)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Size() != size || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup %s: %v, size %d (said %d), mode %v; want 0600", out, err, fi.Size(), size, fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 1 {
		t.Fatalf("the backup's directory holds %d files, want the backup alone", len(ents))
	}

	cp, err := store.Open(ctx, "sqlite:"+out)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.CheckSchema(ctx, out); err != nil {
		t.Fatalf("the copy is not at this schema: %v", err)
	}
	var deploys, audited int
	if err := cp.DB().QueryRow(`SELECT COUNT(*) FROM manent_deployments`).Scan(&deploys); err != nil {
		t.Fatal(err)
	}
	n, problems, err := cp.VerifyAudit(ctx)
	if err != nil || len(problems) > 0 {
		t.Fatalf("the copy's audit chain: %v %v", problems, err)
	}
	if err := cp.DB().QueryRow(`SELECT COUNT(*) FROM manent_audit WHERE action = 'deployment.create'`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if deploys < 250 || deploys != audited || int64(audited) > n {
		t.Fatalf("the copy holds %d deploys and %d of their audit entries (%d rows): not one instant", deploys, audited, n)
	}
	// Every deploy of the copy is ENQUEUED: a server started on it
	// resumes each, and Backup says so, read from the copy itself.
	if len(resumed) != deploys {
		t.Fatalf("Backup lists %d deploys a restore resumes, the copy holds %d not final", len(resumed), deploys)
	}
	t.Logf("%d deploys written, %d in the copy", written.Load(), deploys)

	// Never over an existing file, the database itself included. The
	// writers' last pages are copied into the database first: the
	// checkpointer would copy them between the two reads below. A
	// checkpoint that meets the checkpointer's is busy (SQLite answers
	// busy=1, no error) and copies nothing: asked again until done.
	enginetest.Eventually(t, 30*time.Second, func() bool {
		var busy, logged, copied int
		if err := st.DB().QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &copied); err != nil {
			t.Fatal(err)
		}
		return busy == 0 && logged == copied
	}, "a whole checkpoint of the WAL")
	for _, p := range []string{out, filepath.Join(dir, "manent.db")} {
		before, _ := os.ReadFile(p)
		if _, _, err := st.Backup(ctx, p); !errors.Is(err, os.ErrExist) || !strings.Contains(err.Error(), "file already exists: name a new file") {
			t.Fatalf("backup over %s: %v, want already exists", p, err)
		}
		if after, _ := os.ReadFile(p); string(after) != string(before) {
			t.Fatalf("%s changed", p)
		}
	}
}

// PostgreSQL has its own tools: Backup says which.
func TestBackupPostgresSaysPgDump(t *testing.T) {
	st := openStore(t, enginetest.Postgres(t))
	out := filepath.Join(t.TempDir(), "b.db")
	if _, _, err := st.Backup(context.Background(), out); !errors.Is(err, store.ErrBackupPostgres) || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("backup on PostgreSQL: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("%s was written (%v)", out, err)
	}
}

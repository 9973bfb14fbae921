package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/manent-io/manent/pkg/manent"
)

// ErrBackupPostgres is returned by Backup on PostgreSQL, which has its own
// tools (pg_dump, continuous archiving).
var ErrBackupPostgres = errors.New("manent backs up SQLite databases only: back a PostgreSQL database up with pg_dump (its manent tables and the dbos schema, both needed) or continuous archiving")

// Backup writes a consistent copy of the SQLite database to path while the
// server goes on writing (VACUUM INTO: one read transaction, so the copy is
// the database at one instant, every deploy's steps and DBOS's checkpoints
// together). The copy is written beside path under a temporary name,
// synced, then linked to path — path either does not exist or is the whole
// copy, never half of one — with mode 0600 (it holds the audit log, the
// deploys' inputs and the sessions' digests). An existing path is refused
// (os.ErrExist), never overwritten. It returns the copy's size in bytes
// and the deploys not final in it (Resumed): what a server started on the
// copy resumes.
func (s *Store) Backup(ctx context.Context, path string) (int64, []Resumed, error) {
	if s.postgres {
		return 0, nil, ErrBackupPostgres
	}
	size, err := s.backup(ctx, path)
	if err != nil {
		return 0, nil, err
	}
	resumed, err := ResumedBy(ctx, path)
	if err != nil {
		return size, nil, fmt.Errorf("backup: written to %s, but its deploys could not be read: %w", path, err)
	}
	return size, resumed, nil
}

// Resumed is a deploy not final in a copy of the database: a server
// started on the copy resumes it — a waiting one waits again, a running
// one goes on from its last step recorded in the copy (Step, when one was
// running: it runs again from its start, whatever it did after the copy).
type Resumed struct {
	ID, Application, Environment string
	State                        manent.State
	Step                         string // the step running in the copy, "" when none
}

// ResumedBy reads, from the SQLite database file at path, the deploys a
// server started on it would resume, oldest first. The file is opened
// read-only and immutable: nothing is written beside it, not even a WAL.
func ResumedBy(ctx context.Context, path string) ([]Resumed, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", OmitHost: true, Path: abs, RawQuery: "mode=ro&immutable=1"}).String())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT d.id, d.application, d.environment, d.state,
		COALESCE((SELECT s.name FROM manent_steps s WHERE s.deployment_id = d.id AND s.state = 'RUNNING' ORDER BY s.position LIMIT 1), '')
		FROM manent_deployments d WHERE d.state IN (`+unfinishedStates()+`) ORDER BY d.created_at, d.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Resumed
	for rows.Next() {
		var r Resumed
		if err := rows.Scan(&r.ID, &r.Application, &r.Environment, &r.State, &r.Step); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) backup(ctx context.Context, path string) (int64, error) {
	if _, err := os.Lstat(path); err == nil {
		return 0, existsError(path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, err
	}
	// An empty file is one VACUUM INTO may write: made here, it has mode
	// 0600 and a name no one else holds.
	tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".partial-*")
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName) // after the link, only the temporary name goes
	if _, err := s.rdb.ExecContext(ctx, `VACUUM INTO ?`, tmpName); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	// VACUUM INTO does not sync what it wrote.
	f, err := os.Open(tmpName)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	err = f.Sync()
	fi, serr := f.Stat()
	f.Close()
	if err = errors.Join(err, serr); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	// A link, unlike a rename, never replaces a file that appeared since.
	if err := os.Link(tmpName, abs); err != nil {
		if errors.Is(err, os.ErrExist) {
			return 0, existsError(path)
		}
		return 0, fmt.Errorf("backup: %w", err)
	}
	if d, err := os.Open(filepath.Dir(abs)); err == nil {
		_ = d.Sync() // the new name is durable too
		d.Close()
	}
	return fi.Size(), nil
}

// existsError refuses a backup over path; it matches os.ErrExist.
func existsError(path string) error {
	return fmt.Errorf("%s: %w: name a new file (a backup never overwrites one)", path, os.ErrExist)
}

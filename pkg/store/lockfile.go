package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// FileLock is an exclusive lock on a SQLite database file held by one
// server (SPEC §11.3).
type FileLock struct {
	f *os.File
	// db is the database file itself, locked too (LockFile).
	db *os.File
}

// ErrLocked says another server uses the SQLite database.
var ErrLocked = errors.New("another manent-server uses this SQLite database; several workers need PostgreSQL (SPEC §11.3)")

// LockFile takes an exclusive lock on <path>.lock beside the SQLite
// database of rawURL; it returns (nil, nil) for PostgreSQL. The path is
// made absolute and its symbolic links resolved first, so a server given
// another path to the same file (a link to it or to a directory above it,
// a relative path from elsewhere) takes the same lock. A hard link is
// another path to the file that cannot be resolved so: the database file
// itself, when it exists (the store opened before creates it), is locked
// too — flock locks the file, whatever its name, and is apart from the
// POSIX locks SQLite takes. Two servers on two names of one file would
// each have their own -wal file and corrupt it. The lock is released by
// Unlock (after the store is closed: closing a descriptor of the database
// file drops the POSIX locks this process holds on it) or when the
// process ends, however it ends.
func LockFile(rawURL string) (*FileLock, error) {
	if len(rawURL) < 7 || rawURL[:7] != "sqlite:" {
		return nil, nil
	}
	path, err := sqlitePath(rawURL)
	if err != nil {
		return nil, err
	}
	real := resolvePath(path)
	l, err := LockPath(real + ".lock")
	if errors.Is(err, ErrHeld) {
		if real != path {
			return nil, fmt.Errorf("%s (the file %s): %w", path, real, ErrLocked)
		}
		return nil, fmt.Errorf("%s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, err
	}
	db, err := os.OpenFile(real, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		l.Unlock()
		return nil, fmt.Errorf("lock %s: %w", real, err)
	}
	if err := syscall.Flock(int(db.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		db.Close()
		l.Unlock()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w (the file itself is locked: another name of it, a hard link, is in use)", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", real, err)
	}
	l.db = db
	return l, nil
}

// resolvePath is path made absolute with its symbolic links resolved: the
// file's when it exists, else its directory's (a database not created
// yet). What cannot be resolved is left as it was.
func resolvePath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(d, filepath.Base(abs))
	}
	return abs
}

// ErrHeld says another process holds the lock LockPath asked for.
var ErrHeld = errors.New("held by another process")

// LockPath takes an exclusive lock on the file path, created if need be
// (its directory too); it fails with ErrHeld when another process holds
// it. The lock is released by Unlock or when the process ends, however it
// ends.
func LockPath(path string) (*FileLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrHeld)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &FileLock{f: f}, nil
}

// Unlock releases the lock.
func (l *FileLock) Unlock() {
	if l == nil {
		return
	}
	if l.db != nil {
		_ = l.db.Close()
		l.db = nil
	}
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

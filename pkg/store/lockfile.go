package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// FileLock is an exclusive lock on a SQLite database file held by one
// server (SPEC §11.3).
type FileLock struct{ f *os.File }

// ErrLocked says another server uses the SQLite database.
var ErrLocked = errors.New("another manent-server uses this SQLite database; several workers need PostgreSQL (SPEC §11.3)")

// LockFile takes an exclusive lock on <path>.lock beside the SQLite
// database of rawURL; it returns (nil, nil) for PostgreSQL. The path is
// made absolute and its symbolic links resolved first, so a server given
// another path to the same file (a link to it or to a directory above it,
// a relative path from elsewhere) takes the same lock; a hard link is
// another path to the file that cannot be resolved so. The lock is
// released by Unlock or when the process ends, however it ends.
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
	return l, err
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
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

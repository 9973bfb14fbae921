// Package atomicfile writes a file whole or not at all: through a synced
// temporary file in the same directory, renamed over the target. A reader
// never sees a half-written file, and a crash leaves the old file or the
// new one; the directory is flushed after the rename, so that once Write
// returns a power loss cannot bring the old file back. The CLI's config
// file and the trial server's record use it.
//
// It imports nothing of this module.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// Write writes data to path with mode perm, creating path's directory
// (mode 0700) when it is missing.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

// syncDir flushes a directory's entries (the rename) to disk; a no-op on
// Windows, and on a file system that cannot flush a directory (EINVAL:
// some network and FUSE ones). A variable for the tests.
var syncDir = func(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

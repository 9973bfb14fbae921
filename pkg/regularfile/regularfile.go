// Package regularfile reads a file only when it is a regular file, and only
// up to a bound: a FIFO, a device, a directory or a huge file put where a
// file is expected must neither block the reader nor fill its memory. The
// environment configuration files, the local plugin's owner record and the
// `file:` secrets are read through it.
//
// It imports nothing of this module.
package regularfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrTooLarge is returned when a file holds more than the bound.
var ErrTooLarge = errors.New("file larger than the bound")

// NotRegularError is returned for what is no regular file (a directory, a
// FIFO, a device, a socket; with NoFollow, a link).
type NotRegularError struct {
	Name string
	Mode fs.FileMode // its type bits: fs.ModeDir, fs.ModeNamedPipe, fs.ModeSymlink…
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (%s)", e.Name, e.Mode.Type())
}

// Follow says whether a link is followed (Follow) or refused as no
// regular file (NoFollow).
type Follow bool

const (
	FollowLinks Follow = true
	NoFollow    Follow = false
)

// Read returns the content of name, at most limit bytes; an empty file reads
// as an empty, non-nil slice. What is no regular file is refused (a
// *NotRegularError) before it is opened, so a device is never opened; the
// file is opened without waiting for a writer and checked again once open,
// so a FIFO (or, with NoFollow, a link) swapped in after the first check is
// refused too. A file larger than limit is refused with ErrTooLarge. The
// other errors are those of os.Stat (os.Lstat with NoFollow), os.OpenFile
// and the read, unwrapped: fs.ErrNotExist tells a missing file.
func Read(name string, limit int64, follow Follow) ([]byte, error) {
	stat, flags := os.Stat, os.O_RDONLY|syscall.O_NONBLOCK
	if follow == NoFollow {
		stat, flags = os.Lstat, flags|syscall.O_NOFOLLOW
	}
	st, err := stat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &NotRegularError{Name: name, Mode: st.Mode().Type()}
	}
	f, err := os.OpenFile(name, flags, 0)
	if follow == NoFollow && errors.Is(err, syscall.ELOOP) {
		return nil, &NotRegularError{Name: name, Mode: fs.ModeSymlink}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err = f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &NotRegularError{Name: name, Mode: st.Mode().Type()}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w (%d bytes)", name, ErrTooLarge, limit)
	}
	return b, nil
}

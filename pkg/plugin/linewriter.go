package plugin

import (
	"bytes"
	"io"
	"sync"
)

// LineWriter forwards whole lines to a deploy log, safe for a command's
// stdout and stderr at once. A line longer than 64 KiB is forwarded in
// pieces; Flush forwards an unterminated last line.
type LineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewLineWriter writes lines to w (nil: discards them).
func NewLineWriter(w io.Writer) *LineWriter { return &LineWriter{w: w} }

func (l *LineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 {
		l.emit(l.buf)
		l.buf = nil
	}
	return len(p), nil
}

// Flush forwards what is left of an unterminated line.
func (l *LineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
	}
	l.buf = nil
}

func (l *LineWriter) emit(line []byte) {
	if l.w != nil {
		out := make([]byte, 0, len(line)+1)
		out = append(out, bytes.TrimRight(line, "\r")...)
		_, _ = l.w.Write(append(out, '\n'))
	}
}

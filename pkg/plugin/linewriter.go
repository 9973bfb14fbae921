package plugin

import (
	"bytes"
	"io"
	"sync"
)

// LineWriter forwards whole lines to a deploy log, safe for a command's
// stdout and stderr at once. Of a line longer than 64 KiB it forwards the
// first pieces without a line end, so the log still reads one line (and
// masks a secret across two pieces, cuts it at its bound and says how long
// it was); Flush forwards an unterminated last line. It keeps the last
// meaningful lines for the command's error (LastLines).
type LineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	// midLine: pieces of the current line were forwarded already.
	midLine bool
	last    lastLines
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
		// A carriage return may end the line (\r\n): keep it for emit.
		piece := l.buf
		if piece[len(piece)-1] == '\r' {
			piece = piece[:len(piece)-1]
		}
		if l.w != nil && len(piece) > 0 {
			_, _ = l.w.Write(piece)
		}
		if len(piece) > 0 {
			l.last.add(piece, true)
		}
		l.buf, l.midLine = append([]byte(nil), l.buf[len(piece):]...), true
	}
	return len(p), nil
}

// Flush forwards what is left of an unterminated line.
func (l *LineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 || l.midLine {
		l.emit(l.buf)
	}
	l.buf = nil
}

// LastLines returns the last meaningful lines written (at most
// LastOutputLines, each cut at 4 KiB), for WithOutput.
func (l *LineWriter) LastLines() []OutputLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]OutputLine(nil), l.last.lines...)
}

func (l *LineWriter) emit(line []byte) {
	l.last.add(bytes.TrimRight(line, "\r"), false)
	if l.w != nil {
		out := make([]byte, 0, len(line)+1)
		out = append(out, bytes.TrimRight(line, "\r")...)
		_, _ = l.w.Write(append(out, '\n'))
	}
	l.midLine = false
}

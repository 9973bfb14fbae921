package cli

import (
	"bytes"
	"fmt"
	"sync"
	"time"
)

// statusLine is the one line on a terminal stderr that says, while a
// command waits for a deploy, what it waits for and since when:
//
//	deploy dpl_…: ENQUEUED (queued: 2nd in hello/staging, behind dpl_…) · 12s
//
// It is redrawn in place ("\r", erase line) and removed before anything
// else is printed, so it never mixes with other output. It draws nothing
// when stderr is not a terminal: then progress prints plain lines on change.
// The text is sanitised like every other output (no control character, no
// escape sequence); only the CLI's own carriage return and erase-line pass.
type statusLine struct {
	mu    sync.Mutex
	io    *IOStreams
	tty   bool
	now   func() time.Time
	start time.Time
	text  string
	shown bool
	done  bool
}

func newStatusLine(s *IOStreams, now func() time.Time) *statusLine {
	return &statusLine{io: s, tty: s.IsStderrTTY() && s.errRaw != nil, now: now, start: now()}
}

// setLocked records the current text and redraws the line with the elapsed time.
func (l *statusLine) setLocked(text string) {
	l.text = text
	l.drawLocked()
}

func (l *statusLine) drawLocked() {
	if !l.tty || l.done || l.text == "" {
		return
	}
	elapsed := l.now().Sub(l.start).Truncate(time.Second)
	var b bytes.Buffer
	b.WriteString("\r\x1b[K")
	writeSanitized(&b, []byte(fmt.Sprintf("%s · %s", l.text, elapsed)), false, false)
	_, _ = l.io.errRaw.Write(b.Bytes())
	l.shown = true
}

// clearLocked erases the line if it is shown.
func (l *statusLine) clearLocked() {
	if !l.shown {
		return
	}
	_, _ = l.io.errRaw.Write([]byte("\r\x1b[K"))
	l.shown = false
}

// around runs write (which prints a whole line) with the status line
// removed first and redrawn after.
func (l *statusLine) around(write func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearLocked()
	err := write()
	l.drawLocked()
	return err
}

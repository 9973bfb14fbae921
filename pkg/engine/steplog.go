package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
)

// The bounds of what a deploy's steps may write to its log. Whatever a
// step's command prints (a `cat` of a large file, a loop gone wrong), the
// server keeps a bounded amount of it in memory and in the database, and
// says what it left out.
const (
	// MaxLogLine is the longest log line kept, in bytes; a longer line is
	// cut and says how long it was.
	MaxLogLine = 16 << 10
	// MaxStepLogLines and MaxStepLogBytes bound what one attempt of a step
	// keeps; the rest of its output is counted, not kept.
	MaxStepLogLines = 20_000
	MaxStepLogBytes = 4 << 20
	// MaxDeployLogBytes bounds what all the steps of one execution of a
	// deploy keep together.
	MaxDeployLogBytes = 64 << 20
	// MaxStepError is the longest step error kept, in bytes: a plugin may
	// answer megabytes of it, and it is shown in the deploy's error, its
	// events, callbacks and chat messages too.
	MaxStepError = 8 << 10
)

// logBudget is what the steps of one execution of a deploy have left to
// write to its log (MaxDeployLogBytes).
type logBudget struct{ used atomic.Int64 }

// take reserves n bytes; false when the deploy's log is full.
func (b *logBudget) take(n int) bool {
	if b == nil {
		return true
	}
	if b.used.Add(int64(n)) > MaxDeployLogBytes {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

// logWriter collects what a step writes to the deploy's log, line by line.
// Lines are written with the step's end, or sooner — at most every
// logFlushEvery — once the step is shown RUNNING, so `logs -f` follows a
// long step as it runs. It keeps at most MaxLogLine bytes of a line and
// MaxStepLogLines lines or MaxStepLogBytes bytes of an attempt (and what
// the deploy's budget allows); of the rest it counts the lines and bytes
// and says so in one line at the end.
type logWriter struct {
	ctx  context.Context
	st   *store.Store
	id   string
	step string
	// mayWrite, when set, says whether this worker may still write to the
	// deploy's log: a worker fenced or cut off (its deploys are another's
	// now) drops what its step's command still writes.
	mayWrite func() bool
	budget   *logBudget
	// mask masks the secrets the step is given in each line (nil: none).
	// A line is masked whole, however the command wrote it; a line cut at
	// MaxLogLine also loses a secret's start at its end.
	mask    *plugin.Masker
	mu      sync.Mutex
	buf     []byte // the start of an unterminated line, at most MaxLogLine
	over    int    // bytes of that line beyond buf
	pending []store.LogEntry
	last    time.Time
	live    bool // the step is shown RUNNING: flush as lines come

	keptLines, keptBytes int
	full                 string // why nothing more is kept ("" while there is room)
	droppedLines         int
	droppedBytes         int64
}

const logFlushEvery = 250 * time.Millisecond

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	now := time.Now()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if room := MaxLogLine - len(l.buf); room > 0 {
			keep := min(room, len(part))
			l.buf = append(l.buf, part[:keep]...)
			l.over += len(part) - keep
		} else {
			l.over += len(part)
		}
		if i < 0 {
			break
		}
		l.line(now)
		p = p[i+1:]
	}
	if l.live && len(l.pending) > 0 && now.Sub(l.last) >= logFlushEvery {
		l.flushLocked()
	}
	return n, nil
}

// line ends the line in buf: kept if there is room, counted if not.
func (l *logWriter) line(now time.Time) {
	text := strings.TrimRight(string(l.buf), "\r")
	size := len(l.buf) + l.over
	if l.over > 0 {
		// Cut on a character boundary, and say how long the line was.
		for k := 0; k < utf8.UTFMax-1 && len(text) > 0; k++ {
			if r, n := utf8.DecodeLastRuneInString(text); r != utf8.RuneError || n != 1 {
				break
			}
			text = text[:len(text)-1]
		}
		text = fmt.Sprintf("%s … [line cut: %d bytes, at most %d kept]", l.mask.MaskCut(text), size, MaxLogLine)
	} else {
		text = l.mask.Mask(text)
	}
	l.buf, l.over = l.buf[:0], 0
	if l.full == "" {
		switch {
		case l.keptLines >= MaxStepLogLines || l.keptBytes+len(text) > MaxStepLogBytes:
			l.full = fmt.Sprintf("this step's log limit (%d lines or %d MiB per attempt)", MaxStepLogLines, MaxStepLogBytes>>20)
		case !l.budget.take(len(text)):
			l.full = fmt.Sprintf("this deploy's log limit (%d MiB)", MaxDeployLogBytes>>20)
		}
		if l.full != "" {
			// Said at once, so that `logs -f` shows why the output stops.
			l.pending = append(l.pending, store.LogEntry{Time: now, Text: fmt.Sprintf(
				"[%s is reached: the rest of this step's output is counted, not kept]", l.full)})
		}
	}
	if l.full != "" {
		l.droppedLines++
		l.droppedBytes += int64(size) + 1
		return
	}
	l.keptLines++
	l.keptBytes += len(text)
	l.pending = append(l.pending, store.LogEntry{Time: now, Text: text})
}

// flush writes the pending lines now and streams the rest as they come.
func (l *logWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live = true
	l.flushLocked()
}

func (l *logWriter) flushLocked() {
	if len(l.pending) == 0 {
		return
	}
	if l.mayWrite != nil && !l.mayWrite() {
		// A paused worker resumed after its deploys were taken over: the
		// output of the attempt its lifeline stopped would land in the
		// middle of the new attempt's log.
		l.pending = nil
		return
	}
	if err := l.st.AppendLog(l.ctx, l.id, l.step, l.pending); err == nil {
		l.pending = nil
	}
	l.last = time.Now()
}

// take returns the lines not written yet, including a last unterminated
// one, and a last line saying what the limits left out.
func (l *logWriter) take() []store.LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if len(l.buf) > 0 || l.over > 0 {
		l.line(now)
	}
	if l.droppedLines > 0 {
		l.pending = append(l.pending, store.LogEntry{Time: now, Text: fmt.Sprintf(
			"… %d more lines (%d bytes) of output not kept: %s was reached", l.droppedLines, l.droppedBytes, l.full)})
		l.droppedLines, l.droppedBytes = 0, 0
	}
	out := l.pending
	l.pending = nil
	return out
}

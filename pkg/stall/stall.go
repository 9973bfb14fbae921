// Package stall notices a read that makes no progress: a Reader restarts
// its timer on every byte read, so the timer fires only after Idle without
// a byte. What the timer does — cancel a download, end a silent event
// stream — is its owner's.
//
// It imports only the standard library.
package stall

import (
	"io"
	"time"
)

// Reader reads from R and restarts Timer (for Idle) on every byte read.
type Reader struct {
	R     io.Reader
	Timer *time.Timer
	Idle  time.Duration
}

// Read reads from R; any byte read restarts the timer.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	if n > 0 {
		r.Timer.Reset(r.Idle)
	}
	return n, err
}

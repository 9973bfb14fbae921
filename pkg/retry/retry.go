// Package retry is manent's one exponential backoff: a Policy (first wait,
// growth, cap, attempts, time budget, jitter) and the loop that applies it
// while honouring a context. Each concern keeps its own Policy next to its
// code (the API client's, a step end's record, health checks, callback and
// chat deliveries, the CLI's event stream); this package holds the
// arithmetic and the loop they used to repeat.
//
// DBOS's own step retries (engine.Config.RetryBase/RetryMax) and the
// durable waits of deliveries (dbos.Sleep) are not loops of ours: they use
// Policy.Delay only, or DBOS's options.
//
// It imports nothing of this module.
package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff. The zero value retries at once, forever
// (until the context ends): set at least Initial and one bound.
type Policy struct {
	// Initial is the wait after the first failed attempt.
	Initial time.Duration
	// Max caps one wait (0: no cap).
	Max time.Duration
	// Factor multiplies the wait after each further failed attempt (0
	// means 2).
	Factor float64
	// Attempts bounds the attempts, the first included (0: no bound).
	Attempts int
	// For bounds the time spent: no attempt starts once For has passed
	// since the first began (0: no bound).
	For time.Duration
	// Jitter spreads each wait by up to ±Jitter of itself (0.2: ±20 %), so
	// that many clients do not come back together.
	Jitter float64
}

// Delay is the wait after failed attempt n (1-based), before jitter:
// Initial × Factor^(n-1), at most Max.
func (p Policy) Delay(n int) time.Duration {
	factor := p.Factor
	if factor <= 0 {
		factor = 2
	}
	d := p.Initial
	for i := 1; i < n && (p.Max <= 0 || d < p.Max); i++ {
		next := time.Duration(float64(d) * factor)
		if next < d { // overflow
			next = time.Duration(1<<63 - 1)
		}
		d = next
	}
	if p.Max > 0 {
		d = min(d, p.Max)
	}
	return d
}

// Wait is Delay(n) with the policy's jitter.
func (p Policy) Wait(n int) time.Duration {
	d := p.Delay(n)
	if p.Jitter > 0 {
		d += time.Duration((rand.Float64()*2*p.Jitter - p.Jitter) * float64(d))
	}
	return d
}

// Do calls op(n) for attempts n = 1, 2, … until it returns nil, an error
// made with Stop, or the policy's Attempts or For is spent; between two
// attempts it waits Wait(n), or the wait an error made with After asks for.
// It returns the last attempt's error (unwrapped from Stop and After), or
// ctx.Err() when ctx ends during a wait. op decides what is worth retrying:
// an attempt that failed because ctx ended should return Stop(err).
func (p Policy) Do(ctx context.Context, op func(n int) error) error {
	start := time.Now()
	for n := 1; ; n++ {
		err := op(n)
		if err == nil {
			return nil
		}
		var s *stopError
		if errors.As(err, &s) {
			return s.err
		}
		wait := p.Wait(n)
		var a *afterError
		if errors.As(err, &a) {
			err, wait = a.err, a.wait
		}
		if (p.Attempts > 0 && n >= p.Attempts) || (p.For > 0 && time.Since(start) >= p.For) {
			return err
		}
		if err := Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// Sleep waits d or until ctx ends, and then returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stop marks err as not worth retrying: Do returns err at once.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return &stopError{err}
}

// After asks Do to wait d (not the policy's wait) before the next attempt,
// e.g. a server's Retry-After.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &afterError{err, d}
}

type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

type afterError struct {
	err  error
	wait time.Duration
}

func (e *afterError) Error() string { return e.err.Error() }
func (e *afterError) Unwrap() error { return e.err }

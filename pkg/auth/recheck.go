package auth

import (
	"context"
	"time"
)

// Recheck is what a caller that presents a bearer credential on someone's
// behalf adds to a request's context when the credential alone does not
// say whether it still holds: the web UI, whose session can be signed out
// or expire while the bearer credential it carries stays valid. A
// long-lived answer (an event stream) asks Check at least every Every
// while it is open, besides authenticating its bearer credential again,
// and ends as soon as Check returns an error (the error says why; it must
// not hold a secret). Check runs under a deadline; an error of the check
// itself (the database does not answer) ends the stream too.
type Recheck struct {
	Every time.Duration
	Check func(ctx context.Context) error
}

type recheckKey struct{}

// WithRecheck returns ctx carrying rc.
func WithRecheck(ctx context.Context, rc Recheck) context.Context {
	return context.WithValue(ctx, recheckKey{}, rc)
}

// RecheckOf returns the Recheck ctx carries, if any.
func RecheckOf(ctx context.Context) (Recheck, bool) {
	rc, ok := ctx.Value(recheckKey{}).(Recheck)
	return rc, ok && rc.Check != nil
}

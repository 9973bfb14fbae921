package web

import (
	"testing"
	"time"
)

// SealSession seals v (a session's JSON fields, any of them forged) as
// the session cookie value of a server whose key is secret: what a holder
// of the key could send.
func SealSession(secret []byte, v any) (string, error) {
	s, err := newSealer(secret)
	if err != nil {
		return "", err
	}
	return s.seal(sessionCookie, v)
}

// SetSessionRecheck makes event streams opened for a session check it
// again every d for the rest of t. Tests using it must not run in parallel.
func SetSessionRecheck(t testing.TB, d time.Duration) {
	prev := sessionRecheckOverride.Swap(int64(d))
	t.Cleanup(func() { sessionRecheckOverride.Store(prev) })
}

// SessionRechecks is how many re-checks of open streams' sessions ran,
// process-wide.
func SessionRechecks() int64 { return sessionRechecks.Load() }

// SetSignInClock makes h's sign-in limit read now for the rest of t.
func SetSignInClock(t testing.TB, h *Handler, now func() time.Time) {
	l := h.signIns
	prev := l.SetClock(now)
	t.Cleanup(func() { l.SetClock(prev) })
}

package web

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/manent-io/manent/pkg/auth"
)

// sessionRecheck is how often an event stream the UI opened for a session
// checks again that the session is neither signed out nor expired: one
// primary-key read of manent_revoked_sessions per stream and interval.
const sessionRecheck = 15 * time.Second

// sessionRecheckOverride, when set (tests only, export_test.go), replaces
// sessionRecheck.
var sessionRecheckOverride atomic.Int64

// sessionRechecks counts, process-wide, the re-checks of open streams'
// sessions (tests read it).
var sessionRechecks atomic.Int64

func sessionRecheckEvery() time.Duration {
	if d := sessionRecheckOverride.Load(); d > 0 {
		return time.Duration(d)
	}
	return sessionRecheck
}

// Why a session's stream ends (the API sends it as the stream's last
// comment).
var (
	errStreamSignedOut = errors.New("the session was signed out")
	errStreamExpired   = errors.New("the session expired")
	errStreamUnchecked = errors.New("the session could not be checked: the database did not answer")
)

// streamRecheck is the check the API's event stream makes again, every
// sessionRecheck, for a stream opened with session s (auth.Recheck): the
// stream ends once s is signed out (on any worker) or expired — and, fail
// closed, when the revocation check itself fails; the browser then
// reconnects, which checks the session like any request.
func (h *Handler) streamRecheck(s session) auth.Recheck {
	return auth.Recheck{Every: sessionRecheckEvery(), Check: func(ctx context.Context) error {
		sessionRechecks.Add(1)
		if h.now().Unix() >= s.Expires {
			return errStreamExpired
		}
		revoked, err := h.sessions.SessionRevoked(ctx, s.ID)
		if err != nil {
			h.log.Error("web: session revocation check of an open stream", "error", err)
			return errStreamUnchecked
		}
		if revoked {
			return errStreamSignedOut
		}
		return nil
	}}
}

package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/manent"
)

// recheckTimeout bounds one re-check of a stream's credential: a check
// that takes longer (a database or an OIDC issuer that does not answer)
// counts as failed and ends the stream.
const recheckTimeout = 5 * time.Second

// streamRechecks counts, process-wide, the re-checks of open streams
// (tests read it).
var streamRechecks atomic.Int64

// streamAuth is what an open event stream checks again, every interval,
// before it sends anything more: that the bearer credential that opened it
// still authenticates (an OIDC token expires), and, when the web UI opened
// it for a session (auth.Recheck in the request's context), that the
// session is neither signed out nor expired. Either check failing, the
// check's own failure included (fail closed), ends the stream with a last
// comment saying why; a client that reconnects is then refused (401), or
// let in again if the failure was passing.
//
// Its cost is a static token's in-memory lookup or an OIDC signature check
// per interval, plus, for a session, the session's one primary-key read.
type streamAuth struct {
	guard         Guard
	authorization string
	subject       string
	extra         auth.Recheck // Check nil: none
	every         time.Duration
}

// streamAuthOf returns the checks of a stream p opened with r.
func (s *Server) streamAuthOf(r *http.Request, p manent.Identity) *streamAuth {
	a := &streamAuth{guard: s.cfg.Guard, authorization: r.Header.Get("Authorization"), subject: p.Subject,
		every: currentStreamTiming().Recheck}
	if rc, ok := auth.RecheckOf(r.Context()); ok {
		a.extra = rc
		if rc.Every > 0 && rc.Every < a.every {
			a.every = rc.Every
		}
	}
	return a
}

// ticker returns the ticker of the checks.
func (a *streamAuth) ticker() *time.Ticker { return time.NewTicker(a.every) }

// check returns why the stream must end now, "" when it may go on.
func (a *streamAuth) check(ctx context.Context) string {
	streamRechecks.Add(1)
	ctx, cancel := context.WithTimeout(ctx, recheckTimeout)
	defer cancel()
	p, err := a.guard.Authenticate(ctx, a.authorization)
	if err != nil {
		var me *manent.Error
		if errors.As(err, &me) && me.Code == manent.EUnauthorized {
			return "the credential is no longer valid: " + me.Message
		}
		return "the credential could not be checked again"
	}
	if p.Subject != a.subject {
		return "the credential names another identity now"
	}
	if a.extra.Check != nil {
		if err := a.extra.Check(ctx); err != nil {
			return err.Error()
		}
	}
	return ""
}

// recheck runs the checks; when they fail it logs, sends the last comment
// and reports true: the handler returns, which ends the response cleanly.
func (s *Server) recheck(a *streamAuth, sw *sseWriter, r *http.Request) bool {
	why := a.check(sw.sub.ctx)
	if why == "" || sw.sub.ctx.Err() != nil {
		return sw.sub.ctx.Err() != nil
	}
	s.log.Info("event stream ended: its credential no longer holds", "path", r.URL.Path, "subject", a.subject, "reason", why)
	sw.end(why)
	return true
}

// end sends the stream's last comment (": stream ended: <why>"): SSE
// clients ignore comments, and one that reconnects is answered by the
// authentication of its request.
func (sw *sseWriter) end(why string) {
	why = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, why)
	sw.write([]byte(": stream ended: " + why + "\n\n"))
	sw.flush()
}

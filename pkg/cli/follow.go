package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// DefaultFollowGrace is how long following a deploy tolerates a server
// that stopped answering (a restart, a network cut) before exiting 4.
const DefaultFollowGrace = 30 * time.Second

// watch says how to follow one deploy until it is final (watchDeploy).
type watch struct {
	Client *api.Client
	ID     string
	// Interval is the time between two polls.
	Interval time.Duration
	// Timeout, when positive, bounds the whole wait: when it elapses the
	// last deployment seen is returned with a *TimeoutError.
	Timeout time.Duration
	// Grace is how long a server that stopped answering is asked again
	// (DefaultFollowGrace when 0).
	Grace time.Duration
	// Submitted says the server has already answered for this deploy (it
	// accepted it): a first poll that fails gets the grace too.
	Submitted bool
	// OnPoll, when not nil, gets every answer.
	OnPoll func(*manent.Deployment)
	// OnLost, when not nil, is told once per outage that the server stopped
	// answering and is asked again for Grace.
	OnLost func(err error, grace time.Duration)
}

// watchDeploy polls the deploy until it is final. It is what `deploy
// --wait`, `rollback --wait`, `wait` and `logs -f` share. A server that
// stops answering after it has answered about the deploy is asked again
// for the grace; past it the error is a *LostError (exit 4) that says the
// deploy goes on.
func watchDeploy(ctx context.Context, w watch) (*manent.Deployment, error) {
	parent := ctx
	if w.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.Timeout)
		defer cancel()
	}
	grace := w.Grace
	if grace <= 0 {
		grace = DefaultFollowGrace
	}
	var (
		last    *manent.Deployment
		lastOK  time.Time
		lost    bool
		started = time.Now()
	)
	timedOut := func() error {
		state := manent.State("")
		if last != nil {
			state = last.State
		}
		return &TimeoutError{ID: w.ID, State: state, After: w.Timeout}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			if w.Timeout > 0 && parent.Err() == nil {
				return last, timedOut()
			}
			return last, ctx.Err()
		case <-timer.C:
		}
		d, err := w.Client.Deployment(ctx, w.ID)
		if err != nil {
			if w.Timeout > 0 && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return last, timedOut()
			}
			answered := last != nil || w.Submitted
			if answered && ctx.Err() == nil {
				err = refusedWhileFollowing(w.ID, err)
			}
			if !answered || !transient(err) || ctx.Err() != nil {
				return last, err
			}
			// A server that restarts while we wait is not a failed deploy:
			// keep asking for a while once it has answered.
			since := lastOK
			if since.IsZero() {
				since = started
			}
			if away := time.Since(since); away >= grace {
				return last, &LostError{ID: w.ID, Away: away, Err: err}
			}
			if !lost && w.OnLost != nil {
				w.OnLost(err, grace)
			}
			lost = true
			timer.Reset(min(max(w.Interval, time.Second), grace/4))
			continue
		}
		last, lastOK, lost = d, time.Now(), false
		if w.OnPoll != nil {
			w.OnPoll(d)
		}
		if d.State.Final() {
			return d, nil
		}
		timer.Reset(w.Interval)
	}
}

// LostError says the server stopped answering while a command followed
// deploy ID, and had not answered again after Away (exit 4, like the error
// it wraps). The deploy itself is durable on the server and goes on.
type LostError struct {
	ID   string
	Away time.Duration
	Err  error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("%v (no answer for %s while following deploy %s)", e.Err, formatDuration(e.Away.Round(time.Second)), e.ID)
}

func (e *LostError) Unwrap() error { return e.Err }

// RefusedError says the server refused the token (401) or the request
// (403) while a command followed deploy ID, after it had answered about
// it: the token expired or was revoked, or lost its permission. The exit
// code is the refusal's (2); the deploy itself goes on.
type RefusedError struct {
	ID  string
	Err error
}

func (e *RefusedError) Error() string { return e.Err.Error() }

func (e *RefusedError) Unwrap() error { return e.Err }

// refusedWhileFollowing wraps err, an answer about deploy id after the
// server had answered about it: a 401 or 403 in a *RefusedError (the
// token expired or was revoked since), a 404 in a *GoneError (the deploy
// is no longer there); other errors pass unchanged.
func refusedWhileFollowing(id string, err error) error {
	switch manent.ErrorCode(err) {
	case manent.EUnauthorized, manent.EForbidden:
		var refused *RefusedError
		if !errors.As(err, &refused) {
			return &RefusedError{ID: id, Err: err}
		}
	case manent.ENotFound:
		var gone *GoneError
		if !errors.As(err, &gone) {
			return &GoneError{ID: id, Err: err}
		}
	}
	return err
}

// GoneError says deploy ID, which the server had answered about while a
// command followed it, is no longer there (a 404): its database was
// restored from a backup older than the deploy. Exit 2, like the 404.
type GoneError struct {
	ID  string
	Err error
}

func (e *GoneError) Error() string { return e.Err.Error() }

func (e *GoneError) Unwrap() error { return e.Err }

// transient reports whether err may pass by itself: the server is
// unreachable (restarting, a network blip) or answered 502/503/504
// (starting, overloaded, behind a proxy that lost it). Other server errors
// and every 4xx are final.
func transient(err error) bool {
	if api.IsUnreachable(err) {
		return true
	}
	var se *api.ServerError
	if errors.As(err, &se) {
		switch se.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
	}
	return false
}

// outcome turns a final deployment into the command's result: nil for
// SUCCESS, a *DeployFailedError (exit 1, reason on stderr) otherwise.
func outcome(d *manent.Deployment) error {
	if d == nil || d.State == manent.StateSuccess {
		return nil
	}
	return &DeployFailedError{Deployment: d}
}

// progress prints, on stderr, each finished step of a followed deploy and
// each change of its (non-final) state, of the step that runs or of the
// reason it waits. On a terminal stderr the current state, running step,
// reason (queue position) and elapsed time are also kept on one status line
// updated in place (see waitstatus.go). The final state is left to the
// command's result. A quiet progress prints nothing.
type progress struct {
	io    *IOStreams
	w     io.Writer
	now   func() time.Time
	last  string // the last state line printed
	seen  map[string]bool
	quiet bool
	st    *statusLine
	// printed is when the last plain line was printed (not on a terminal).
	printed time.Time
}

// keepaliveEvery is how long progress on a stderr that is not a terminal
// (a CI log) stays silent at most: the state line is repeated, with the time
// waited, so that a CI that kills a job silent for 10 minutes (CircleCI's
// no_output_timeout, Travis) does not kill one that follows a long step.
const keepaliveEvery = 5 * time.Minute

func newProgress(s *IOStreams, now func() time.Time) *progress {
	if now == nil {
		now = time.Now
	}
	return &progress{io: s, w: s.ErrOut, now: now, seen: map[string]bool{}, st: newStatusLine(s, now), printed: now()}
}

func (p *progress) update(d *manent.Deployment) {
	if p.quiet || d == nil {
		return
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	started := false
	for _, s := range d.Steps {
		started = started || s.StartedAt != nil
		retrying := s.Retrying()
		if (!stepDone(s.State) && !retrying) || neverStarted(s) {
			continue
		}
		key := s.Name + "@" + formatTimePtr(s.StartedAt)
		if retrying {
			// One line per failed attempt; the step's result follows.
			key += fmt.Sprintf("#%d", s.Attempts)
		}
		if p.seen[key] {
			continue
		}
		p.seen[key] = true
		p.st.clearLocked()
		fmt.Fprintln(p.w, "  "+stepLine(p.io, s, p.now()))
		p.printed = p.now()
	}
	if d.State.Final() {
		p.st.clearLocked()
		if !started && len(d.Steps) > 0 && !p.st.done {
			// Rejected, cancelled or failed before its first step: one
			// line, not one SKIPPED line per step of the plan.
			fmt.Fprintln(p.w, "  no step ran")
		}
		p.st.done = true
		return
	}
	state := safeText(string(d.State))
	line := state
	if d.Reason != "" {
		line += " (" + safeText(d.Reason) + ")"
	}
	if step, retrying := runningStep(d); step != "" {
		if retrying {
			line += ", step " + safeText(step) + " waiting to retry"
		} else {
			line += ", step " + safeText(step) + " running"
		}
	}
	if !p.st.tty {
		now := p.now()
		switch {
		case line != p.last:
			fmt.Fprintf(p.w, "deploy %s: %s\n", safeText(d.ID), p.io.State(state)+strings.TrimPrefix(line, state))
			p.printed = now
		case now.Sub(p.printed) >= keepaliveEvery:
			fmt.Fprintf(p.w, "deploy %s: %s · %s (still waiting)\n", safeText(d.ID), p.io.State(state)+strings.TrimPrefix(line, state),
				formatDuration(now.Sub(p.st.start).Truncate(time.Second)))
			p.printed = now
		}
	}
	p.last = line
	p.st.setLocked("deploy " + safeText(d.ID) + ": " + line)
}

// lost says, once per outage, that the server stopped answering and is
// asked again for grace; the state line is printed again when it answers.
// wrote notes that the command printed something else (a log line of
// logs -f): the output is alive, and the state line is not repeated to
// keep it so until keepaliveEvery has passed without any.
func (p *progress) wrote() {
	if p.quiet {
		return
	}
	p.st.mu.Lock()
	p.printed = p.now()
	p.st.mu.Unlock()
}

// say prints a line on stderr (above the status line), even when quiet:
// what it says changes how the output above reads.
func (p *progress) say(line string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.clearLocked()
	p.last, p.printed = "", p.now()
	fmt.Fprintf(p.w, "notice: %s\n", line)
	p.st.drawLocked()
}

func (p *progress) lost(err error, grace time.Duration) {
	if p.quiet {
		return
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.clearLocked()
	p.last, p.printed = "", p.now()
	fmt.Fprintf(p.w, "%s; asking again for %s (the deploy is kept on the server: it goes on there, or once the server is back)\n", safeText(err.Error()), formatDuration(grace))
	p.st.drawLocked()
}

// finish removes the status line (before the command's result is printed).
func (p *progress) finish() {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.clearLocked()
	p.st.done = true
}

// runningStep names the step of d that runs now ("" when none does), and
// whether it waits between two attempts.
func runningStep(d *manent.Deployment) (string, bool) {
	for _, s := range d.Steps {
		if s.State == manent.StepRunning {
			return s.Name, s.Retrying()
		}
	}
	return "", false
}

// stepDone reports whether a step has its result.
func stepDone(s manent.StepState) bool {
	switch s {
	case manent.StepSuccess, manent.StepError, manent.StepSkipped:
		return true
	}
	return false
}

// neverStarted reports whether a step was skipped without starting: the
// steps after a failure, or every step of a deploy that ended before it ran.
func neverStarted(s manent.Step) bool {
	return s.State == manent.StepSkipped && s.StartedAt == nil
}

// stepLine prints a finished step: `step deploy: ERROR after 3 attempts (4.2s): exit status 1`,
// or a failed attempt another will follow: `step deploy: attempt 1 of 4
// failed; retrying in 2s: exit status 1`.
func stepLine(s *IOStreams, st manent.Step, now time.Time) string {
	if note := retryNote(st, now); note != "" {
		return fmt.Sprintf("step %s: %s: %s", safeText(st.Name), note, safeText(st.Error))
	}
	line := fmt.Sprintf("step %s: %s", safeText(st.Name), s.State(string(st.State)))
	if st.Attempts > 1 {
		line += fmt.Sprintf(" after %d attempts", st.Attempts)
	}
	if d := durationCell(st.StartedAt, st.FinishedAt, now); d != "" {
		line += " (" + d + ")"
	}
	if st.Error != "" {
		line += ": " + safeText(st.Error)
	}
	return line
}

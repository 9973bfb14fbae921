package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/retry"
	"github.com/manent-io/manent/pkg/stall"
)

// reconnectFor is how long a dropped event stream is retried before the
// server counts as unreachable (exit 4).
const reconnectFor = 30 * time.Second

// eventStream follows a deploy's Server-Sent Events (r3labs/sse): after a
// dropped connection it reconnects with Last-Event-ID, so no event is lost
// or repeated; it returns once the `done` event has arrived.
type eventStream struct {
	client *api.Client
	hc     *http.Client
	url    string
	id     string
	// onEvent gets every event once, in order; an error stops the stream.
	onEvent func(api.Event) error
	// retryFor bounds how long reconnection is tried (reconnectFor if 0).
	retryFor time.Duration
	// onRewind, when not nil, is told that the server's stream now ends
	// at end, before the last event this stream delivered (the server's
	// database was restored from an older backup): the stream starts
	// again from the deploy's first event.
	onRewind func(last, end int64)

	last int64
	done *api.EventDoneData
}

// run follows the stream until `done`, ctx ends, or the server stays
// unreachable for retryFor.
func (s *eventStream) run(ctx context.Context) error {
	if s.retryFor <= 0 {
		s.retryFor = reconnectFor
	}
	sc := sse.NewClient(s.url, sse.ClientMaxBufferSize(16<<20))
	sc.Connection = s.hc
	sc.Headers["Accept"] = "text/event-stream"
	if tok := s.client.Token(); tok != "" {
		sc.Headers["Authorization"] = "Bearer " + tok
	}
	retry := &reconnect{ctx: ctx, max: s.retryFor}
	sc.ReconnectStrategy = retry
	sc.ResponseValidator = func(_ *sse.Client, resp *http.Response) error {
		if resp.StatusCode == http.StatusOK {
			retry.Reset() // connected: a later drop gets the full retry time again
			return nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if end, ok := rewound(resp.StatusCode, body, s.last); ok {
			// The server no longer has the events after end: its
			// database was restored from an older backup. What the
			// deploy did after the backup is undone there and happens
			// again, as new events with the ids it had; where the two
			// histories part is known to nobody, so the stream starts
			// again from the deploy's first event: every event of the
			// history the server has now, none lost.
			if s.onRewind != nil {
				s.onRewind(s.last, end)
			}
			s.last = 0
			sc.LastEventID.Store([]byte("0"))
			return errRewound // asked again at once, within retryFor
		}
		err := s.client.ProblemError(resp, body)
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return backoff.Permanent(err) // no token, no permission, no such deploy
		}
		// A server error, or too many streams open (429): it may pass,
		// tried again within retryFor.
		return err
	}
	var (
		stop         error
		failingSince time.Time // since when the deploy's status cannot be read
		final        bool      // the deploy was final when the last stream ended
	)
	handler := func(msg *sse.Event) {
		if stop != nil || s.done != nil || len(msg.Data) == 0 {
			return
		}
		var e api.Event
		if err := json.Unmarshal(msg.Data, &e); err != nil {
			stop = &api.ServerError{Server: s.client.Server(), Message: "bad event from the server", Err: err}
			return
		}
		if e.Seq <= s.last {
			return // already seen (cannot happen with Last-Event-ID, but costs nothing)
		}
		s.last = e.Seq
		if e.Type == api.EventDone {
			var d api.EventDoneData
			_ = json.Unmarshal(e.Data, &d)
			s.done = &d
		}
		if err := s.onEvent(e); err != nil {
			stop = err
		}
	}
	for {
		err := sc.SubscribeRawWithContext(ctx, handler)
		switch {
		case stop != nil:
			return stop
		case s.done != nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			var domain *manent.Error
			if errors.As(err, &domain) || api.IsUnreachable(err) || api.IsServerError(err) {
				return err
			}
			return &api.UnreachableError{Server: s.client.Server(), Err: err}
		}
		if final {
			return nil // the last events of a final deploy are in
		}
		// The server ended the stream before `done`: it cut us off (we
		// were too slow) or is shutting down (a restart). Resume from the
		// last id. A deploy that is final by now gets one more stream, to
		// print what it said after we were cut off (it ends at once). While
		// the server is away, the next subscription retries it for
		// retryFor; a status request that fails the same way only counts
		// against that window.
		d, err := s.client.Deployment(ctx, s.id)
		switch {
		case err == nil:
			failingSince = time.Time{}
			if d.State.Final() {
				final = true
				continue
			}
		case transient(err) && ctx.Err() == nil:
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) >= s.retryFor {
				return err
			}
		default:
			return err
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errRewound makes the stream's client connect again after a rewind.
var errRewound = errors.New("the server's event stream ends before the last event seen: starting it again")

// rewound reads a refused stream's answer: a 422 whose problem has a
// last_event_id below last, the id this stream sent, says the stream now
// ends there (the server's database was restored from an older backup).
func rewound(status int, body []byte, last int64) (end int64, ok bool) {
	if status != http.StatusUnprocessableEntity || last <= 0 {
		return 0, false
	}
	var p api.Problem
	if json.Unmarshal(body, &p) != nil || p.LastEventID == nil || *p.LastEventID < 0 || *p.LastEventID >= last {
		return 0, false
	}
	return *p.LastEventID, true
}

// reconnectRetry is the wait between two attempts to reconnect a stream:
// 100 ms doubling, at most 2 s.
var reconnectRetry = retry.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second}

// reconnect is the stream's backoff (reconnectRetry, in the interface of
// the SSE client's backoff package), given up after failing for max, and at
// once when ctx ends. Reset (on every successful connection) starts the
// failure window again.
type reconnect struct {
	ctx     context.Context
	max     time.Duration
	n       int
	failing time.Time
}

func (r *reconnect) Reset() { r.n, r.failing = 0, time.Time{} }

func (r *reconnect) NextBackOff() time.Duration {
	if r.ctx.Err() != nil {
		return backoff.Stop
	}
	now := time.Now()
	if r.failing.IsZero() {
		r.failing = now
	}
	if now.Sub(r.failing) >= r.max {
		return backoff.Stop
	}
	r.n++
	return reconnectRetry.Delay(r.n)
}

// Context lets backoff stop waiting when ctx ends.
func (r *reconnect) Context() context.Context { return r.ctx }

// DefaultStreamIdle is how long an event stream may stay silent before it
// counts as broken: three of the server's 15 s heartbeats.
const DefaultStreamIdle = 45 * time.Second

// idleTransport ends a response whose body stays silent for idle: a
// half-open connection (a server or proxy that died without closing it)
// then fails like a dropped one, and the stream is resumed.
type idleTransport struct {
	base http.RoundTripper
	idle time.Duration
}

func (t *idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &idleBody{Reader: stall.Reader{R: resp.Body, Timer: time.AfterFunc(t.idle, cancel), Idle: t.idle}, rc: resp.Body, cancel: cancel}
	return resp, nil
}

// idleBody restarts its timer on every byte read (stall.Reader); when the
// timer fires the request's context is cancelled, which ends a blocked Read.
type idleBody struct {
	stall.Reader
	rc     io.Closer
	cancel context.CancelFunc
}

func (b *idleBody) Close() error {
	b.Timer.Stop()
	err := b.rc.Close()
	b.cancel()
	return err
}

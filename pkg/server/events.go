package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/retry"
	"github.com/manent-io/manent/pkg/store"
)

// routesEvents registers the routes of Server-Sent Events streams and
// activity: GET /api/v1/deployments/{id}/events, GET /api/v1/events,
// GET /api/v1/activity. GET …/logs?follow=true is the deploy's stream
// restricted to log lines (followLogs).
func (s *Server) routesEvents() {
	h := newHub(s.st, s.log)
	s.hub = h
	s.st.OnCommit(h.publish)
	s.handle(route{Pattern: "GET /api/v1/deployments/{id}/events", Params: []string{"last_event_id", "types"}}, func(w http.ResponseWriter, r *http.Request) {
		s.handleDeployEvents(h, w, r)
	})
	s.handle(route{Pattern: "GET /api/v1/events", Params: []string{"application", "environment", "types"}}, func(w http.ResponseWriter, r *http.Request) {
		s.handleGlobalEvents(h, w, r)
	})
	s.handle(route{Pattern: "GET /api/v1/activity", Params: []string{"application", "environment", "from", "limit"}}, s.handleActivity)
}

// followLogs serves GET /api/v1/deployments/{id}/logs?follow=true: the
// deploy's event stream with its log lines (and the final `done`) only.
func (s *Server) followLogs(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	q := r2.URL.Query()
	q.Del("follow")
	q.Set("types", store.EventLog)
	r2.URL.Path = "/api/v1/deployments/" + url.PathEscape(r.PathValue("id")) + "/events"
	r2.URL.RawPath = ""
	r2.URL.RawQuery = q.Encode()
	s.mux.ServeHTTP(w, r2)
}

// eventTypes are the types a stream may carry (SPEC §7).
var eventTypes = map[string]bool{
	store.EventState: true, store.EventStep: true, store.EventLog: true,
	store.EventRollout: true, store.EventApproval: true, store.EventDone: true,
}

// replayPageBytes bounds the data of the stored events a stream reads at
// once to replay a deploy's history. A stream holds its page while its
// client reads it, and an event may weigh about 100 kB (a 16 KiB log line
// of control characters, stored JSON-escaped): 500 of them were 48 MB per
// stream, so the 200 streams one read-only identity may open could take
// gigabytes.
const replayPageBytes = 1 << 20

// maxEchoed bounds how much of a bad parameter an error quotes back: a
// 1 MiB header is not answered with a 1 MiB problem.
const maxEchoed = 64

// streamParams reads Last-Event-ID (header, else ?last_event_id=) and
// ?types=a,b (the `done` event is always sent).
func streamParams(r *http.Request) (last int64, types map[string]bool, err error) {
	raw := r.Header.Get("Last-Event-ID")
	if raw == "" {
		raw = r.URL.Query().Get("last_event_id")
	}
	if raw = strings.TrimSpace(raw); raw != "" {
		last, err = strconv.ParseInt(raw, 10, 64)
		if err != nil || last < 0 {
			return 0, nil, manent.Errorf(manent.EInvalid, "Last-Event-ID %q is not an event id of this stream (a number)", manent.ClipText(raw, maxEchoed))
		}
	}
	if v := r.URL.Query().Get("types"); v != "" {
		types = map[string]bool{store.EventDone: true}
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if !eventTypes[t] {
				return 0, nil, manent.Errorf(manent.EInvalid, "unknown event type %q (state, step, log, rollout, approval, done)", manent.ClipText(t, maxEchoed))
			}
			types[t] = true
		}
	}
	return last, types, nil
}

// handleDeployEvents streams one deploy's events: the history after
// Last-Event-ID from the database, then live events from the hub, each with
// `id:` = its seq, until the `done` event. Gaps in what the hub delivers
// (another process wrote in between, or a cut) are filled from the
// database, so a client sees every event exactly once, in order. It ends
// early, with a last comment, once its credential no longer holds
// (streamauth.go).
func (s *Server) handleDeployEvents(h *hub, w http.ResponseWriter, r *http.Request) {
	last, types, err := streamParams(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	rec, p, ok := s.deploymentAs(w, r, PermRead)
	if !ok {
		return
	}
	if last > 0 {
		// An id past the deploy's last event was never sent: the stream
		// would skip every event up to it, `done` included, and hang.
		hs, err := s.st.Heads(r.Context(), []string{rec.ID}, false, time.Time{})
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		if len(hs) == 1 && last > hs[0].LastSeq {
			// Either never sent, or sent before the database was restored
			// from an older backup: the problem says where the stream ends
			// now, so a client that saw the id can resume from there.
			end := hs[0].LastSeq
			w.Header().Set("Content-Type", api.ProblemContentType)
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(api.Problem{Title: http.StatusText(http.StatusUnprocessableEntity), Status: http.StatusUnprocessableEntity,
				Detail:      fmt.Sprintf("Last-Event-ID %d is past the last event of deploy %s (%d): it is not an id this stream sent, or the server's database was restored from an older backup since; resume from last_event_id %d", last, rec.ID, end, end),
				LastEventID: &end})
			return
		}
	}
	if !s.limitStream(w, r, p) {
		return
	}
	defer s.streams.release(p.Subject)
	sa := s.streamAuthOf(r, p)
	// Subscribe before reading the history: what commits in between is in
	// the buffer, and duplicates are dropped by seq.
	sub := h.subscribe(r.Context(), rec.ID)
	defer h.unsubscribe(sub)
	sw := startStream(w, sub)
	defer sw.close()

	hb := time.NewTicker(currentStreamTiming().Heartbeat)
	defer hb.Stop()
	rc := sa.ticker()
	defer rc.Stop()
	ticks := streamTicks{h: h, sw: sw, sa: sa, r: r, hb: hb, rc: rc}
	wanted := func(typ string) bool { return types == nil || types[typ] }
	done := false
	// fill writes the stored events after last, a bounded page at a time;
	// false when the stream ended while a read failed.
	fill := func() bool {
		for {
			var evs []store.Event
			var full bool
			if !s.streamRead(ticks, "read the events of deploy "+rec.ID, func(ctx context.Context) (err error) {
				evs, full, err = s.st.EventsUpTo(ctx, rec.ID, last, nil, 500, replayPageBytes)
				return err
			}) {
				return false
			}
			for _, e := range evs {
				if wanted(e.Type) {
					sw.write(sseFrame(strconv.FormatInt(e.Seq, 10), delayedStateEvent(e, rec.Input)))
				}
				last = e.Seq
				if e.Type == store.EventDone {
					done = true
				}
			}
			if !full || done || sw.err != nil {
				return sw.err == nil
			}
		}
	}
	if !fill() {
		return
	}
	sw.flush()
	// A final deploy has nothing more to say, `done` or not.
	if done || sw.err != nil || rec.State.Final() {
		return
	}
	h.caughtUp(rec.ID, last)

	for {
		b, ok := streamNext(s, ticks, sub.ch)
		if !ok {
			return
		}
		for more := true; more && !done; {
			evs := b.events
			if types == nil && evs[0].Seq == last+1 && evs[len(evs)-1].Seq == last+int64(len(evs)) {
				// The common case: the whole batch, next in line.
				sw.write(b.allFrames())
				last = evs[len(evs)-1].Seq
				done = slices.ContainsFunc(evs, func(e store.Event) bool { return e.Type == store.EventDone })
			} else {
				for i, e := range evs {
					if done {
						break
					}
					switch {
					case e.Seq <= last:
					case e.Seq > last+1:
						if !fill() {
							return
						}
					default:
						if wanted(e.Type) {
							sw.write(b.frame(i))
						}
						last = e.Seq
						done = e.Type == store.EventDone
					}
				}
			}
			select {
			case b = <-sub.ch:
			default:
				more = false
			}
		}
		sw.flush()
		if done {
			return
		}
		if sw.err != nil {
			return
		}
	}
}

// globalTypes reads ?types=a,b of the global stream: state, step and done
// (all of them without it; done is always sent). Another type is a 422,
// not a stream that silently carries something else than was asked.
func globalTypes(r *http.Request) (map[string]bool, error) {
	types := map[string]bool{store.EventState: true, store.EventStep: true, store.EventDone: true}
	v := r.URL.Query().Get("types")
	if v == "" {
		return types, nil
	}
	asked := map[string]bool{store.EventDone: true}
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if !types[t] {
			return nil, manent.Errorf(manent.EInvalid, "event type %q is not one of the global stream's (state, step, done); a deploy's own stream (/api/v1/deployments/{id}/events) also has log, rollout and approval",
				manent.ClipText(t, maxEchoed))
		}
		asked[t] = true
	}
	return asked, nil
}

// handleGlobalEvents streams the state, step and done events of every
// deploy the caller may read (?application= and ?environment= narrow it,
// ?types= picks among them),
// for the activity view and the web page. It
// starts with the current state of every running or waiting deploy; its
// `id:` is "<deployment_id>:<seq>" and it does not resume: a client that
// reconnects gets the current states again, then live events. Like a
// deploy's stream it ends once its credential no longer holds.
func (s *Server) handleGlobalEvents(h *hub, w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	scope, err := s.readScope(p, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	types, err := globalTypes(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if !s.limitStream(w, r, p) {
		return
	}
	defer s.streams.release(p.Subject)
	sub := h.subscribe(r.Context(), "")
	defer h.unsubscribe(sub)
	heads, err := s.st.Heads(r.Context(), nil, true, time.Time{})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	sw := startStream(w, sub)
	defer sw.close()

	seen := newGlobalSeen()
	now := time.Now().UTC()
	for _, hd := range heads {
		h.caughtUp(hd.ID, hd.LastSeq)
		ok := scope.has(hd.Application, hd.Environment) && s.cfg.Guard.Authorize(p, PermRead, hd.Application, hd.Environment) == nil
		seen.start(hd.ID, hd.LastSeq, ok)
		if !ok || !types[store.EventState] {
			continue
		}
		if hd.State == manent.StateDelayed && hd.Reason == "" {
			// A DELAYED deploy of a release before f5a0be8: its reason is
			// in its saved input (delayedReason).
			if rec, err := s.st.Deployment(r.Context(), hd.ID); err == nil {
				hd.Reason = delayedReason(rec.Input)
			}
		}
		data, _ := json.Marshal(store.StateData{State: hd.State, Reason: hd.Reason})
		e := store.Event{DeploymentID: hd.ID, Seq: hd.LastSeq, Type: store.EventState, Time: now, Data: data}
		sw.write(sseFrame(hd.ID+":"+strconv.FormatInt(hd.LastSeq, 10), e))
	}
	sw.flush()

	hb := time.NewTicker(currentStreamTiming().Heartbeat)
	defer hb.Stop()
	sa := s.streamAuthOf(r, p)
	rc := sa.ticker()
	defer rc.Stop()
	ticks := streamTicks{h: h, sw: sw, sa: sa, r: r, hb: hb, rc: rc}
	// ended: the stream ended while may waited for the database.
	ended := false
	may := func(id string) (ok, known bool) {
		var hs []store.Head
		if !s.streamRead(ticks, "read deploy "+id, func(ctx context.Context) (err error) {
			hs, err = s.st.Heads(ctx, []string{id}, false, time.Time{})
			return err
		}) {
			ended = true
			return false, false
		}
		ok = len(hs) == 1 && scope.has(hs[0].Application, hs[0].Environment) &&
			s.cfg.Guard.Authorize(p, PermRead, hs[0].Application, hs[0].Environment) == nil
		return ok, true
	}
	for sw.err == nil && !ended {
		b, ok := streamNext(s, ticks, sub.ch)
		if !ok {
			return
		}
		for more := true; more; {
			for i, e := range b.events {
				if seen.pass(e, types, may) {
					sw.write(b.frame(i))
				}
				if ended {
					return
				}
			}
			select {
			case b = <-sub.ch:
			default:
				more = false
			}
		}
		sw.flush()
	}
}

// streamReadRetry spaces the attempts of a stream's store read that
// failed: the stream stays open until the read succeeds (streamRead).
var streamReadRetry = retry.Policy{Initial: 250 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}

// streamReadWaiting is the comment a stream sends when one of its reads
// of the database failed: it stays open and goes on once the read succeeds.
const streamReadWaiting = "the database cannot be read: waiting for it, the stream goes on once it is back"

// streamTicks is what a stream serves while it waits: its heartbeats, the
// re-checks of its credential and the server's shutdown.
type streamTicks struct {
	h      *hub
	sw     *sseWriter
	sa     *streamAuth
	r      *http.Request
	hb, rc *time.Ticker
}

// streamRead runs read until it succeeds. A read that fails (PostgreSQL
// restarting, a failover, a connection cut) neither ends the stream — a
// client that does not resume would take that for the deploy's end — nor
// skips what it was reading: the stream says so once in a comment
// (streamReadWaiting), keeps its heartbeats, and tries again with
// streamReadRetry's backoff. It reports false when the stream ended
// meanwhile: the client left, the server shuts down, or the credential no
// longer holds (each with its last comment).
func (s *Server) streamRead(t streamTicks, what string, read func(ctx context.Context) error) bool {
	sw, ctx := t.sw, t.sw.sub.ctx
	for n := 1; ; n++ {
		err := read(ctx)
		if err == nil {
			if n > 1 {
				s.log.Info("event stream: read again", "path", t.r.URL.Path, "what", what, "failed", n-1)
			}
			return true
		}
		if ctx.Err() != nil || sw.err != nil {
			return false
		}
		if n == 1 {
			s.log.Warn("event stream: read failed; retrying", "path", t.r.URL.Path, "what", what, "error", err)
			sw.write([]byte(": " + streamReadWaiting + "\n\n"))
			sw.flush()
		}
		wait := time.NewTimer(streamReadRetry.Wait(n))
		_, ok := streamNext(s, t, wait.C)
		wait.Stop()
		if !ok || sw.err != nil {
			return false
		}
	}
}

// streamNext serves a stream's ticks (heartbeats, re-checks of its
// credential) until c delivers, and reports false when the stream ended
// meanwhile: the client left or a write to it failed, the server shuts
// down, or the credential no longer holds (each with its last comment).
func streamNext[T any](s *Server, t streamTicks, c <-chan T) (v T, ok bool) {
	sw := t.sw
	for sw.err == nil {
		select {
		case <-sw.sub.ctx.Done():
			return v, false
		case <-t.h.ending:
			sw.end(streamEndShutdown)
			return v, false
		case <-t.hb.C:
			sw.heartbeat()
		case <-t.rc.C:
			if s.recheck(t.sa, sw, t.r) {
				return v, false
			}
		case v = <-c:
			return v, true
		}
	}
	return v, false
}

// globalSeen is what one global stream remembers of each deploy: the last
// event sent (an event already sent is not sent again) and whether the
// caller may read it (asked of the store once). A deploy is forgotten
// with its done event, its last: a stream open for weeks on a dashboard
// held about 100 bytes for every deploy that ran meanwhile.
type globalSeen struct {
	last    map[string]int64
	allowed map[string]bool
}

func newGlobalSeen() *globalSeen {
	return &globalSeen{last: map[string]int64{}, allowed: map[string]bool{}}
}

// start records a deploy the stream's first states covered, at seq.
func (g *globalSeen) start(id string, seq int64, allowed bool) {
	g.last[id], g.allowed[id] = seq, allowed
}

// pass says whether e is sent: newer than the deploy's last event sent, of
// a type asked for, of a deploy the caller may read (may answers for a
// deploy not seen yet, and whether its answer holds: a failed lookup is
// asked again at the next event).
func (g *globalSeen) pass(e store.Event, types map[string]bool, may func(id string) (ok, known bool)) bool {
	id := e.DeploymentID
	if e.Seq <= g.last[id] || !types[e.Type] {
		return false
	}
	ok, seen := g.allowed[id]
	if !seen {
		var known bool
		if ok, known = may(id); known {
			g.allowed[id] = ok
		}
	}
	if e.Type == store.EventDone {
		delete(g.last, id)
		delete(g.allowed, id)
		return ok
	}
	if ok {
		g.last[id] = e.Seq
	}
	return ok
}

// len is how many deploys g remembers.
func (g *globalSeen) len() int { return len(g.allowed) }

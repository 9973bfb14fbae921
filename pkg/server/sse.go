package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manent-io/manent/pkg/store"
)

// streamTiming holds the knobs of the event streams.
type streamTiming struct {
	// Heartbeat is how often an idle stream sends a comment, so proxies and
	// clients see the connection is alive.
	Heartbeat time.Duration
	// Poll is how often the database is read for events other processes
	// wrote (several workers on PostgreSQL).
	Poll time.Duration
	// WriteTimeout bounds one write to a client, of a stream or of an
	// answer (writeJSON); a client that does not read for that long is
	// disconnected.
	WriteTimeout time.Duration
	// Buffer is how many commits' events may wait for one subscriber; a
	// subscriber that falls further behind is cut off and resumes with
	// Last-Event-ID.
	Buffer int
	// Recheck is how often an open stream checks again that the
	// credential that opened it still holds (streamauth.go).
	Recheck time.Duration
}

var defaultStreamTiming = streamTiming{Heartbeat: 15 * time.Second, Poll: time.Second, WriteTimeout: 15 * time.Second, Buffer: 256,
	Recheck: 15 * time.Second}

// streamTimingOverride is set by tests only (export_test.go).
var streamTimingOverride atomic.Pointer[streamTiming]

// streamsCut counts, process-wide, the streams closed because their client
// did not keep up (a full buffer or a write timeout).
var streamsCut atomic.Int64

func currentStreamTiming() streamTiming {
	if t := streamTimingOverride.Load(); t != nil {
		return *t
	}
	return defaultStreamTiming
}

// hub fans the events of committed transactions out to the open streams.
// Publishing never blocks: each subscriber has a bounded buffer, and one
// that is full is cut off (its connection is closed; the client resumes
// with Last-Event-ID from the database). While anyone listens, a poll reads
// the events other processes wrote, so every worker's streams see every
// deploy. The poll stops when the last stream closes, before that stream's
// handler returns: no goroutine of the hub outlives the server's streams.
type hub struct {
	st  *store.Store
	log *slog.Logger

	mu      sync.Mutex
	deploys map[string]map[*subscriber]struct{} // per-deploy streams
	global  map[*subscriber]struct{}            // GET /api/v1/events
	known   map[string]*tracked                 // what the hub published, per deploy
	poller  *poller                             // the running poll, nil when none

	// ending is closed by end: the server is shutting down, and every
	// stream, open or opening, ends with a last comment.
	ending  chan struct{}
	endOnce sync.Once
}

// poller is one run of the poll: stop ends it, done closes when it has.
type poller struct {
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}
}

// tracked is the last event the hub published of one deploy.
type tracked struct {
	seq  int64
	seen time.Time
}

// subscriber is one open stream.
type subscriber struct {
	deploy string          // "" on the global stream
	ch     chan *wireBatch // one batch per commit
	// ctx ends when the client leaves or the hub cuts the subscriber off.
	ctx     context.Context
	cancel  context.CancelFunc
	dropped atomic.Bool
}

// wireBatch is the events of one deploy that one commit wrote, with their
// SSE frames encoded once however many subscribers get them.
type wireBatch struct {
	events []store.Event
	global bool // frames of the global stream
	once   sync.Once
	frames [][]byte // one per event
	all    []byte   // every frame, for the subscribers that take them all
}

func (b *wireBatch) encode() {
	b.once.Do(func() {
		b.frames = make([][]byte, len(b.events))
		n := 0
		for i, e := range b.events {
			id := strconv.FormatInt(e.Seq, 10)
			if b.global {
				id = e.DeploymentID + ":" + id
			}
			b.frames[i] = sseFrame(id, e)
			n += len(b.frames[i])
		}
		b.all = make([]byte, 0, n)
		for _, f := range b.frames {
			b.all = append(b.all, f...)
		}
	})
}

// frame is the frame of event i.
func (b *wireBatch) frame(i int) []byte {
	b.encode()
	return b.frames[i]
}

// allFrames is the frames of every event, in order.
func (b *wireBatch) allFrames() []byte {
	b.encode()
	return b.all
}

func newHub(st *store.Store, log *slog.Logger) *hub {
	return &hub{
		st: st, log: log,
		deploys: map[string]map[*subscriber]struct{}{},
		global:  map[*subscriber]struct{}{},
		known:   map[string]*tracked{},
		ending:  make(chan struct{}),
	}
}

// streamEndShutdown is the last comment of the streams end cuts.
const streamEndShutdown = "the server is shutting down: reconnect to resume from the last event id (another worker, or this one once restarted, answers)"

// end ends every stream of the hub, and each one opened after, with the
// comment streamEndShutdown.
func (h *hub) end() { h.endOnce.Do(func() { close(h.ending) }) }

// globalType reports whether the global stream carries events of type t.
func globalType(t string) bool {
	return t == store.EventState || t == store.EventStep || t == store.EventDone
}

// publish hands committed events to the subscribers. It is the store's
// OnCommit listener: it never waits for a subscriber. The events of one
// commit travel as one batch, so a step that writes many log lines at once
// takes one place in a subscriber's buffer.
func (h *hub) publish(evs []store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.deploys) == 0 && len(h.global) == 0 {
		return
	}
	now := time.Now()
	for len(evs) > 0 {
		// One deploy's run of events.
		id := evs[0].DeploymentID
		n := 1
		for n < len(evs) && evs[n].DeploymentID == id {
			n++
		}
		run := evs[:n]
		evs = evs[n:]

		last := run[len(run)-1].Seq
		if tr := h.known[id]; tr != nil {
			tr.seq = max(tr.seq, last)
			tr.seen = now
		} else if len(h.global) > 0 {
			h.known[id] = &tracked{seq: last, seen: now}
		}
		subs := h.deploys[id]
		if len(subs) == 0 && len(h.global) == 0 {
			continue
		}
		if len(subs) > 0 {
			batch := &wireBatch{events: run}
			for sub := range subs {
				h.sendLocked(sub, batch)
			}
		}
		if len(h.global) > 0 {
			var global []store.Event
			for _, e := range run {
				if globalType(e.Type) {
					global = append(global, e)
				}
			}
			if len(global) > 0 {
				batch := &wireBatch{events: global, global: true}
				for sub := range h.global {
					h.sendLocked(sub, batch)
				}
			}
		}
	}
}

func (h *hub) sendLocked(sub *subscriber, batch *wireBatch) {
	select {
	case sub.ch <- batch:
	default:
		// Too slow: cut it off rather than wait or drop events silently.
		h.removeLocked(sub)
		sub.dropped.Store(true)
		sub.cancel()
		h.log.Info("event stream cut off: the client does not keep up", "deploy", sub.deploy)
	}
}

// subscribe opens a subscriber for one deploy ("" for every deploy) and
// starts the poll if it is not running.
func (h *hub) subscribe(parent context.Context, deploy string) *subscriber {
	t := currentStreamTiming()
	ctx, cancel := context.WithCancel(parent)
	sub := &subscriber{deploy: deploy, ch: make(chan *wireBatch, t.Buffer), ctx: ctx, cancel: cancel}
	h.mu.Lock()
	defer h.mu.Unlock()
	if deploy == "" {
		h.global[sub] = struct{}{}
	} else {
		if h.deploys[deploy] == nil {
			h.deploys[deploy] = map[*subscriber]struct{}{}
		}
		h.deploys[deploy][sub] = struct{}{}
	}
	if h.poller == nil {
		ctx, stop := context.WithCancel(context.Background())
		h.poller = &poller{ctx: ctx, stop: stop, done: make(chan struct{})}
		go h.poll(h.poller, t.Poll)
	}
	return sub
}

// unsubscribe closes a subscriber; when it was the last one it stops the
// poll and waits for it to end (a poll in progress is cancelled).
func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	h.removeLocked(sub)
	var idle *poller
	if len(h.deploys) == 0 && len(h.global) == 0 && h.poller != nil {
		idle, h.poller = h.poller, nil
		idle.stop()
	}
	h.mu.Unlock()
	sub.cancel()
	if idle != nil {
		<-idle.done
	}
}

func (h *hub) removeLocked(sub *subscriber) {
	if sub.deploy == "" {
		delete(h.global, sub)
		return
	}
	if subs := h.deploys[sub.deploy]; subs != nil {
		delete(subs, sub)
		if len(subs) == 0 {
			delete(h.deploys, sub.deploy)
		}
	}
}

// caughtUp tells the hub a subscriber has read a deploy's events up to seq
// from the database; the poll publishes what comes after. Events the hub
// already published after that are in the subscriber's buffer.
func (h *hub) caughtUp(deploy string, seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known[deploy] == nil {
		h.known[deploy] = &tracked{seq: seq, seen: time.Now()}
	}
}

// pollSlack covers transactions that commit a while after the time they
// wrote in created_at.
const pollSlack = 5 * time.Second

// poll reads, every interval while anyone listens, the events the hub has
// not published: those written by other processes (or outside Store.Tx).
// It ends when p is stopped: unsubscribe stops it with the last stream
// (every subscriber is unsubscribed, cut off ones too).
func (h *hub) poll(p *poller, every time.Duration) {
	defer close(p.done)
	timer := time.NewTimer(every)
	defer timer.Stop()
	last := time.Now()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-timer.C:
		}
		h.mu.Lock()
		if len(h.deploys) == 0 && len(h.global) == 0 {
			// The last subscribers were cut off; their handlers have yet to
			// unsubscribe.
			h.mu.Unlock()
			timer.Reset(every)
			continue
		}
		ids := make([]string, 0, len(h.deploys))
		for id := range h.deploys {
			ids = append(ids, id)
		}
		global := len(h.global) > 0
		h.mu.Unlock()

		last = h.pollFrom(p.ctx, ids, global, last)
		timer.Reset(every)
	}
}

// pollFrom polls once for the deploys ids (and, global, those created
// since the poll that started at last) and returns when this poll started
// — or last again when it could not read the store, so that the next poll
// looks back to the last one that did: a deploy another worker created
// while this one could not reach the database is not missed.
func (h *hub) pollFrom(ctx context.Context, ids []string, global bool, last time.Time) time.Time {
	start := time.Now()
	var since time.Time
	if global {
		since = last.Add(-pollSlack)
	}
	if !h.pollOnce(ctx, ids, global, since) {
		return last
	}
	return start
}

// pollOnce publishes what the store holds past what the hub knows; false
// when it could not read the deploys' heads.
func (h *hub) pollOnce(ctx context.Context, ids []string, global bool, since time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	heads, err := h.st.Heads(ctx, ids, global, since)
	if err != nil {
		h.log.Debug("event poll", "error", err)
		return false
	}
	now := time.Now()
	for _, hd := range heads {
		h.mu.Lock()
		tr := h.known[hd.ID]
		from := int64(-1)
		switch {
		case tr != nil:
			tr.seen = now
			if hd.LastSeq > tr.seq {
				from = tr.seq
			}
		case global && !since.IsZero() && !hd.CreatedAt.Before(since):
			// A deploy another process created since the last poll.
			h.known[hd.ID] = &tracked{seq: 0, seen: now}
			from = 0
		case global:
			h.known[hd.ID] = &tracked{seq: hd.LastSeq, seen: now}
		}
		h.mu.Unlock()
		if from < 0 {
			continue
		}
		// About 1 MiB at a time, as a stream's replay: a deploy's
		// events since the last poll may weigh 100 kB each (a log line of
		// control characters); the rest follow at the next polls.
		evs, _, err := h.st.EventsUpTo(ctx, hd.ID, from, nil, 1000, replayPageBytes)
		if err != nil {
			h.log.Debug("event poll", "deploy", hd.ID, "error", err)
			continue
		}
		h.publish(evs)
	}
	// Forget deploys nobody follows that were not seen for a while.
	h.mu.Lock()
	for id, tr := range h.known {
		if h.deploys[id] == nil && now.Sub(tr.seen) > time.Minute {
			delete(h.known, id)
		}
	}
	h.mu.Unlock()
	return true
}

// sseFrame encodes one event: id, event type and the event as JSON data.
func sseFrame(id string, e store.Event) []byte {
	data, err := json.Marshal(wireEvent(e))
	if err != nil {
		data = []byte(`{}`)
	}
	var b bytes.Buffer
	b.Grow(len(data) + len(id) + len(e.Type) + 24)
	b.WriteString("id: ")
	b.WriteString(id)
	b.WriteString("\nevent: ")
	b.WriteString(e.Type)
	b.WriteByte('\n')
	// json.Marshal escapes newlines inside strings: data is one line.
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

// sseWriter writes one stream. Every write has a deadline, and the
// connection is closed as soon as the subscriber is cut off, even in the
// middle of a blocked write.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sub     *subscriber
	timeout time.Duration
	err     error
	stalled bool // a write timed out: the client does not read
	stop    func() bool
}

// startStream sends the stream's headers.
func startStream(w http.ResponseWriter, sub *subscriber) *sseWriter {
	t := currentStreamTiming()
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), sub: sub, timeout: t.WriteTimeout}
	streamsOpen.Add(1) // manent_sse_streams (metrics.go); close takes it back
	sw.stop = context.AfterFunc(sub.ctx, func() {
		_ = sw.rc.SetWriteDeadline(time.Now())
	})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	// A client reconnecting after a cut waits a second, not the default 3.
	sw.write([]byte("retry: 1000\n\n"))
	sw.flush()
	return sw
}

func (sw *sseWriter) write(b []byte) {
	if sw.err != nil {
		return
	}
	start := time.Now()
	_ = sw.rc.SetWriteDeadline(start.Add(sw.timeout))
	_, sw.err = sw.w.Write(b)
	sw.checkStalled(start)
}

// checkStalled notes a write that failed because the client did not read
// for the whole write timeout.
func (sw *sseWriter) checkStalled(start time.Time) {
	var ne net.Error
	if errors.As(sw.err, &ne) && ne.Timeout() && time.Since(start) >= sw.timeout*9/10 {
		sw.stalled = true
	}
}

func (sw *sseWriter) flush() {
	if sw.err != nil {
		return
	}
	start := time.Now()
	sw.err = sw.rc.Flush()
	sw.checkStalled(start)
}

func (sw *sseWriter) heartbeat() {
	sw.write([]byte(": heartbeat\n\n"))
	sw.flush()
}

// close releases the deadline watcher. A subscriber that was cut off gets
// no clean end of stream: its connection fails, so a client that keeps
// the last id reconnects from it.
func (sw *sseWriter) close() {
	sw.stop()
	streamsOpen.Add(-1)
	switch {
	case sw.sub.dropped.Load():
		_ = sw.rc.SetWriteDeadline(time.Now())
		streamsCut.Add(1)
	case sw.stalled:
		streamsCut.Add(1)
	case sw.err == nil:
		_ = sw.rc.SetWriteDeadline(time.Time{})
	}
}

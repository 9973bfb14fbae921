package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// `manent activity --watch`: the activity once, then a row for each deploy
// that appears, changes state or reason, or leaves (with its final state),
// until Ctrl-C. The server's global event stream (GET /api/v1/events) says
// when something changed; the activity is then asked again and only the
// rows that differ from what was printed are printed. A refresh also runs
// every --interval, so nothing is missed while the stream is down.

// DefaultWatchInterval is how often `activity --watch` refreshes without
// an event.
const DefaultWatchInterval = 5 * time.Second

// minWatchInterval bounds --interval from below.
const minWatchInterval = 100 * time.Millisecond

// watchColumns are the columns of `activity --watch`: one flat table, since
// rows arrive one by one.
var watchColumns = []string{"ENVIRONMENT", "ID", "APPLICATION", "VERSION", "STATE", "AGE", "WHY"}

// watchStateCol is the index of STATE in watchColumns.
const watchStateCol = 4

// activityWatcher remembers what it printed.
type activityWatcher struct {
	opts   *ActivityOptions
	client *api.Client
	// shown is the row last printed for each deploy still active.
	shown  map[string]string
	widths []int
	// ended collects the deploys whose `done` event arrived, so that one
	// that started and ended between two refreshes still gets its row.
	ended *endedSet
}

// endedSet is the set of deploys that ended, filled by the stream.
type endedSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (e *endedSet) add(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ids[id] = true
}

// take returns the ids collected since the last call.
func (e *endedSet) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for id := range e.ids {
		ids = append(ids, id)
	}
	clear(e.ids)
	return ids
}

func activityWatch(ctx context.Context, opts *ActivityOptions, client *api.Client, first *api.ActivityResult) error {
	w := &activityWatcher{opts: opts, client: client, shown: map[string]string{}, ended: &endedSet{ids: map[string]bool{}}}
	if opts.Exporter == nil {
		w.widths = make([]int, len(watchColumns))
		for i, h := range watchColumns {
			w.widths[i] = len(h)
		}
	}
	if err := w.update(ctx, first, true); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	kick := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		followGlobalEvents(ctx, client, opts.StreamHTTP, opts.Interval, kick, w.ended)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	grace := opts.FollowGrace
	if grace <= 0 {
		grace = DefaultFollowGrace
	}
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	var failingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return nil // Ctrl-C: the end of watching, not a failure
		case <-kick:
		case <-tick.C:
		}
		res, err := client.Activity(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && transient(err):
			// The server restarts or is away: keep trying for the grace,
			// and say so once.
			if failingSince.IsZero() {
				failingSince = time.Now()
				fmt.Fprintf(opts.IO.ErrOut, "%s; asking again for %s\n", safeText(err.Error()), formatDuration(grace))
			}
			if away := time.Since(failingSince); away >= grace {
				return fmt.Errorf("%w (no answer for %s)", err, formatDuration(away.Round(time.Second)))
			}
			continue
		case err != nil:
			return err
		}
		failingSince = time.Time{}
		if err := w.update(ctx, res, false); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// update prints the rows of res that differ from what was printed, and a
// row with the final state of each deploy that left the activity. The
// first call prints the header (table output) or "nothing is running or
// waiting".
func (w *activityWatcher) update(ctx context.Context, res *api.ActivityResult, first bool) error {
	now := w.opts.Now()
	var items []api.ActivityItem
	endedAt := map[string]time.Time{} // AGE of an ended deploy: when it ended
	active := map[string]bool{}
	for _, g := range res.Environments {
		for _, it := range g.Items {
			if it.Environment == "" {
				it.Environment = g.Environment
			}
			active[it.ID] = true
			if w.shown[it.ID] != watchKey(it) {
				items = append(items, it)
			}
		}
	}
	// Those that left, or came and went between two refreshes: print how
	// they ended (oldest first: ids sort by time).
	var left []string
	for id := range w.shown {
		if !active[id] {
			left = append(left, id)
		}
	}
	for _, id := range w.ended.take() {
		if _, seen := w.shown[id]; !seen && !active[id] && !first {
			left = append(left, id)
		}
	}
	slices.Sort(left)
	for _, id := range left {
		delete(w.shown, id)
		d, err := w.client.Deployment(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // gone or unreadable: nothing to say
		}
		if !d.State.Final() {
			continue // not really gone: the next refresh shows it
		}
		it := api.ActivityItem{ID: d.ID, Application: d.Application, Environment: d.Environment, Version: d.Version,
			State: d.State, Requester: d.Requester, CreatedAt: d.CreatedAt, StartedAt: d.StartedAt, Reason: finalWhy(d)}
		if d.FinishedAt != nil {
			endedAt[it.ID] = *d.FinishedAt
		}
		items = append(items, it)
	}
	for _, it := range items {
		if active[it.ID] {
			w.shown[it.ID] = watchKey(it)
		}
	}
	if w.opts.Exporter != nil {
		for _, it := range items {
			if err := w.opts.Exporter.WriteStream(w.opts.IO.Out, it); err != nil {
				return err
			}
		}
		return nil
	}
	if first && len(items) == 0 {
		fmt.Fprintln(w.opts.IO.ErrOut, "nothing is running or waiting; watching (Ctrl-C to stop)")
	}
	rows := make([][]string, 0, len(items)+1)
	if first {
		rows = append(rows, watchColumns)
	}
	for _, it := range items {
		age := activityAge(it, now)
		if at, ok := endedAt[it.ID]; ok {
			age = relativeTime(at, now)
		}
		rows = append(rows, []string{it.Environment, it.ID, it.Application, it.Version, string(it.State), age, it.Why()})
	}
	return w.print(w.opts.IO.Out, rows, first)
}

// print writes rows aligned on the widths seen so far (a column widens
// when a longer cell comes), colouring the state on a colour terminal.
func (w *activityWatcher) print(out io.Writer, rows [][]string, header bool) error {
	for _, r := range rows {
		for i := range r {
			r[i] = cell(r[i])
			if r[i] == "" {
				r[i] = "-"
			}
			w.widths[i] = max(w.widths[i], len([]rune(r[i])))
		}
	}
	var b strings.Builder
	for n, r := range rows {
		for i, c := range r {
			text := c
			if header && n == 0 {
				text = w.opts.IO.Bold(c)
			} else if i == watchStateCol {
				text = w.opts.IO.State(c)
			}
			b.WriteString(text)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", w.widths[i]-len([]rune(c))+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// watchKey is what, when it changes, makes a deploy's row printed again.
func watchKey(it api.ActivityItem) string {
	return string(it.State) + "\x00" + it.Why()
}

// finalWhy says how a deploy that left the activity ended.
func finalWhy(d *manent.Deployment) string {
	if !d.State.Final() {
		return d.Reason
	}
	if d.State == manent.StateSuccess {
		return "finished"
	}
	return strings.Join(failureReason(d), "; ")
}

// followGlobalEvents subscribes to GET /api/v1/events and sends on kick
// (without blocking) whenever an event other than a log line arrives,
// adding the deploy of each `done` event to ended; it reconnects every
// interval while the stream is down, until ctx ends.
func followGlobalEvents(ctx context.Context, client *api.Client, hc func() *http.Client, interval time.Duration, kick chan<- struct{}, ended *endedSet) {
	sc := sse.NewClient(client.Server()+"/api/v1/events", sse.ClientMaxBufferSize(16<<20))
	if hc != nil {
		sc.Connection = hc()
	}
	sc.Headers["Accept"] = "text/event-stream"
	if tok := client.Token(); tok != "" {
		sc.Headers["Authorization"] = "Bearer " + tok
	}
	sc.ReconnectStrategy = &backoff.StopBackOff{} // the loop below retries
	handler := func(msg *sse.Event) {
		if len(msg.Data) == 0 {
			return
		}
		var e api.Event
		if json.Unmarshal(msg.Data, &e) == nil {
			switch e.Type {
			case api.EventLog:
				return // a log line changes no row
			case api.EventDone:
				ended.add(e.DeploymentID)
			}
		}
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	for ctx.Err() == nil {
		_ = sc.SubscribeRawWithContext(ctx, handler)
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

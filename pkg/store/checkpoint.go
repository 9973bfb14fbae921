package store

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// checkpointEvery is how often the SQLite checkpointer copies the WAL
// back into the database file.
const checkpointEvery = 500 * time.Millisecond

// checkpointer runs SQLite's WAL checkpoints off the commit path.
//
// With SQLite's default (wal_autocheckpoint=1000 pages) the commit that
// crosses 1,000 WAL pages runs the checkpoint itself: it copies the pages
// and fsyncs the database file, 20–30 ms on this machine kind, while every
// writer queued at the gate waits behind it. That commit is a person's
// submit as often as a deploy's step. The write connections therefore open
// with wal_autocheckpoint(0) and this goroutine runs a PASSIVE checkpoint
// every checkpointEvery: passive checkpoints take neither the write lock
// nor a place at the gate, so writers go on while the pages are copied.
// The WAL is bounded as before: a passive checkpoint is what the automatic
// one ran, only elsewhere.
type checkpointer struct {
	db     *sql.DB
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// runs counts completed checkpoints (tests wait on it); tries counts
	// every attempt.
	runs, tries atomic.Int64
	// log receives what the loop has to say (Store.SetLogger); nothing
	// until it is set.
	log atomic.Pointer[slog.Logger]
}

// checkpointRemind is how often a checkpoint that keeps failing is logged
// again: once when the failures start, then at most this often, and once
// when a checkpoint succeeds again. Logged on every failure, a full disk
// wrote two lines a second, as text beside the server's JSON log.
const checkpointRemind = 5 * time.Minute

func startCheckpointer(db *sql.DB, every time.Duration) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{db: db, cancel: cancel}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		var failing failures
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := c.checkpoint(ctx)
			if ctx.Err() != nil {
				return
			}
			failing.report(c.logger(), err, time.Now())
		}
	}()
	return c
}

func (c *checkpointer) logger() *slog.Logger {
	if l := c.log.Load(); l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// failures is a streak of failed checkpoints, told to the log at its
// start, every checkpointRemind while it lasts, and at its end.
type failures struct {
	since, told time.Time
	n           int
}

func (f *failures) report(log *slog.Logger, err error, now time.Time) {
	if err == nil {
		if f.n > 0 {
			log.Info("sqlite: the WAL is copied into the database file again", "failed_checkpoints", f.n,
				"failing_for", now.Sub(f.since).Round(time.Second).String())
		}
		*f = failures{}
		return
	}
	if f.n == 0 {
		f.since = now
	}
	f.n++
	if f.n > 1 && now.Sub(f.told) < checkpointRemind {
		return
	}
	f.told = now
	msg := "sqlite: the WAL cannot be copied into the database file"
	if fault := AsFault(err); fault != nil {
		// "the database's disk is full": the WAL grows until there is
		// room again, and new writes fail once it cannot.
		msg += ": " + fault.Reason
	}
	log.Warn(msg, "error", err.Error(), "failed_checkpoints", f.n,
		"failing_for", now.Sub(f.since).Round(time.Second).String())
}

// checkpoint runs one passive checkpoint. Frames that readers still need
// stay in the WAL; a later checkpoint copies them.
func (c *checkpointer) checkpoint(ctx context.Context) error {
	var busy, logFrames, copied int64
	c.tries.Add(1)
	err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied)
	if err == nil {
		c.runs.Add(1)
	}
	return err
}

// stop ends the loop and waits for a checkpoint in flight.
func (c *checkpointer) stop() {
	c.cancel()
	c.wg.Wait()
}

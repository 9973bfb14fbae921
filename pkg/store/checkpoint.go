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
	// runs counts completed checkpoints (tests wait on it).
	runs atomic.Int64
}

func startCheckpointer(db *sql.DB, every time.Duration) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{db: db, cancel: cancel}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := c.checkpoint(ctx); err != nil && ctx.Err() == nil {
				slog.Warn("sqlite checkpoint", "err", err)
			}
		}
	}()
	return c
}

// checkpoint runs one passive checkpoint. Frames that readers still need
// stay in the WAL; a later checkpoint copies them.
func (c *checkpointer) checkpoint(ctx context.Context) error {
	var busy, logFrames, copied int64
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

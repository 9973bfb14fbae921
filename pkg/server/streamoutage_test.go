package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/servertest"
)

// A deploy's event stream whose read of the database fails (PostgreSQL
// restarting under it) stays open: it says so in a comment, sends its
// heartbeats, and once the read succeeds goes on from where it was, to the
// `done` event. It ended at once, without `done`, and a client that does
// not resume by itself (curl, a CI script) took that for the deploy's end.
// The events table is renamed away and back with the store's own
// connection: every read of the stream fails meanwhile, as it does while
// the database is away.
func TestStreamReadFailureKeepsTheStream(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", enginetest.SQLite}, {"postgres", enginetest.Postgres}} {
		t.Run(db.name, func(t *testing.T) {
			server.SetStreamTiming(t, 50*time.Millisecond, 0, 0, 0)
			f := newFlow(t, servertest.WithDatabase(db.url(t)))
			gate := f.gate("gate")
			id := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
			f.waitLog(id, "waiting for the gate")

			sqldb := f.srv.Store.DB()
			if _, err := sqldb.ExecContext(context.Background(), "ALTER TABLE manent_events RENAME TO manent_events_away"); err != nil {
				t.Fatal(err)
			}
			back := func() {
				if _, err := sqldb.ExecContext(context.Background(), "ALTER TABLE manent_events_away RENAME TO manent_events"); err != nil {
					t.Fatal(err)
				}
			}
			renamed := true
			t.Cleanup(func() {
				if renamed {
					back()
				}
			})
			c := openStream(t, eventsURL(f.srv, id), f.srv.Token, "")
			heartbeats := 0
			for waiting := false; !waiting || heartbeats < 2; {
				fr, err := c.next()
				if err != nil {
					t.Fatalf("the stream ended while its read failed (%v): no done event, after %d heartbeats", err, heartbeats)
				}
				switch {
				case fr.Event != "":
					t.Fatalf("event %+v while the events could not be read", fr)
				case fr.Comment == server.StreamReadWaiting:
					waiting = true
				case fr.Comment == "heartbeat" && waiting:
					heartbeats++
				}
			}
			back()
			renamed = false
			f.open(gate)
			var seq []string
			for {
				fr, err := c.next()
				if err != nil {
					t.Fatalf("the stream ended before done (%v) after ids %v", err, seq)
				}
				if fr.Event == "" {
					continue
				}
				seq = append(seq, fr.ID)
				if fr.Event == "done" {
					break
				}
			}
			if seq[0] != "1" {
				t.Errorf("the stream resumed at id %s, want the deploy's first event (1): %v", seq[0], seq)
			}
			for i := 1; i < len(seq); i++ {
				if seq[i-1] >= seq[i] && len(seq[i-1]) >= len(seq[i]) {
					t.Errorf("ids out of order: %v", strings.Join(seq, " "))
					break
				}
			}
			f.waitFinal(id, 30*time.Second)
		})
	}
}

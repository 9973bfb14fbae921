package engine

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
)

// A heartbeat that fails says what the silence means on its database: on
// PostgreSQL the worker stops at its cut-off (others may take its deploys
// over); on SQLite there is no cut-off — the server holds the database's
// lock, no other worker takes its deploys, and it goes on. The SQLite
// warning named a cut_off that never applied there.
func TestHeartbeatFailureSaysWhatTheSilenceMeans(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		ctx := context.Background()
		st, reg, adm := openParts(t, url)
		var logs enginetest.SyncBuffer
		e, err := New(ctx, st, Config{ExecutorID: "beat-log", DataDir: t.TempDir(), Plugins: reg, Admitter: adm,
			Heartbeat: 50 * time.Millisecond, DeadAfter: 3 * time.Second,
			Logger: slog.New(slog.NewJSONHandler(&logs, nil)), OnFenced: func(error) {}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Shutdown(time.Second) })
		if err := e.StartWorker(ctx); err != nil {
			t.Fatal(err)
		}
		// Make the next heartbeats fail: the UPDATE of the worker's row errs.
		fail := `CREATE TRIGGER beat_fails BEFORE UPDATE ON manent_workers BEGIN SELECT RAISE(ABORT, 'heartbeat refused by the test'); END`
		drop := `DROP TRIGGER beat_fails`
		if st.Postgres() {
			fail = `CREATE FUNCTION beat_fails() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'heartbeat refused by the test'; END $$ LANGUAGE plpgsql;
				CREATE TRIGGER beat_fails BEFORE UPDATE ON manent_workers FOR EACH ROW EXECUTE FUNCTION beat_fails()`
			drop = `DROP TRIGGER beat_fails ON manent_workers; DROP FUNCTION beat_fails()`
		}
		if _, err := st.DB().ExecContext(ctx, fail); err != nil {
			t.Fatal(err)
		}
		enginetest.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), `"msg":"heartbeat failed"`) }, "a failed heartbeat to be logged")
		if _, err := st.DB().ExecContext(ctx, drop); err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"msg":"heartbeat failed"`) {
				line = l
				break
			}
		}
		if st.Postgres() {
			if !strings.Contains(line, `"cut_off":`) {
				t.Errorf("PostgreSQL: the warning names no cut-off: %s", line)
			}
			return
		}
		if strings.Contains(line, "cut_off") {
			t.Errorf("SQLite: the warning names a cut-off, which does not apply there: %s", line)
		}
		if !strings.Contains(line, "no other worker") {
			t.Errorf("SQLite: the warning does not say what the silence means there: %s", line)
		}
	})
}

package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

// A deploy whose executor is gone for good is resumed by another
// executor: on SQLite by the server that opens the database next, as it
// starts (it is the database's only server: node.adoptOrphans); on
// PostgreSQL by the elected leader, or at once by Engine.Recover (what
// `manent-server admin recover` calls). The steps completed before the
// stop are not run again, the interrupted one runs again, and the deploy
// ends SUCCESS. Recover after the takeover finds nothing left to resume.
func TestRecoverResumesAnotherExecutorsDeploy(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		id, release := holdAtActivation(t, f)

		// The worker stops; another executor opens the same database.
		f.node.Close(5 * time.Second)
		f.cfg.ExecutorID = "rescuer"
		f.open()
		if rec, err := f.st.Deployment(t.Context(), id); err != nil || rec.State.Final() {
			t.Fatalf("after the restart: %+v, %v; want the deploy still running", rec, err)
		}
		sqlite := !strings.HasPrefix(dbURL, "postgres")
		if sqlite {
			ws, err := f.st.Workers(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(ws, func(w store.Worker) bool { return w.ID == "test" })
			if i < 0 || ws[i].TakenOverBy != "rescuer" {
				t.Fatalf("workers %+v: want test taken over by rescuer as it started", ws)
			}
		}

		ids, err := f.eng.Recover([]string{"test"})
		if err != nil {
			t.Fatal(err)
		}
		// On PostgreSQL the stopped worker marked itself leaving as it
		// closed, so the rescuer, elected leader, may have taken the deploy
		// over already; on SQLite it has, at start.
		if sqlite && len(ids) > 0 {
			t.Fatalf("Recover after the takeover resumed %v again", ids)
		}
		release()
	})
}

// On PostgreSQL the leader takes a worker that left over by itself, through
// DBOS recovery on the leader's own pool. With a pool as small as pgx's
// default on a 2-CPU machine (4), taken while the rescuer launches (the
// migration lock, DBOS's LISTEN connection and the leader lock each hold
// one), the takeover must not wait for a connection its own transaction
// keeps: it holds none while recovery runs (store.TakeOver).
func TestTakeOverWithSmallPool(t *testing.T) {
	t.Parallel()
	dbURL := enginetest.Postgres(t)
	f := newFixture(t, dbURL, 1)
	_, release := holdAtActivation(t, f)

	// The worker leaves; a rescuer with a pool of 4 takes it over.
	f.node.Close(5 * time.Second)
	f.cfg.ExecutorID = "rescuer"
	f.cfg.Database = dbURL + "&pool_max_conns=4"
	f.open()
	var by string
	enginetest.Eventually(t, 60*time.Second, func() bool {
		ws, err := f.st.Workers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.ID == "test" {
				by = w.TakenOverBy
			}
		}
		return by != ""
	}, "the rescuer to take the worker that left over")
	if by != "rescuer" {
		t.Fatalf("taken over by %q, want rescuer", by)
	}
	release()
}

// heldAt submits a deploy of api/prod whose step named step waits (a
// minute at most) for the file release to exist, each step writing its
// name to marks, and returns once that step has started.
func heldAt(t *testing.T, f *fixture, step string) (id, marks, release string) {
	t.Helper()
	url, _ := f.artifact("v1", "one")
	marks = filepath.Join(f.dir, "marks")
	release = filepath.Join(f.dir, "release")
	cmd := fmt.Sprintf(`echo "$MANENT_STEP" >> %s
if [ "$MANENT_STEP" = "%s" ]; then i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; fi`, marks, step, release)
	id = f.submit(descriptorYAML("api", "prod", "1", url, "", scriptTarget(cmd)))
	enginetest.Eventually(t, 60*time.Second, func() bool {
		b, _ := os.ReadFile(marks)
		return strings.Contains(string(b), step)
	}, "the %s step to start", step)
	return id, marks, release
}

// holdAtActivation submits a deploy whose script target records each step
// it runs and holds in activation, and waits until activation has started.
// release lets activation finish, waits for the deploy to end SUCCESS and
// checks that the steps completed before the hold ran once and the
// interrupted activation twice (once before the stop, once resumed).
func holdAtActivation(t *testing.T, f *fixture) (id string, release func()) {
	t.Helper()
	id, marks, gate := heldAt(t, f, manent.StepActivation)
	return id, func() {
		t.Helper()
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 60*time.Second)
		if rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s)", rec.State, rec.Error)
		}
		b, _ := os.ReadFile(marks)
		count := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			count[l]++
		}
		for step, want := range map[string]int{"deploy": 1, "activation": 2} {
			if count[step] != want {
				t.Errorf("%s ran %d times, want %d (ran: %q)", step, count[step], want, b)
			}
		}
	}
}

// On SQLite a running deploy of any executor but the asking server's is on
// a gone worker, however recent that worker's last heartbeat: the server
// holds the database's lock, so no other runs. (The observer here is a
// second engine on the fixture's store, which the lock keeps servers from
// being; the fixture's deploy is its "orphan".)
func TestOnDeadWorkersOnSQLiteCountsEveryOtherExecutor(t *testing.T) {
	f := newFixture(t, enginetest.SQLite(t), 1)
	id, _ := holdAtActivation(t, f)
	defer func() { _ = os.WriteFile(filepath.Join(f.dir, "release"), nil, 0o644) }()
	observer, err := engine.New(t.Context(), f.st, engine.Config{
		ExecutorID: "observer", DataDir: t.TempDir(), Plugins: f.node.Plugins, Admitter: f.node.Admitter,
	})
	if err != nil {
		t.Fatal(err)
	}
	stalled, err := observer.OnDeadWorkers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := stalled[id]; !ok || w.ID != "test" {
		t.Fatalf("on dead workers: %+v; want %s on worker test, fresh as its heartbeat is", stalled, id)
	}
	// The fixture's own engine sees its deploy running, not stalled.
	if own, err := f.eng.OnDeadWorkers(t.Context()); err != nil || len(own) != 0 {
		t.Fatalf("the running server's own deploys on dead workers: %+v, %v", own, err)
	}
}

// A worker stopped on purpose (SIGTERM: it marks itself leaving) is taken
// over at once by the leader, as the rolling restart of docs/operations.md
// expects; the leader's log says so at INFO. It said "took over a dead
// worker" at WARN, the line of a worker that crashed or fell silent, for
// every planned stop: an alert on WARN lines paged for each rolling
// restart, and the operator read that the worker had died.
func TestTakeOverOfAWorkerThatLeftIsNoWarning(t *testing.T) {
	dbURL := enginetest.Postgres(t)
	f := newFixture(t, dbURL, 1)
	_, release := holdAtActivation(t, f)

	f.node.Close(5 * time.Second) // leaves, as on SIGTERM
	logs := &enginetest.SyncBuffer{}
	f.log = slog.New(slog.NewJSONHandler(logs, nil))
	f.cfg.ExecutorID = "rescuer"
	f.open()
	var line map[string]any
	enginetest.Eventually(t, 60*time.Second, func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["worker"] == "test" && strings.HasPrefix(fmt.Sprint(m["msg"]), "took over") {
				line = m
				return true
			}
		}
		return false
	}, "the rescuer to log its takeover of the worker that left")
	if line["level"] != "INFO" || strings.Contains(fmt.Sprint(line["msg"]), "dead") {
		t.Errorf("the takeover of a worker that left logged %v %q; want INFO, not a dead worker", line["level"], line["msg"])
	}
	release()
}

// The leader forgets a worker it took over once workers.forget_after has
// passed: the workers list holds the workers of now, not every executor id
// that ever ran (a worker per pod name, one more row at each rollout).
func TestLeaderForgetsAWorkerTakenOverLongAgo(t *testing.T) {
	dbURL := enginetest.Postgres(t)
	f := newFixture(t, dbURL, 1)
	f.node.Close(5 * time.Second) // leaves, as on SIGTERM
	f.cfg.ExecutorID = "rescuer"
	f.cfg.Workers.ForgetAfter = time.Millisecond
	f.open()
	var ids []string
	enginetest.Eventually(t, 60*time.Second, func() bool {
		ws, err := f.node.Store.Workers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, w := range ws {
			ids = append(ids, w.ID+" "+w.State)
		}
		return slices.Equal(ids, []string{"rescuer alive"})
	}, "the worker that left to be taken over and forgotten (workers: %v)", &ids)
}

// The leader counts the workers it takes over, by reason (Engine.TakeOvers,
// /metrics' manent_worker_takeovers_total): one that left (SIGTERM) as
// left, one that fell silent past workers.dead_after as dead, each once.
// Nothing counted them: an operator could not alert on a takeover, nor
// tell a rolling restart's from a crash's.
func TestTakeOversAreCounted(t *testing.T) {
	dbURL := enginetest.Postgres(t)
	f := newFixture(t, dbURL, 1, func(c *node.Config) {
		c.Workers.Heartbeat, c.Workers.DeadAfter = 250*time.Millisecond, 5*time.Second
	})
	if dead, left := f.eng.TakeOvers(); dead != 0 || left != 0 {
		t.Fatalf("a worker that took nothing over counts dead %d, left %d", dead, left)
	}
	f.node.Close(5 * time.Second) // leaves, as on SIGTERM
	f.cfg.ExecutorID = "rescuer"
	f.open()
	// The row is recorded taken over just before the count moves: wait
	// for both, then check what was counted.
	counted := func(id string, n int64) func() bool {
		return func() bool {
			ws, err := f.st.Workers(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(ws, func(w store.Worker) bool { return w.ID == id })
			d, l := f.eng.TakeOvers()
			return i >= 0 && ws[i].TakenOverBy == "rescuer" && d+l >= n
		}
	}
	enginetest.Eventually(t, 60*time.Second, counted("test", 1), "the rescuer to take the worker that left over and count it")
	if dead, left := f.eng.TakeOvers(); dead != 0 || left != 1 {
		t.Fatalf("after taking over a worker that left: dead %d, left %d; want 0, 1", dead, left)
	}

	// A worker that registers and never beats: dead after dead_after.
	if err := f.st.RegisterWorker(t.Context(), store.WorkerStart{ID: "ghost", Version: "0", AppVersion: "0", Instance: "ghost-1"}); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 60*time.Second, counted("ghost", 2), "the rescuer to take the silent worker over and count it")
	if dead, left := f.eng.TakeOvers(); dead != 1 || left != 1 {
		t.Fatalf("after taking over a silent worker: dead %d, left %d; want 1, 1", dead, left)
	}
}

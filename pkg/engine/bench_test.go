package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/artifact"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// noopTarget is a target that does nothing: the benchmark measures the
// engine, not a plugin.
type noopTarget struct{}

func (noopTarget) Validate(map[string]any) error { return nil }
func (noopTarget) Live(context.Context, plugin.Context) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}
func (noopTarget) Deploy(context.Context, plugin.Context) (plugin.Result, error)   { return nil, nil }
func (noopTarget) Activate(context.Context, plugin.Context) (plugin.Result, error) { return nil, nil }
func (noopTarget) Health(context.Context, plugin.Context) (plugin.Result, error)   { return nil, nil }
func (noopTarget) RollbackDeploy(context.Context, plugin.Context, json.RawMessage) (plugin.Result, error) {
	return nil, nil
}
func (noopTarget) RollbackActivation(context.Context, plugin.Context, json.RawMessage) (plugin.Result, error) {
	return nil, nil
}

const (
	benchDeploys = 500
	benchEnvs    = 50
	benchSlots   = 16
)

// BenchmarkEngine submits 500 no-op deploys over 50 environments, then runs
// 500 raw DBOS workflows with the same number of no-op steps on the same
// queue and database, then 500 raw DBOS workflows whose steps do the
// deploy's work without manent's records (rawWorkWorkflow). It reports the
// rates, manent's ratio to each, and the process's CPU per workflow.
// Run: go test ./pkg/engine -run '^$' -bench Engine -benchtime 1x
func BenchmarkEngine(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchEngine(b, enginetest.SQLite(b)) })
	b.Run("postgres", func(b *testing.B) { benchEngine(b, enginetest.Postgres(b)) })
}

func benchEngine(b *testing.B, db string) {
	e, _ := openBench(b, db)
	for i := 0; i < b.N; i++ {
		c0 := processCPU()
		manentRate := e.manentRate(b, benchDeploys)
		c1 := processCPU()
		rawRate := e.rawRate(b, benchDeploys)
		c2 := processCPU()
		workRate := e.rawWorkRate(b, benchDeploys)
		workCPU := float64(processCPU()-c2) / float64(time.Millisecond) / benchDeploys
		manentCPU := float64(c1-c0) / float64(time.Millisecond) / benchDeploys
		rawCPU := float64(c2-c1) / float64(time.Millisecond) / benchDeploys
		b.ReportMetric(manentRate, "deploys/s")
		b.ReportMetric(rawRate, "raw-workflows/s")
		b.ReportMetric(manentRate/rawRate, "ratio")
		b.ReportMetric(manentCPU, "cpu-ms/deploy")
		b.ReportMetric(rawCPU, "cpu-ms/raw-workflow")
		b.ReportMetric(workRate, "raw-work-workflows/s")
		b.ReportMetric(manentRate/workRate, "ratio-same-work")
		b.ReportMetric(workCPU, "cpu-ms/raw-work-workflow")
		// The CPU figures are this process's (user + system), steadier
		// than the rates on a shared machine; PostgreSQL's own CPU is not
		// in them.
		b.Logf("%d deploys over %d environments: manent %.1f deploys/s, raw DBOS %.1f workflows/s (%d no-op steps), ratio %.2f; process CPU %.2f ms per deploy, %.2f per raw workflow (ratio %.2f)",
			benchDeploys, benchEnvs, manentRate, rawRate, rawSteps, manentRate/rawRate, manentCPU, rawCPU, rawCPU/manentCPU)
		b.Logf("raw DBOS doing the deploy's work (%d steps, no records of manent's): %.1f workflows/s, process CPU %.2f ms each; manent / same work %.2f",
			rawSteps, workRate, workCPU, manentRate/workRate)
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The raw comparison: the same number of DBOS steps as a deploy runs
// (config, notify:started, 6 plan steps, cleanup, finish, attributes).
const rawSteps = 11

func rawWorkflow(ctx dbos.Context, n int) (int, error) {
	for i := 0; i < n; i++ {
		if _, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) { return i, nil }, dbos.WithStepName(fmt.Sprintf("noop-%d", i))); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// rawWork is the input of the same-work raw workflow.
type rawWork struct {
	ID, URL, Dir string
}

// rawWorkWorkflow is a deploy's work without manent: as many DBOS steps as
// rawWorkflow, each doing what the deploy's step does with the no-op
// target — download and hash the artifact, verify it again, the target's
// Live, Deploy, Health, Live, Activate, remove the work directory — and
// recording nothing but DBOS's checkpoints: no step rows, events, log
// lines, deploy state or inventory. manent's rate against it is the cost of
// manent's own records, apart from the work.
func (e *benchEngineT) rawWorkWorkflow(ctx dbos.Context, in rawWork) (int, error) {
	var t noopTarget
	pc := plugin.Context{DeployID: in.ID, Application: "bench"}
	var fetched *artifact.Fetched
	steps := []func(context.Context) error{
		func(context.Context) error { return nil }, // config: the input is already merged
		func(context.Context) error { return nil }, // notify:started: no callbacks
		func(context.Context) error { return nil }, // secrets: none
		func(c context.Context) error {
			f, err := e.fetcher.Fetch(c, in.URL, in.Dir, "")
			fetched = f
			return err
		},
		func(context.Context) error {
			_, err := artifact.SHA256File(fetched.Path)
			return err
		},
		func(c context.Context) error { _, err := t.Live(c, pc); return err },
		func(c context.Context) error { _, err := t.Deploy(c, pc); return err },
		func(c context.Context) error { _, err := t.Health(c, pc); return err },
		func(c context.Context) error { _, err := t.Live(c, pc); return err },
		func(c context.Context) error { _, err := t.Activate(c, pc); return err },
		func(context.Context) error { return os.RemoveAll(in.Dir) },
	}
	for i, fn := range steps {
		if _, err := dbos.RunAsStep(ctx, func(c context.Context) (int, error) { return i, fn(c) }, dbos.WithStepName(fmt.Sprintf("work-%d", i))); err != nil {
			return 0, err
		}
	}
	return len(steps), nil
}

// benchEngineT is an engine with the no-op target and the raw workflows.
type benchEngineT struct {
	*Engine
	art      string
	dir      string
	pipeline manent.Plan
	rawWork  func(dbos.Context, rawWork) (int, error)
}

// openParts opens and migrates db, and returns it with a plugin registry
// holding the no-op target and an admitter of local trial mode.
func openParts(tb testing.TB, db string) (*store.Store, *plugin.Registry, *admit.Admitter) {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	reg := plugin.NewRegistry()
	_ = reg.RegisterTarget("noop", noopTarget{})
	adm, err := admit.New(admit.Config{Store: st, Plugins: reg, Sources: urlpolicy.TrialSources()})
	if err != nil {
		tb.Fatal(err)
	}
	return st, reg, adm
}

// openBench launches an engine on db for a benchmark.
func openBench(b *testing.B, db string) (*benchEngineT, *store.Store) {
	ctx := context.Background()
	st, reg, adm := openParts(b, db)
	dir := b.TempDir()
	e, err := New(ctx, st, Config{ExecutorID: "bench", Slots: benchSlots, DataDir: dir, Plugins: reg, Admitter: adm, QueuePoll: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	dbos.RegisterWorkflow(e.dbos, rawWorkflow, dbos.WithWorkflowName("bench.raw"))
	be := &benchEngineT{Engine: e, dir: dir}
	be.rawWork = be.rawWorkWorkflow
	dbos.RegisterWorkflow(e.dbos, be.rawWork, dbos.WithWorkflowName("bench.raw-work"))
	if err := e.Launch(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Shutdown(10 * time.Second) })
	art := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	pipeline := manent.Plan{}
	for _, n := range manent.DefaultPipeline {
		pipeline.Steps = append(pipeline.Steps, manent.PlanStep{Name: n})
	}
	be.art, be.pipeline = art, pipeline
	return be, st
}

// rates runs n no-op deploys over benchEnvs environments, then n raw DBOS
// workflows with as many no-op steps on the same queue and partitions, and
// returns both rates per second.
func (e *benchEngineT) rates(b *testing.B, n int) (manentRate, rawRate float64) {
	return e.manentRate(b, n), e.rawRate(b, n)
}

// manentRate runs n no-op deploys and returns their rate per second.
func (e *benchEngineT) manentRate(b *testing.B, n int) float64 {
	ctx := context.Background()
	start := time.Now()
	ids := make([]string, 0, n)
	for j := 0; j < n; j++ {
		env := fmt.Sprintf("env-%02d", j%benchEnvs)
		in := plan.Input{
			ID: manent.NewDeploymentID(), Application: "bench", Environment: env, Version: fmt.Sprint(j), Requester: "token:bench",
			Descriptor: &descriptor.Descriptor{APIVersion: "manent/v1", Application: "bench", Environment: env, Version: fmt.Sprint(j),
				Artifact: descriptor.Artifact{URL: "file://" + e.art}, Target: &descriptor.Target{Plugin: "noop"}},
			Plan: e.pipeline, Target: descriptor.Target{Plugin: "noop"},
		}
		if _, err := e.Submit(ctx, in, nil); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	for _, id := range ids {
		h, err := dbos.RetrieveWorkflow[Result](e.dbos, id)
		if err != nil {
			b.Fatal(err)
		}
		res, err := h.GetResult(dbos.WithHandlePollingInterval(20 * time.Millisecond))
		if err != nil || res.State != manent.StateSuccess {
			b.Fatalf("deploy %s: %v %+v", id, err, res)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// rawWorkRate runs n same-work raw workflows (rawWorkWorkflow) on the
// deploys' queue and partitions, and returns their rate per second.
func (e *benchEngineT) rawWorkRate(b *testing.B, n int) float64 {
	run := fmt.Sprint(time.Now().UnixNano())
	return queuedRate(b, e, n, e.rawWork, func(j int) rawWork {
		in := rawWork{ID: fmt.Sprintf("work-%s-%d", run, j), URL: "file://" + e.art}
		in.Dir = filepath.Join(e.dir, "work", in.ID)
		return in
	})
}

// rawRate runs n raw DBOS workflows of rawSteps no-op steps on the
// deploys' queue and partitions, and returns their rate per second.
func (e *benchEngineT) rawRate(b *testing.B, n int) float64 {
	return queuedRate(b, e, n, rawWorkflow, func(int) int { return rawSteps })
}

// queuedRate runs n workflows wf (the j-th with input(j)) on the deploys'
// queue, over benchEnvs partitions, waits until each returned rawSteps, and
// returns their rate per second.
func queuedRate[I any](b *testing.B, e *benchEngineT, n int, wf dbos.Workflow[I, int], input func(j int) I) float64 {
	start := time.Now()
	var hs []dbos.WorkflowHandle[int]
	for j := 0; j < n; j++ {
		h, err := dbos.RunWorkflow(e.dbos, wf, input(j),
			dbos.WithQueue(e.queue), dbos.WithQueuePartitionKey(fmt.Sprintf("bench/env-%02d", j%benchEnvs)))
		if err != nil {
			b.Fatal(err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		if steps, err := h.GetResult(dbos.WithHandlePollingInterval(20 * time.Millisecond)); err != nil || steps != rawSteps {
			b.Fatalf("raw workflow: %d steps, %v", steps, err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// countByState counts the deploys per state (store.CountByState).
type countByState func(ctx context.Context) (map[manent.State]int, error)

// deployCollectors report manent_deployments{state} and
// manent_queue_depth{state} at scrape time, from one count per scrape.
func deployCollectors(count countByState) []prometheus.Collector {
	return []prometheus.Collector{&deployCollector{count: count,
		states: prometheus.NewDesc("manent_deployments", "Deploys by state.", []string{"state"}, nil),
		queue: prometheus.NewDesc("manent_queue_depth",
			"Deploys waiting now (DELAYED, WAITING_DEPENDENCY, AWAITING_APPROVAL, ENQUEUED), by state.", []string{"state"}, nil)}}
}

// deployCollector reports the number of deploys per state, and of those
// waiting, at scrape time: both from one count (it was asked twice).
type deployCollector struct {
	count         countByState
	states, queue *prometheus.Desc
}

func (c *deployCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.states; ch <- c.queue }

func (c *deployCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		// Fails the scrape, naming the error: left out, the families
		// vanished from a 200 answer as if nothing were there to count.
		ch <- prometheus.NewInvalidMetric(c.states, fmt.Errorf("count deploys by state: %w", err))
		ch <- prometheus.NewInvalidMetric(c.queue, fmt.Errorf("count waiting deploys: %w", err))
		return
	}
	for _, s := range manent.States {
		ch <- prometheus.MustNewConstMetric(c.states, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	for _, s := range waitingStates {
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// countWorkers counts the workers per state (store.CountWorkersByState).
type countWorkers func(ctx context.Context) (map[string]int, error)

// workerStates are the states of manent_workers{state}, each reported
// (at 0 when no worker is in it) so that an alert on dead workers works
// from the start: those GET /api/v1/workers shows.
var workerStates = []string{store.WorkerAlive, store.WorkerLeaving, store.WorkerDead, store.WorkerTakenOver}

// workerCollector reports manent_workers{state}: the workers known to the
// database at scrape time, by state; counts only, no worker's id or host.
type workerCollector struct {
	count countWorkers
	desc  *prometheus.Desc
}

func newWorkerCollector(count countWorkers) *workerCollector {
	return &workerCollector{count: count, desc: prometheus.NewDesc("manent_workers",
		"Workers known to the database now (all workers), by state: alive, leaving, dead (its deploys not taken over yet), taken_over.", []string{"state"}, nil)}
}

func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		// Fails the scrape as the deploy families do: a 0 here would
		// say no worker is dead while nobody could tell.
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, st := range workerStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[st]), st)
	}
}

// takeoverCollector reports manent_worker_takeovers_total{reason}: the
// workers this process took over as leader (engine.TakeOvers), reason
// dead or left, both present from the start.
type takeoverCollector struct {
	read func() (dead, left int64)
	desc *prometheus.Desc
}

func newTakeoverCollector(read func() (dead, left int64)) *takeoverCollector {
	return &takeoverCollector{read: read, desc: prometheus.NewDesc("manent_worker_takeovers_total",
		"Workers this process took over as leader, by reason: dead (crashed or silent past workers.dead_after), left (stopped on purpose).",
		[]string{"reason"}, nil)}
}

func (c *takeoverCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *takeoverCollector) Collect(ch chan<- prometheus.Metric) {
	dead, left := c.read()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(dead), "dead")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(left), "left")
}

// streamsOpen counts, process-wide, the Server-Sent Events streams open now.
var streamsOpen atomic.Int64

// waitingStates are the states counted by manent_queue_depth: deploys that
// wait (none occupies a worker slot).
var waitingStates = []manent.State{manent.StateDelayed, manent.StateWaitingDependency, manent.StateAwaitingApproval, manent.StateEnqueued}

// maxStepLabels bounds the `step` label values of
// manent_step_duration_seconds in one process: step names come from
// descriptors (custom steps, waves), and /metrics needs no token, so a
// submitter could otherwise grow every scrape without limit. Names beyond
// the bound are counted under stepLabelOther, in parentheses so that no
// step can be named so (a step named "other" keeps its own series).
const (
	maxStepLabels  = 500
	stepLabelOther = "(other)"
)

// stepLabels hands out step label values: a name seen before, or a new one
// while fewer than maxStepLabels are in use; stepLabelOther after that.
type stepLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (l *stepLabels) label(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[name] {
		return name
	}
	if len(l.seen) >= maxStepLabels {
		return stepLabelOther
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[name] = true
	return name
}

// registerMetrics adds the families of SPEC §11.5 [contract]:
//
//   - manent_step_duration_seconds{step,state}: steps that ended SUCCESS or
//     ERROR in this process (each attempt: one that another attempt follows,
//     the step still RUNNING, as ERROR), from start to end; at most
//     maxStepLabels step names, the rest as step="(other)", which no step name
//     can be (every one starts with a lowercase letter or a digit);
//   - manent_deploys_finished_total{state}: deploys this process finished,
//     by final state;
//   - manent_queue_depth{state}: deploys waiting now, across all workers;
//   - manent_sse_streams and manent_sse_cut_total: event streams open in
//     this process, and those cut off because their client did not keep up.
//
// and, beyond the contract's list:
//
//   - manent_deployments{state}: deploys by state, across all workers;
//   - manent_workers{state}: workers by state (alive, leaving, dead), read
//     from the database at each scrape;
//   - manent_worker_takeovers_total{reason}: workers this process took
//     over as leader, reason dead or left.
func (s *Server) registerMetrics(reg *prometheus.Registry) {
	steps := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "manent_step_duration_seconds",
		Help:    "Duration of deploy steps that ended, by step name and state (SUCCESS, ERROR).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, []string{"step", "state"})
	finished := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "manent_deploys_finished_total",
		Help: "Deploys finished by this process, by final state.",
	}, []string{"state"})
	for _, st := range manent.States {
		if st.Final() {
			finished.WithLabelValues(string(st))
		}
	}
	reg.MustRegister(deployCollectors(s.st.CountByState)...)
	reg.MustRegister(newWorkerCollector(s.st.CountWorkersByState), newTakeoverCollector(s.eng.TakeOvers))
	reg.MustRegister(steps, finished,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "manent_sse_streams", Help: "Server-Sent Events streams open in this process."},
			func() float64 { return float64(streamsOpen.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "manent_sse_cut_total",
			Help: "Server-Sent Events streams cut off because their client did not keep up (full buffer or write timeout)."},
			func() float64 { return float64(streamsCut.Load()) }))
	labels := &stepLabels{}
	s.st.OnCommit(func(evs []store.Event) {
		for _, e := range evs {
			switch e.Type {
			case store.EventStep:
				var st manent.Step
				if json.Unmarshal(e.Data, &st) != nil || st.StartedAt == nil {
					continue
				}
				if st.Retrying() {
					// An attempt that failed, another to follow: the step
					// has no end, the attempt ended with the event.
					steps.WithLabelValues(labels.label(st.Name), string(manent.StepError)).Observe(e.Time.Sub(*st.StartedAt).Seconds())
					continue
				}
				if st.FinishedAt == nil {
					continue
				}
				if st.State == manent.StepSuccess || st.State == manent.StepError {
					steps.WithLabelValues(labels.label(st.Name), string(st.State)).Observe(st.FinishedAt.Sub(*st.StartedAt).Seconds())
				}
			case store.EventDone:
				var d store.DoneData
				if json.Unmarshal(e.Data, &d) == nil && d.State.Final() {
					finished.WithLabelValues(string(d.State)).Inc()
				}
			}
		}
	})
}

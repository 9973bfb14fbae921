package server

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/manent-io/manent/pkg/manent"
)

// Step names come from descriptors: past maxStepLabels distinct names, a
// new one is labelled "(other)", and the names already in use keep theirs.
func TestStepLabelsAreBounded(t *testing.T) {
	var l stepLabels
	for i := 0; i < maxStepLabels; i++ {
		if got, want := l.label(fmt.Sprintf("s%d", i)), fmt.Sprintf("s%d", i); got != want {
			t.Fatalf("label %d = %q, want %q", i, got, want)
		}
	}
	if got := l.label("one-too-many"); got != stepLabelOther {
		t.Fatalf("a name past the bound is labelled %q, want %q", got, stepLabelOther)
	}
	if got := l.label("s7"); got != "s7" {
		t.Fatalf("a name in use is labelled %q after the bound, want s7", got)
	}
	if len(l.seen) != maxStepLabels {
		t.Fatalf("%d names kept, want %d", len(l.seen), maxStepLabels)
	}
}

// The overflow label is no step's name: a step named "other" (a valid
// custom step name) keeps its own series, apart from the names counted
// past the bound. Step names are a custom step's (descriptor.md:
// ^[a-z0-9][a-z0-9:_-]{0,62}$), a built-in's, or one of those qualified by
// a wave (deploy[eu]) or prefixed (rollback:, checkpoint:) — all start
// with a lowercase letter or a digit.
func TestStepLabelOverflowIsNoStepName(t *testing.T) {
	stepName := regexp.MustCompile(`^[a-z0-9]`)
	if stepName.MatchString(stepLabelOther) {
		t.Fatalf("the overflow label %q could be a step's name", stepLabelOther)
	}
	var l stepLabels
	for i := 0; i < maxStepLabels-1; i++ {
		l.label(fmt.Sprintf("s%d", i))
	}
	if got := l.label("other"); got != "other" {
		t.Fatalf("a step named other is labelled %q, want other", got)
	}
	if got := l.label("one-too-many"); got == "other" || !strings.Contains(got, "other") {
		t.Fatalf("a name past the bound is labelled %q: want a label apart from the step named other", got)
	}
}

// A scrape counts the deploys by state once: manent_deployments and
// manent_queue_depth are read from the same count (it asked the database
// twice per scrape).
func TestScrapeCountsDeploysOnce(t *testing.T) {
	var calls atomic.Int64 // a registry gathers its collectors at once
	reg := prometheus.NewRegistry()
	reg.MustRegister(deployCollectors(func(context.Context) (map[manent.State]int, error) {
		calls.Add(1)
		return map[manent.State]int{manent.StateSuccess: 3, manent.StateEnqueued: 2}, nil
	})...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("a scrape counted the deploys by state %d times, want once", n)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if got["manent_deployments/SUCCESS"] != 3 || got["manent_queue_depth/ENQUEUED"] != 2 || got["manent_deployments/ENQUEUED"] != 2 {
		t.Errorf("figures %v: want SUCCESS 3 and ENQUEUED 2 in manent_deployments, ENQUEUED 2 in manent_queue_depth", got)
	}
	if _, ok := got["manent_queue_depth/SUCCESS"]; ok {
		t.Errorf("manent_queue_depth counts SUCCESS: %v", got)
	}

	// A count that fails fails both families.
	reg = prometheus.NewRegistry()
	reg.MustRegister(deployCollectors(func(context.Context) (map[manent.State]int, error) { return nil, errors.New("database is closed") })...)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "manent_deployments") || !strings.Contains(err.Error(), "manent_queue_depth") {
		t.Errorf("a failed count: %v, want an error naming both families", err)
	}
}

// manent_workers reports every worker state, at 0 when no worker is in it
// (an alert on state="dead" works from the start), and fails the scrape
// when the workers cannot be counted: it never reports a false 0.
func TestWorkerCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newWorkerCollector(func(context.Context) (map[string]int, error) {
		return map[string]int{"alive": 2, "dead": 1}, nil
	}))
	got := gatherOneLabel(t, reg)
	want := map[string]float64{"manent_workers/alive": 2, "manent_workers/leaving": 0, "manent_workers/dead": 1, "manent_workers/taken_over": 0}
	if len(got) != len(want) {
		t.Errorf("samples %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}

	reg = prometheus.NewRegistry()
	reg.MustRegister(newWorkerCollector(func(context.Context) (map[string]int, error) {
		return nil, errors.New("count workers by state: database is closed")
	}))
	if fams, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "manent_workers") || !strings.Contains(err.Error(), "database is closed") {
		t.Errorf("a failed count: %v (families %v), want an error naming manent_workers and the cause", err, fams)
	}
}

// manent_worker_takeovers_total reports both reasons, as counters, from
// what the engine counted.
func TestTakeoverCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newTakeoverCollector(func() (int64, int64) { return 3, 5 }))
	got := gatherOneLabel(t, reg)
	if len(got) != 2 || got["manent_worker_takeovers_total/dead"] != 3 || got["manent_worker_takeovers_total/left"] != 5 {
		t.Errorf("samples %v, want dead 3 and left 5", got)
	}
}

// gatherOneLabel gathers reg's families of one label each, gauges and
// counters, as "family/label value" → value.
func gatherOneLabel(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return got
}

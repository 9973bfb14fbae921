package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// stateCollector reports the number of deploys per state at scrape time.
type stateCollector struct {
	st   *store.Store
	desc *prometheus.Desc
}

func newStateCollector(st *store.Store) *stateCollector {
	return &stateCollector{st: st, desc: prometheus.NewDesc("manent_deployments",
		"Deploys by state.", []string{"state"}, nil)}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.st.CountByState(ctx)
	if err != nil {
		return
	}
	for _, s := range manent.States {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

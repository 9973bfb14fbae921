package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/manent-io/manent/pkg/clusterstate"
)

// ReportResult answers POST /api/v1/agent/reports: what the snapshot
// changed in the server's view of the cluster.
type ReportResult struct {
	Cluster    string    `json:"cluster"`
	ReceivedAt time.Time `json:"received_at"`
	Pods       int       `json:"pods"`
	Workloads  int       `json:"workloads"`
	Inserted   int       `json:"inserted"`
	Updated    int       `json:"updated"`
	Deleted    int       `json:"deleted"`
}

// Report sends an agent's full snapshot of its cluster (SPEC §9). The
// token needs agent.report on snap.Cluster.
func (c *Client) Report(ctx context.Context, snap *clusterstate.Snapshot) (*ReportResult, error) {
	body, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	var out ReportResult
	err = c.do(ctx, http.MethodPost, "/api/v1/agent/reports", "application/json", body, &out)
	return &out, err
}

// ClusterStatus returns a cluster's pods and workloads as last reported,
// each workload beside the deploy that declared it.
func (c *Client) ClusterStatus(ctx context.Context, cluster string) (*clusterstate.Status, error) {
	var out clusterstate.Status
	err := c.do(ctx, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(cluster)+"/status", "", nil, &out)
	return &out, err
}

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

// ClusterSummary is one cluster in GET /api/v1/clusters: when its agent
// last reported and how many of its pods and workloads the caller may see.
type ClusterSummary struct {
	Cluster string `json:"cluster"`
	// LastReportAt is when the server received the last snapshot.
	LastReportAt time.Time `json:"last_report_at"`
	// ReportedAt is when the agent read the cluster for it (the agent's clock).
	ReportedAt time.Time `json:"reported_at"`
	Pods       int       `json:"pods"`
	Workloads  int       `json:"workloads"`
}

// ClustersResult answers GET /api/v1/clusters.
type ClustersResult struct {
	Items []ClusterSummary `json:"items"`
}

// Clusters lists the clusters whose agents have reported and that the
// token may see: with agent.report on a cluster, all of it; otherwise the
// clusters holding objects of an application/environment it may read,
// counting only those objects.
func (c *Client) Clusters(ctx context.Context) (*ClustersResult, error) {
	var out ClustersResult
	err := c.do(ctx, http.MethodGet, "/api/v1/clusters", "", nil, &out)
	return &out, err
}

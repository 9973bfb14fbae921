package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// routesAgent registers the routes of agent reports and cluster status
// (POST /api/v1/agent/reports, GET /api/v1/clusters,
// GET /api/v1/clusters/{cluster}/status).
func (s *Server) routesAgent() {
	s.handle(route{Pattern: "POST /api/v1/agent/reports", JSON: true}, s.handleAgentReport)
	// The same, with the cluster in the path too: it must match the body's.
	s.handle(route{Pattern: "POST /api/v1/clusters/{cluster}/reports", JSON: true}, s.handleAgentReport)
	s.handle(route{Pattern: "GET /api/v1/clusters"}, s.handleClusters)
	s.handle(route{Pattern: "GET /api/v1/clusters/{cluster}/status"}, s.handleClusterStatus)
}

// handleClusters lists the clusters that have reported, as
// handleClusterStatus shows them: a caller with agent.report on a cluster
// sees it whole; another sees the clusters holding objects of the
// applications and environments it may read (deployment.read), counting
// only those, and learns nothing of the other clusters.
func (s *Server) handleClusters(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	clusters, err := s.st.Clusters(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// What the caller may see of a cluster it may not report on is counted
	// only if there is such a cluster.
	var scopes map[string][]store.ClusterScope
	out := api.ClustersResult{Items: []api.ClusterSummary{}}
	for _, c := range clusters {
		sum := api.ClusterSummary{Cluster: c.Name, LastReportAt: c.LastReportAt, ReportedAt: c.ReportedAt, Pods: c.Pods, Workloads: c.Workloads}
		if s.cfg.Guard.AuthorizeCluster(p, c.Name) != nil {
			if scopes == nil {
				if scopes, err = s.st.ClusterScopes(r.Context()); err != nil {
					writeError(w, r, s.log, err)
					return
				}
			}
			sum.Pods, sum.Workloads = 0, 0
			for _, sc := range scopes[c.Name] {
				if s.mayReadObject(p, sc.Application, sc.Environment) {
					sum.Pods += sc.Pods
					sum.Workloads += sc.Workloads
				}
			}
			if sum.Pods == 0 && sum.Workloads == 0 {
				continue
			}
		}
		out.Items = append(out.Items, sum)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxClockSkew is how far ahead of the server's clock a snapshot's time may be.
const maxClockSkew = 5 * time.Minute

// handleAgentReport applies an agent's full snapshot of its cluster (SPEC
// §9). In order: 401 without a valid token; 413 beyond 16 MiB; 422 for a
// body that is not a snapshot or names no cluster; 429 while the identity
// is limited (limits.refusals_per_minute); 403 without agent.report on that
// cluster; 413 beyond 50,000 objects; 422 for any problem in the
// snapshot (all listed) or a time more than 5 minutes ahead; 409 for a
// snapshot older than the one applied less than a minute ago
// (store.SnapshotOrderWindow).
// Nothing is applied unless everything passes, and then the cluster's rows
// are replaced in one transaction.
func (s *Server) handleAgentReport(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	body, err := readReportBody(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var snap clusterstate.Snapshot
	if err := checkJSONBody(body); err != nil {
		writeError(w, r, s.log, manent.Errorf(manent.EInvalid, "the body is not a snapshot: %v", err))
		return
	}
	if err := json.Unmarshal(body, &snap); err != nil {
		writeError(w, r, s.log, manent.Errorf(manent.EInvalid, "the body is not a snapshot: %v", err))
		return
	}
	if path := r.PathValue("cluster"); path != "" && path != snap.Cluster {
		writeError(w, r, s.log, &manent.Error{Code: manent.EInvalid, Message: "the snapshot is for another cluster",
			Fields: []manent.FieldError{{Path: "/cluster", Message: "cluster " + quote(snap.Cluster) + " does not match the path's " + quote(path)}}})
		return
	}
	if !clusterstate.ValidClusterName(snap.Cluster) {
		writeError(w, r, s.log, &manent.Error{Code: manent.EInvalid, Message: "invalid snapshot", Fields: clusterstate.Validate(&snap)})
		return
	}
	if !s.limitRefusals(w, r, p, "agent.report", snap.Cluster) {
		return
	}
	if err := s.cfg.Guard.AuthorizeCluster(p, snap.Cluster); err != nil {
		// Accepted reports are not audited (one per cluster every few
		// seconds; last_report_at records them); a refused one is.
		s.auditRefused(r, p, "agent.report", snap.Cluster, err)
		writeError(w, r, s.log, err)
		return
	}
	if n := snap.Objects(); n > clusterstate.MaxObjects {
		writeError(w, r, s.log, manent.Errorf(manent.ETooLarge, "the snapshot has %d objects, more than %d", n, clusterstate.MaxObjects))
		return
	}
	if problems := clusterstate.Validate(&snap); len(problems) > 0 {
		writeError(w, r, s.log, &manent.Error{Code: manent.EInvalid, Message: "invalid snapshot: nothing was applied", Fields: problems})
		return
	}
	clusterstate.Bound(&snap)
	received := time.Now().UTC()
	if snap.Time.After(received.Add(maxClockSkew)) {
		// Accepted, it would make every later snapshot "older" (409) until
		// the server's clock caught up.
		writeError(w, r, s.log, &manent.Error{Code: manent.EInvalid, Message: "invalid snapshot: nothing was applied",
			Fields: []manent.FieldError{{Path: "/time", Message: fmt.Sprintf("%s is more than %s ahead of the server's clock: check the agent's clock",
				snap.Time.UTC().Format(time.RFC3339), maxClockSkew)}}})
		return
	}
	res, err := s.st.ReplaceSnapshot(r.Context(), &snap, received)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.log.Debug("agent report", "cluster", snap.Cluster, "subject", p.Subject, "pods", len(snap.Pods),
		"workloads", len(snap.Workloads), "inserted", res.Inserted, "updated", res.Updated, "deleted", res.Deleted,
		"duration", time.Since(received))
	writeJSON(w, http.StatusOK, api.ReportResult{
		Cluster: snap.Cluster, ReceivedAt: received, Pods: len(snap.Pods), Workloads: len(snap.Workloads),
		Inserted: res.Inserted, Updated: res.Updated, Deleted: res.Deleted,
	})
}

// handleClusterStatus shows a cluster as last reported. A caller with
// agent.report on the cluster sees everything; another sees the objects of
// the applications and environments it may read (deployment.read), and is
// refused (403) when that is nothing — or when the cluster is unknown, so
// that only those entitled learn which clusters exist (404).
func (s *Server) handleClusterStatus(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	cluster := r.PathValue("cluster")
	denied := s.cfg.Guard.AuthorizeCluster(p, cluster)
	st, err := s.st.ClusterStatus(r.Context(), cluster)
	quoted := manent.ClipText(cluster, maxEchoed) // a 100 kB path is not echoed whole
	// A caller without agent.report on the cluster sees only what it may
	// read; with nothing, the answer is the same whether the cluster
	// reported or not (GET /api/v1/clusters does not list it either).
	nothing := manent.Errorf(manent.ENotFound,
		"%s may read nothing of cluster %s: it has not reported, or holds no object of an application/environment %s may read (deployment.read)",
		p.Subject, quoted, p.Subject)
	switch {
	case errors.Is(err, store.ErrNotFound) && denied != nil:
		writeError(w, r, s.log, nothing)
		return
	case errors.Is(err, store.ErrNotFound):
		writeError(w, r, s.log, manent.Errorf(manent.ENotFound, "cluster %s has never reported", quoted))
		return
	case err != nil:
		writeError(w, r, s.log, err)
		return
	}
	if denied != nil {
		pods := st.Pods[:0]
		for _, pod := range st.Pods {
			if s.mayReadObject(p, pod.Application, pod.Environment) {
				pods = append(pods, pod)
			}
		}
		workloads := st.Workloads[:0]
		for _, wl := range st.Workloads {
			if s.mayReadObject(p, wl.Application, wl.Environment) {
				workloads = append(workloads, wl)
			}
		}
		if len(pods) == 0 && len(workloads) == 0 {
			writeError(w, r, s.log, nothing)
			return
		}
		st.Pods, st.Workloads = pods, workloads
	}
	writeJSON(w, http.StatusOK, st)
}

// mayReadObject says whether p, without agent.report on a cluster, may see
// an object of it labelled with application and environment: it needs
// deployment.read there, and an object without both labels is no one's.
func (s *Server) mayReadObject(p manent.Identity, application, environment string) bool {
	return application != "" && environment != "" && s.cfg.Guard.Authorize(p, PermRead, application, environment) == nil
}

// readReportBody reads a snapshot of at most clusterstate.MaxBytes (413
// beyond): far more than the 1 MiB of other requests.
func readReportBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > clusterstate.MaxBytes {
		return nil, manent.Errorf(manent.ETooLarge, "the snapshot is %d bytes, more than %d", r.ContentLength, clusterstate.MaxBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, clusterstate.MaxBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, manent.Errorf(manent.ETooLarge, "the snapshot is larger than %d bytes", clusterstate.MaxBytes)
	}
	if err != nil {
		return nil, bodyError("snapshot", err)
	}
	return body, nil
}

// quote is s as a JSON string fit for a message: the control characters
// encoding/json leaves as they are (the bidirectional-text controls such
// as U+202E, which reorder what a terminal or a page shows, C1 controls)
// written \uXXXX too.
func quote(s string) string { b, _ := json.Marshal(s); return descriptor.EscapeControls(string(b)) }

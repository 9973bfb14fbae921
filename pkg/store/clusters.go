package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/manent"
)

// IngestResult counts what one snapshot changed.
type IngestResult struct {
	Inserted int `json:"inserted"`
	Updated  int `json:"updated"`
	Deleted  int `json:"deleted"`
}

// SnapshotOrderWindow is how long after the last accepted report a
// snapshot read before it is refused. Within it, an older snapshot is a
// second agent under the same name or a delayed request; past it, the
// cluster was silent and the snapshot comes from an agent whose clock is
// behind the last one's (rescheduled onto a late node, its clock stepped
// back), which would otherwise be refused until its clock caught up.
const SnapshotOrderWindow = time.Minute

// ReplaceSnapshot makes snap the cluster's whole reported state, in one
// transaction: objects absent from it are deleted, changed ones rewritten,
// unchanged ones left alone; the cluster's last_report_at becomes
// receivedAt. A snapshot read before the last one applied is refused
// (EConflict) and changes nothing, unless the last one was received
// SnapshotOrderWindow or more before receivedAt. snap must have passed
// clusterstate.Validate.
func (s *Store) ReplaceSnapshot(ctx context.Context, snap *clusterstate.Snapshot, receivedAt time.Time) (IngestResult, error) {
	var res IngestResult
	pods := make([]objectRow, len(snap.Pods))
	for i, p := range snap.Pods {
		r, err := newObjectRow(p, p.DeployID, p.Application, p.Environment, p.Namespace, p.Name)
		if err != nil {
			return res, err
		}
		pods[i] = r
	}
	workloads := make([]objectRow, len(snap.Workloads))
	for i, w := range snap.Workloads {
		r, err := newObjectRow(w, w.DeployID, w.Application, w.Environment, w.Kind, w.Namespace, w.Name)
		if err != nil {
			return res, err
		}
		workloads[i] = r
	}
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		res = IngestResult{}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_clusters (name, last_report_at, reported_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO NOTHING`), snap.Cluster, fmtTime(receivedAt), fmtTime(snap.Time)); err != nil {
			return fmt.Errorf("record cluster: %w", err)
		}
		lock := ""
		if s.postgres {
			lock = " FOR UPDATE" // reports of one cluster apply one at a time
		}
		var prev, prevAt string
		if err := tx.QueryRowContext(ctx, s.q(`SELECT reported_at, last_report_at FROM manent_clusters WHERE name = ?`+lock), snap.Cluster).Scan(&prev, &prevAt); err != nil {
			return fmt.Errorf("read cluster: %w", err)
		}
		t := parseTime(sql.NullString{String: prev, Valid: true})
		at := parseTime(sql.NullString{String: prevAt, Valid: true})
		if t != nil && snap.Time.Before(*t) && (at == nil || receivedAt.Sub(*at) < SnapshotOrderWindow) {
			return manent.Errorf(manent.EConflict, "snapshot of cluster %s read at %s is older than the one applied (read at %s): "+
				"another agent reports as cluster %s (run one per cluster name), or this agent's clock is behind the last one's "+
				"(a snapshot is taken whatever its time once the cluster has been silent for %s)",
				snap.Cluster, snap.Time.UTC().Format(time.RFC3339Nano), t.Format(time.RFC3339Nano), snap.Cluster, SnapshotOrderWindow)
		}
		for _, t := range []struct {
			table objectTable
			rows  []objectRow
		}{{podTable, pods}, {workloadTable, workloads}} {
			r, err := s.replaceRows(ctx, tx, t.table, snap.Cluster, t.rows)
			if err != nil {
				return err
			}
			res.Inserted += r.Inserted
			res.Updated += r.Updated
			res.Deleted += r.Deleted
		}
		_, err := tx.ExecContext(ctx, s.q(`UPDATE manent_clusters SET last_report_at = ?, reported_at = ?, pods = ?, workloads = ? WHERE name = ?`),
			fmtTime(receivedAt), fmtTime(snap.Time), len(pods), len(workloads), snap.Cluster)
		return err
	})
	return res, err
}

// objectTable describes a table of reported objects: its name and the
// columns of its key after `cluster`.
type objectTable struct {
	name string
	key  []string
}

var (
	podTable      = objectTable{name: "manent_cluster_pods", key: []string{"namespace", "name"}}
	workloadTable = objectTable{name: "manent_cluster_workloads", key: []string{"kind", "namespace", "name"}}
)

// objectRow is one reported object ready to store.
type objectRow struct {
	key                []string
	deployID, app, env string
	hash, data         string
}

func newObjectRow(v any, deployID, app, env string, key ...string) (objectRow, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return objectRow{}, fmt.Errorf("encode %s: %w", strings.Join(key, "/"), err)
	}
	sum := sha256.Sum256(b)
	return objectRow{key: key, deployID: deployID, app: app, env: env, hash: hex.EncodeToString(sum[:16]), data: string(b)}, nil
}

// ingestBatch is how many rows one INSERT or DELETE statement carries
// (at most 8 parameters a row: far below SQLite's and PostgreSQL's limits).
const ingestBatch = 500

// replaceRows diffs rows against the stored ones of cluster by key and
// hash, then deletes the absent and upserts the new and changed, in batches.
func (s *Store) replaceRows(ctx context.Context, tx *sql.Tx, t objectTable, cluster string, rows []objectRow) (IngestResult, error) {
	var res IngestResult
	keyCols := strings.Join(t.key, ", ")
	q, err := tx.QueryContext(ctx, s.q(`SELECT `+keyCols+`, hash FROM `+t.name+` WHERE cluster = ?`), cluster)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", t.name, err)
	}
	stored := map[string]string{}
	storedKeys := map[string][]string{}
	for q.Next() {
		vals := make([]string, len(t.key)+1)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := q.Scan(ptrs...); err != nil {
			q.Close()
			return res, err
		}
		k := strings.Join(vals[:len(t.key)], "\x00")
		stored[k] = vals[len(t.key)]
		storedKeys[k] = vals[:len(t.key)]
	}
	q.Close()
	if err := q.Err(); err != nil {
		return res, err
	}

	var upserts []objectRow
	for _, r := range rows {
		k := strings.Join(r.key, "\x00")
		h, ok := stored[k]
		delete(storedKeys, k)
		switch {
		case !ok:
			res.Inserted++
			upserts = append(upserts, r)
		case h != r.hash:
			res.Updated++
			upserts = append(upserts, r)
		}
	}
	var gone [][]string
	for _, k := range storedKeys {
		gone = append(gone, k)
	}
	res.Deleted = len(gone)

	tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(t.key)), ", ") + ")"
	for start := 0; start < len(gone); start += ingestBatch {
		batch := gone[start:min(start+ingestBatch, len(gone))]
		args := make([]any, 0, 1+len(batch)*len(t.key))
		args = append(args, cluster)
		tuples := make([]string, len(batch))
		for i, k := range batch {
			tuples[i] = tuple
			for _, v := range k {
				args = append(args, v)
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+t.name+` WHERE cluster = ? AND (`+keyCols+`) IN (VALUES `+strings.Join(tuples, ", ")+`)`), args...); err != nil {
			return res, fmt.Errorf("delete from %s: %w", t.name, err)
		}
	}

	cols := "cluster, " + keyCols + ", deploy_id, application, environment, hash, data"
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(t.key)+6), ", ") + ")"
	set := "deploy_id = excluded.deploy_id, application = excluded.application, environment = excluded.environment, hash = excluded.hash, data = excluded.data"
	for start := 0; start < len(upserts); start += ingestBatch {
		batch := upserts[start:min(start+ingestBatch, len(upserts))]
		args := make([]any, 0, len(batch)*(len(t.key)+6))
		values := make([]string, len(batch))
		for i, r := range batch {
			values[i] = row
			args = append(args, cluster)
			for _, v := range r.key {
				args = append(args, v)
			}
			args = append(args, r.deployID, r.app, r.env, r.hash, r.data)
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO `+t.name+` (`+cols+`) VALUES `+strings.Join(values, ", ")+
			` ON CONFLICT (cluster, `+keyCols+`) DO UPDATE SET `+set), args...); err != nil {
			return res, fmt.Errorf("write %s: %w", t.name, err)
		}
	}
	return res, nil
}

// ClusterStatus returns a cluster as last reported: its pods, and its
// workloads beside the deploys their manent.io/deploy-id labels name, each
// with its state (clusterstate.Evaluate). ErrNotFound when the cluster never
// reported.
func (s *Store) ClusterStatus(ctx context.Context, cluster string) (*clusterstate.Status, error) {
	st := &clusterstate.Status{Cluster: cluster, Pods: []clusterstate.Pod{}, Workloads: []clusterstate.WorkloadStatus{}}
	var last, reported string
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT last_report_at, reported_at FROM manent_clusters WHERE name = ?`), cluster).Scan(&last, &reported)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if t := parseTime(sql.NullString{String: last, Valid: true}); t != nil {
		st.LastReportAt = *t
	}
	if t := parseTime(sql.NullString{String: reported, Valid: true}); t != nil {
		st.ReportedAt = *t
	}
	st.Pods, err = s.reportedPods(ctx, `WHERE cluster = ? ORDER BY namespace, name`, cluster)
	if err != nil {
		return nil, err
	}
	workloads, err := s.reportedWorkloads(ctx, `WHERE w.cluster = ? ORDER BY w.namespace, w.kind, w.name`, cluster)
	if err != nil {
		return nil, err
	}
	byDeploy := map[string][]clusterstate.Pod{}
	for _, p := range st.Pods {
		byDeploy[p.DeployID] = append(byDeploy[p.DeployID], p)
	}
	for _, w := range workloads {
		st.Workloads = append(st.Workloads, clusterstate.Evaluate(w.Workload, w.Declared, byDeploy[w.DeployID]))
	}
	return st, nil
}

// ClusterSummary is a cluster as its agent last reported it, without its
// objects: when, and how many pods and workloads.
type ClusterSummary struct {
	Name string
	// LastReportAt is when the server received the last snapshot,
	// ReportedAt when the agent read the cluster for it.
	LastReportAt, ReportedAt time.Time
	Pods, Workloads          int
}

// Clusters lists the clusters that have reported, by name.
func (s *Store) Clusters(ctx context.Context) ([]ClusterSummary, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, last_report_at, reported_at, pods, workloads FROM manent_clusters ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read clusters: %w", err)
	}
	defer rows.Close()
	out := []ClusterSummary{}
	for rows.Next() {
		var c ClusterSummary
		var last, reported string
		if err := rows.Scan(&c.Name, &last, &reported, &c.Pods, &c.Workloads); err != nil {
			return nil, err
		}
		if t := parseTime(sql.NullString{String: last, Valid: true}); t != nil {
			c.LastReportAt = *t
		}
		if t := parseTime(sql.NullString{String: reported, Valid: true}); t != nil {
			c.ReportedAt = *t
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ClusterScope counts a cluster's objects of one application/environment.
type ClusterScope struct {
	Application, Environment string
	Pods, Workloads          int
}

// ClusterScopes counts each cluster's objects per application/environment,
// by cluster; objects without both labels are in no scope.
func (s *Store) ClusterScopes(ctx context.Context) (map[string][]ClusterScope, error) {
	type key struct{ cluster, app, env string }
	counts := map[key]*ClusterScope{}
	var order []key
	for _, table := range []string{"manent_cluster_pods", "manent_cluster_workloads"} {
		if err := func() error {
			rows, err := s.rdb.QueryContext(ctx, `SELECT cluster, application, environment, COUNT(*) FROM `+table+
				` WHERE application <> '' AND environment <> '' GROUP BY cluster, application, environment`)
			if err != nil {
				return fmt.Errorf("count %s: %w", table, err)
			}
			defer rows.Close()
			for rows.Next() {
				var k key
				var n int
				if err := rows.Scan(&k.cluster, &k.app, &k.env, &n); err != nil {
					return err
				}
				sc := counts[k]
				if sc == nil {
					sc = &ClusterScope{Application: k.app, Environment: k.env}
					counts[k] = sc
					order = append(order, k)
				}
				if table == "manent_cluster_pods" {
					sc.Pods += n
				} else {
					sc.Workloads += n
				}
			}
			return rows.Err()
		}(); err != nil {
			return nil, err
		}
	}
	out := map[string][]ClusterScope{}
	for _, k := range order {
		out[k.cluster] = append(out[k.cluster], *counts[k])
	}
	return out, nil
}

// Observe returns what is known of deployID on cluster: when the cluster
// last reported, the deploy as declared, and only the objects labelled with
// deployID (clusterstate.Source).
func (s *Store) Observe(ctx context.Context, cluster, deployID string) (clusterstate.Observation, error) {
	o := clusterstate.Observation{Cluster: cluster}
	var last string
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT last_report_at FROM manent_clusters WHERE name = ?`), cluster).Scan(&last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return o, err
	default:
		o.Reported = true
		if t := parseTime(sql.NullString{String: last, Valid: true}); t != nil {
			o.LastReportAt = *t
		}
	}
	var d clusterstate.Declared
	var state string
	err = s.rdb.QueryRowContext(ctx, s.q(`SELECT id, application, environment, version, state FROM manent_deployments WHERE id = ?`), deployID).
		Scan(&d.DeployID, &d.Application, &d.Environment, &d.Version, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return o, err
	default:
		d.State = manent.State(state)
		o.Declared = &d
	}
	if o.Pods, err = s.reportedPods(ctx, `WHERE cluster = ? AND deploy_id = ? ORDER BY namespace, name`, cluster, deployID); err != nil {
		return o, err
	}
	workloads, err := s.reportedWorkloads(ctx, `WHERE w.cluster = ? AND w.deploy_id = ? ORDER BY w.namespace, w.kind, w.name`, cluster, deployID)
	if err != nil {
		return o, err
	}
	for _, w := range workloads {
		o.Workloads = append(o.Workloads, w.Workload)
	}
	if o.Declared != nil {
		// An object labelled with the deploy's id but another application
		// or environment is not the deploy's: whoever may create objects
		// in a watched namespace must not fail (or pass) another team's
		// step by copying its deploy id.
		o.Pods = slices.DeleteFunc(o.Pods, func(p clusterstate.Pod) bool { return !sameOwner(p.Application, p.Environment, o.Declared) })
		o.Workloads = slices.DeleteFunc(o.Workloads, func(w clusterstate.Workload) bool {
			return !sameOwner(w.Application, w.Environment, o.Declared)
		})
	}
	return o, nil
}

func (s *Store) reportedPods(ctx context.Context, where string, args ...any) ([]clusterstate.Pod, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT data FROM manent_cluster_pods `+where), args...)
	if err != nil {
		return nil, fmt.Errorf("read pods: %w", err)
	}
	defer rows.Close()
	out := []clusterstate.Pod{}
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var p clusterstate.Pod
		if err := json.Unmarshal([]byte(data), &p); err != nil {
			return nil, fmt.Errorf("decode stored pod: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

type declaredWorkload struct {
	clusterstate.Workload
	Declared *clusterstate.Declared
}

// sameOwner reports whether an object's application and environment
// labels do not name another application or environment than d's (an
// object without them is taken at its deploy id's word).
func sameOwner(application, environment string, d *clusterstate.Declared) bool {
	return (application == "" || application == d.Application) && (environment == "" || environment == d.Environment)
}

// reportedWorkloads reads workloads with the deploy their deploy_id label
// names, unless their labels name another application or environment
// than that deploy's (sameOwner): a workload labelled for one application
// with another's deploy id must not show that deploy (its version, its
// state) to whoever may read the first.
func (s *Store) reportedWorkloads(ctx context.Context, where string, args ...any) ([]declaredWorkload, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT w.data, d.id, d.application, d.environment, d.version, d.state
		FROM manent_cluster_workloads w LEFT JOIN manent_deployments d ON d.id = w.deploy_id
		AND (w.application = '' OR w.application = d.application) AND (w.environment = '' OR w.environment = d.environment) `+where), args...)
	if err != nil {
		return nil, fmt.Errorf("read workloads: %w", err)
	}
	defer rows.Close()
	var out []declaredWorkload
	for rows.Next() {
		var data string
		var id, app, env, version, state sql.NullString
		if err := rows.Scan(&data, &id, &app, &env, &version, &state); err != nil {
			return nil, err
		}
		var w declaredWorkload
		if err := json.Unmarshal([]byte(data), &w.Workload); err != nil {
			return nil, fmt.Errorf("decode stored workload: %w", err)
		}
		if id.Valid {
			w.Declared = &clusterstate.Declared{DeployID: id.String, Application: app.String, Environment: env.String,
				Version: version.String, State: manent.State(state.String)}
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// SetStepNotice shows notice in the output of a RUNNING step (and records a
// step event), or clears it with "". A step no longer running is left alone.
func (s *Store) SetStepNotice(ctx context.Context, id, step, notice string) error {
	return s.Tx(ctx, func(tx *sql.Tx) error {
		var out any
		if notice != "" {
			b, _ := json.Marshal(map[string]string{"notice": notice})
			out = string(b)
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE manent_steps SET output = ? WHERE deployment_id = ? AND name = ? AND state = ?`),
			out, id, step, string(manent.StepRunning))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		st, err := s.step(ctx, tx, id, step)
		if err != nil {
			return err
		}
		_, err = s.appendEvent(ctx, tx, id, EventStep, time.Now(), st)
		return err
	})
}

package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// Every route's answer decodes into pkg/api's types with no unknown field
// and encodes back to the same JSON: pkg/api is the one wire contract, and
// the server writes nothing the client types do not hold.
func TestWireRoundTrip(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	art := artifactFile(t)

	res, err := c.Submit(ctx, simple(art, "staging", "1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID
	waitFor(t, c, id, manent.StateSuccess)
	if _, err := c.Submit(ctx, simple(art, "prod", "1", "schedule: {cron: \"@weekly\"}\n"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Report(ctx, &clusterstate.Snapshot{Cluster: "c1", Time: time.Now().UTC(),
		Pods: []clusterstate.Pod{runningPod("billing-1", id)}, Workloads: []clusterstate.Workload{billing(id, "1", "Current", 3)}}); err != nil {
		t.Fatal(err)
	}

	routes := []struct {
		method, path, body string
		status             int
		into               any
	}{
		{"GET", "/api/v1/deployments", "", 200, &api.ListResult{}},
		{"GET", "/api/v1/deployments/" + id, "", 200, &manent.Deployment{}},
		{"GET", "/api/v1/deployments/" + id + "/steps", "", 200, &api.StepsResult{}},
		{"GET", "/api/v1/deployments/" + id + "/effective", "", 200, &api.EffectiveResult{}},
		{"GET", "/api/v1/deployments/" + id + "/logs", "", 200, &api.LogsResult{}},
		{"GET", "/api/v1/activity", "", 200, &api.ActivityResult{}},
		{"GET", "/api/v1/inventory", "", 200, &api.InventoryResult{}},
		{"GET", "/api/v1/schedules", "", 200, &api.SchedulesResult{}},
		{"GET", "/api/v1/audit", "", 200, &api.AuditResult{}},
		{"GET", "/api/v1/workers", "", 200, &api.WorkersResult{}},
		{"GET", "/api/v1/clusters", "", 200, &api.ClustersResult{}},
		{"GET", "/api/v1/clusters/c1/status", "", 200, &clusterstate.Status{}},
		{"GET", "/healthz", "", 200, &api.Health{}},
		{"GET", "/readyz", "", 200, &api.Health{}},
		{"POST", "/api/v1/deployments?dry_run=true", string(simple(art, "staging", "2", "")), 200, &api.SubmitResult{}},
		{"POST", "/api/v1/deployments", string(simple(art, "staging", "3", "")), 202, &api.SubmitResult{}},
		{"POST", "/api/v1/deployments", string(simple(art, "qa", "1", "schedule: {cron: \"@daily\"}\n")), 201, &api.SubmitResult{}},
		{"POST", "/api/v1/deployments/" + id + "/cancel", "", 409, &api.Problem{}},
		{"GET", "/api/v1/deployments/dpl_nope", "", 404, &api.Problem{}},
		{"POST", "/api/v1/deployments", "apiVersion: manent/v1\n", 422, &api.Problem{}},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			status, body, _ := do(t, rt.method, srv.URL+rt.path, "admin-token", rt.body)
			if status != rt.status {
				t.Fatalf("status %d, want %d: %s", status, rt.status, body)
			}
			roundTrip(t, body, rt.into)
		})
	}

	// Server-Sent Events: each data line is an api.Event.
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/deployments/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			roundTrip(t, []byte(data), &api.Event{})
			n++
		}
	}
	if n == 0 {
		t.Fatal("no event in the stream of a finished deploy")
	}
}

// roundTrip decodes body strictly into v and checks that v encodes back to
// the same JSON document.
func roundTrip(t *testing.T, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode into %T: %v\n%s", v, err, body)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%T does not round-trip:\nserver %s\nclient %s", v, body, again)
	}
}

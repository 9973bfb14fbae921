package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// A step's row in manent's tables and its DBOS checkpoint are written in
// one transaction (dbos.RecordStepOutcome): every step manent shows ended
// has its checkpoint, with the output manent shows. A deploy with nothing
// to announce (no callback, chat or change ticket) enqueues no announce
// workflow.
func TestStepRowAndCheckpointTogether(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, sum := f.artifact("app-1", "version one")
		id := f.submit(descriptorYAML("billing", "staging", "1.0", url, sum, ""))
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateSuccess {
			t.Fatalf("state = %s (%s), want SUCCESS", rec.State, rec.Error)
		}
		query := `SELECT function_name, output FROM operation_outputs WHERE workflow_uuid = ?`
		if f.st.Postgres() {
			query = `SELECT function_name, output FROM dbos.operation_outputs WHERE workflow_uuid = $1`
		}
		rows, err := f.st.DB().QueryContext(context.Background(), query, id)
		if err != nil {
			t.Fatal(err)
		}
		outputs := map[string]string{}
		for rows.Next() {
			var name string
			var out *string
			if err := rows.Scan(&name, &out); err != nil {
				t.Fatal(err)
			}
			if out != nil {
				outputs[name] = *out
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		for _, s := range rec.Steps {
			raw, ok := outputs[s.Name]
			if !ok {
				t.Errorf("step %s: no DBOS checkpoint", s.Name)
				continue
			}
			// DBOS's JSON serializer stores base64 of the JSON.
			dec, err := base64.StdEncoding.DecodeString(raw)
			if err != nil {
				t.Errorf("step %s: checkpoint %q: %v", s.Name, raw, err)
				continue
			}
			var cp struct {
				Output json.RawMessage `json:"output"`
			}
			if err := json.Unmarshal(dec, &cp); err != nil {
				t.Errorf("step %s: checkpoint %q: %v", s.Name, raw, err)
				continue
			}
			var a, b bytes.Buffer
			_ = json.Compact(&a, cp.Output)
			_ = json.Compact(&b, s.Output)
			if a.String() != b.String() {
				t.Errorf("step %s: checkpoint output %s, manent shows %s", s.Name, a.String(), b.String())
			}
		}
		// The finish step's commit also set the workflow's attributes: the
		// outcome merged into those given at submission.
		aq := `SELECT attributes FROM workflow_status WHERE workflow_uuid = ?`
		if f.st.Postgres() {
			aq = `SELECT attributes::text FROM dbos.workflow_status WHERE workflow_uuid = $1`
		}
		var rawAttrs string
		if err := f.st.DB().QueryRowContext(context.Background(), aq, id).Scan(&rawAttrs); err != nil {
			t.Fatal(err)
		}
		var attrs map[string]any
		if err := json.Unmarshal([]byte(rawAttrs), &attrs); err != nil {
			t.Fatalf("attributes %q: %v", rawAttrs, err)
		}
		if attrs["outcome"] != string(manent.StateSuccess) || attrs["sha256"] != sum || attrs["application"] != "billing" {
			t.Errorf("workflow attributes %v: want outcome SUCCESS, sha256 %s and application billing", attrs, sum)
		}
		wfs, err := f.eng.DeployWorkflows(id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(wfs, id+".finish") {
			t.Errorf("workflows %v: an announce workflow for a deploy with nothing to announce", wfs)
		}
	})
}

package server

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

func TestOrdinal(t *testing.T) {
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 22: "22nd", 101: "101st", 111: "111th"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestQueueSlots(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	rec := func(id, app, env string, st manent.State, sec int) store.Record {
		return store.Record{Deployment: manent.Deployment{ID: id, Application: app, Environment: env, State: st, CreatedAt: t0.Add(time.Duration(sec) * time.Second)}}
	}
	tests := []struct {
		name string
		recs []store.Record
		want map[string]string // id -> reason
	}{
		{
			name: "alone in the queue",
			recs: []store.Record{rec("a", "billing", "prod", manent.StateEnqueued, 0)},
			want: map[string]string{"a": "queued: 1st in billing/prod, waiting for a free worker slot"},
		},
		{
			name: "behind the running deploy, then behind the queued one",
			recs: []store.Record{
				rec("q2", "billing", "prod", manent.StateEnqueued, 3),
				rec("run", "billing", "prod", manent.StatePending, 5), // started later than q1 was queued: still first
				rec("q1", "billing", "prod", manent.StateEnqueued, 2),
			},
			want: map[string]string{
				"q1": "queued: 2nd in billing/prod, behind run (PENDING)",
				"q2": "queued: 3rd in billing/prod, behind q1 (ENQUEUED)",
			},
		},
		{
			name: "partitions and waiting states are apart",
			recs: []store.Record{
				rec("run", "billing", "prod", manent.StatePending, 0),
				rec("other", "billing", "staging", manent.StateEnqueued, 1),
				rec("approval", "billing", "prod", manent.StateAwaitingApproval, 2),
				rec("web", "web", "prod", manent.StateEnqueued, 3),
			},
			want: map[string]string{
				"other": "queued: 1st in billing/staging, waiting for a free worker slot",
				"web":   "queued: 1st in web/prod, waiting for a free worker slot",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := queueSlots(tt.recs, nil)
			if len(got) != len(tt.want) {
				t.Errorf("got %d slots %v, want %d", len(got), got, len(tt.want))
			}
			for id, want := range tt.want {
				if got[id].reason != want {
					t.Errorf("%s: got %q, want %q", id, got[id].reason, want)
				}
			}
		})
	}
}

func TestStreamParams(t *testing.T) {
	tests := []struct {
		name      string
		url       string
		header    string
		wantLast  int64
		wantTypes []string
		wantErr   bool
	}{
		{name: "none", url: "/x"},
		{name: "header", url: "/x", header: "7", wantLast: 7},
		{name: "query", url: "/x?last_event_id=9", wantLast: 9},
		{name: "header beats query", url: "/x?last_event_id=9", header: "4", wantLast: 4},
		{name: "not a number", url: "/x", header: "dpl_1:3", wantErr: true},
		{name: "negative", url: "/x?last_event_id=-1", wantErr: true},
		{name: "types", url: "/x?types=log,state", wantTypes: []string{"done", "log", "state"}},
		{name: "unknown type", url: "/x?types=log,bogus", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.url, nil)
			if tt.header != "" {
				r.Header.Set("Last-Event-ID", tt.header)
			}
			last, types, err := streamParams(r)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				if manent.ErrorCode(err) != manent.EInvalid {
					t.Errorf("code = %s, want invalid", manent.ErrorCode(err))
				}
				return
			}
			if last != tt.wantLast {
				t.Errorf("last = %d, want %d", last, tt.wantLast)
			}
			if len(types) != len(tt.wantTypes) {
				t.Errorf("types = %v, want %v", types, tt.wantTypes)
			}
			for _, ty := range tt.wantTypes {
				if !types[ty] {
					t.Errorf("types = %v, want %v", types, tt.wantTypes)
				}
			}
		})
	}
}

// What a running deploy whose cancel was asked for says it waits for: a
// step it lets complete, a wait or download it cuts at once, a rollback.
func TestCancelRequestedReason(t *testing.T) {
	run := func(names ...string) []manent.Step {
		var out []manent.Step
		for i, n := range names {
			st := manent.Step{Name: n, State: manent.StepSuccess}
			if i == len(names)-1 {
				st.State = manent.StepRunning
			}
			out = append(out, st)
		}
		return append(out, manent.Step{Name: "activation", State: manent.StepPending})
	}
	for _, tt := range []struct {
		steps []manent.Step
		want  string
	}{
		{run("config", "deploy"), "step deploy ends first (a running step is never cut short)"},
		{run("config", "artifacts"), "the artifact download stops within a second"},
		{run("config", "approval[rest]"), "the wait of approval[rest] ends now"},
		{run("config", "rollback:deploy[canary]"), "rollback:deploy[canary], rolling back what the deploy changed, completes first"},
	} {
		if got := cancelRequestedReason(tt.steps); !strings.Contains(got, tt.want) {
			t.Errorf("running %s: %q, want %q", tt.steps[len(tt.steps)-2].Name, got, tt.want)
		}
	}
}

// A deploy whose worker died keeps what it last said after the worker's
// replacement: a deploy between waves awaiting approval does not lose it.
func TestDeadWorkerReasonKeepsTheLastRecorded(t *testing.T) {
	w := store.Worker{ID: "w2", State: store.WorkerAlive, LastSeen: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	was := "wave rest awaits approval (0/1 of sre) until 2026-12-04T12:00:00Z"
	got := deadWorkerReason(w, true, was)
	want := "worker w2 to be replaced: it is silent (last seen 2026-12-04T10:00:00Z); another worker takes the deploy over within workers.dead_after + 15 s (last recorded: " + was + ")"
	if got != want {
		t.Errorf("deadWorkerReason =\n %q, want\n %q", got, want)
	}
	if got := deadWorkerReason(w, false, ""); strings.Contains(got, "last recorded") || !strings.Contains(got, "this server takes the deploy over when it starts again") {
		t.Errorf("deadWorkerReason on SQLite with nothing recorded = %q", got)
	}
}

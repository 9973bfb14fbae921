package admit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// A deploy with schedule.at starts at that time: freezes are judged then,
// not at submission. One scheduled for after a freeze is admitted during
// it; one scheduled into a freeze is refused at submission, naming the
// freeze, instead of waiting for its time to end ERROR at config. A time
// already past (beyond a little clock skew) is refused: it is not "now".
func TestScheduleAtJudgedAtItsTime(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	at := func(d time.Duration) string {
		return fmt.Sprintf("schedule: {at: %q}\n", now.Add(d).Format(time.RFC3339))
	}
	rules, err := governance.ParseRules("g.yaml", []byte(fmt.Sprintf(`freezes:
  - {name: incident, environments: [prod], from: %s, to: %s, allow: ["token:lead"]}
  - {name: year-end, environments: [prod], from: %s, to: %s, allow: ["token:lead"]}
`, now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339),
		now.Add(3*time.Hour).Format(time.RFC3339), now.Add(5*time.Hour).Format(time.RFC3339))))
	if err != nil {
		t.Fatal(err)
	}
	f := newAdmitter(t, admit.Config{Trial: true, Governance: rules})
	ctx := context.Background()
	refusal := func(extra string, id manent.Identity) map[string]string {
		t.Helper()
		adm, err := f.a.Admit(ctx, admit.Request{Descriptor: f.descriptor(t, extra), Identity: id})
		var me *manent.Error
		if err == nil {
			t.Logf("admitted: waits %+v, decision %+v", adm.Input.Waits, adm.Decision)
			return nil
		}
		if !errors.As(err, &me) || me.Code != manent.EInvalid {
			t.Fatalf("%s: %v, want a 422 or an admission", extra, err)
		}
		out := map[string]string{}
		for _, fe := range me.Fields {
			out[fe.Path] = fe.Message
		}
		return out
	}

	// Scheduled after the incident freeze, during it: admitted.
	if got := refusal(at(2*time.Hour), ci); got != nil {
		t.Errorf("scheduled after the current freeze: refused %v, want it admitted (it starts once the freeze is over)", got)
	}
	// Scheduled into the year-end freeze: refused now, at /schedule/at.
	got := refusal(at(4*time.Hour), ci)
	want := fmt.Sprintf(`prod is frozen by "year-end" until %s`, now.Add(5*time.Hour).Format(time.RFC3339))
	if msg := got["/schedule/at"]; !strings.Contains(msg, want) || !strings.Contains(msg, now.Add(4*time.Hour).Format(time.RFC3339)) || len(got) != 1 {
		t.Errorf("scheduled into a freeze: problems %v, want /schedule/at alone saying %q at the scheduled time", got, want)
	}
	// It has a schedule.at already: it is told to schedule it later, not
	// to add one.
	if msg := got["/schedule/at"]; !strings.HasSuffix(msg, want+": schedule it from then on") || strings.Contains(msg, "add schedule") {
		t.Errorf("scheduled into a freeze: %q, want it to end %q", msg, want+": schedule it from then on")
	}
	// The identity the freeze allows breaks the glass at that time.
	if got := refusal(at(4*time.Hour), manent.Identity{Subject: "token:lead"}); got != nil {
		t.Errorf("break glass into a scheduled freeze: refused %v", got)
	}
	// Not scheduled, during the incident freeze: refused as always.
	if got := refusal("", ci); !strings.Contains(got["/environment"], `frozen by "incident"`) {
		t.Errorf("during a freeze: problems %v, want the freeze at /environment", got)
	}
	// A time already past.
	got = refusal(at(-2*time.Hour), ci)
	if msg := got["/schedule/at"]; !strings.Contains(msg, "is already past") || !strings.Contains(msg, "remove schedule.at to deploy now") {
		t.Errorf("schedule.at 2 h ago: problems %v, want /schedule/at refused as past", got)
	}
	// A minute ago is the clocks differing: it runs now, and is then frozen
	// like any deploy submitted now.
	if got := refusal(at(-time.Minute), ci); !strings.Contains(got["/environment"], `frozen by "incident"`) || got["/schedule/at"] != "" {
		t.Errorf("schedule.at a minute ago: problems %v, want it judged as now (frozen by incident)", got)
	}
}

// A dry run of a recurring deploy (schedule.cron) checks what creating the
// schedule checks, as the submission does (AdmitSchedule): governance is
// decided at each tick. It was decided now: a freeze of today refused the
// dry run of a schedule the submission then created.
func TestDryRunOfAScheduleIsJudgedAsItsCreation(t *testing.T) {
	rules, err := governance.ParseRules("g.yaml", []byte(fmt.Sprintf(
		"freezes:\n  - {name: now, environments: [prod], from: %s, to: %s}\n",
		time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))))
	if err != nil {
		t.Fatal(err)
	}
	f := newAdmitter(t, admit.Config{Trial: true, Governance: rules})
	d := f.descriptor(t, "schedule: {cron: \"0 3 * * *\"}\n")
	created, err := f.a.AdmitSchedule(context.Background(), admit.Request{Descriptor: d, Identity: ci})
	if err != nil {
		t.Fatalf("creating the schedule: %v", err)
	}
	dry, err := f.a.Admit(context.Background(), admit.Request{Descriptor: d, Identity: ci, DryRun: true})
	if err != nil {
		t.Fatalf("dry run of the schedule: %v, want it admitted as its creation is", err)
	}
	if dry.Decision.Allowed != created.Decision.Allowed || dry.Decision.Source != created.Decision.Source {
		t.Fatalf("dry run decision %+v, the creation's %+v", dry.Decision, created.Decision)
	}
}

// A schedule.at more than a year ahead is refused at /schedule/at: its gate
// would wake every few minutes for years, and one whose UTC time is past
// year 9999 (9999-12-31T23:59:59-23:59 is 10000-01-01 in UTC) could not be
// saved at all — the submission answered 500.
func TestScheduleAtFarAheadIsRefused(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	for _, tc := range []struct {
		at      string
		refused bool
	}{
		{now.Add(300 * 24 * time.Hour).Format(time.RFC3339), false},
		{now.AddDate(1, 0, 0).Add(-time.Hour).Format(time.RFC3339), false},
		{now.AddDate(1, 0, 1).Format(time.RFC3339), true},
		{"9999-12-31T23:59:59Z", true},
		{"9999-12-31T23:59:59-23:59", true},
	} {
		t.Run(tc.at, func(t *testing.T) {
			_, err := f.a.Admit(ctx, admit.Request{Descriptor: f.descriptor(t, fmt.Sprintf("schedule: {at: %q}\n", tc.at)), Identity: ci})
			if !tc.refused {
				if err != nil {
					t.Fatalf("schedule.at %s: %v, want it admitted", tc.at, err)
				}
				return
			}
			var me *manent.Error
			if !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/schedule/at" ||
				!strings.Contains(me.Fields[0].Message, "more than a year ahead") || !strings.Contains(me.Fields[0].Message, "the server's clock says") {
				t.Fatalf("schedule.at %s: %v (%+v), want a 422 at /schedule/at saying it is more than a year ahead", tc.at, err, me)
			}
		})
	}
}

// QA: a deploy refused by a freeze said which freeze and until when, but
// not what to do: a release manager in their first week resubmitted by
// hand, or waited without knowing a deploy can be scheduled for the
// reopening (schedule.at is judged at its time, above). The refusal now
// says both, with the reopening instant to paste; and the suggested
// schedule.at is admitted.
func TestFreezeRefusalSaysWhatToDo(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	until := now.Add(2 * time.Hour).Format(time.RFC3339)
	rules, err := governance.ParseRules("g.yaml", []byte(fmt.Sprintf("freezes:\n  - {name: maintenance, environments: [prod], from: %s, to: %s}\n",
		now.Add(-time.Hour).Format(time.RFC3339), until)))
	if err != nil {
		t.Fatal(err)
	}
	f := newAdmitter(t, admit.Config{Trial: true, Governance: rules})
	_, err = f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, ""), Identity: ci})
	var me *manent.Error
	if !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/environment" {
		t.Fatalf("during the freeze: %v, want a 422 at /environment", err)
	}
	msg := me.Fields[0].Message
	suggested := fmt.Sprintf("schedule: {at: %q}", until)
	for _, want := range []string{`frozen by "maintenance" until ` + until, "submit it again then", suggested} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	if _, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, suggested+"\n"), Identity: ci}); err != nil {
		t.Errorf("the schedule.at the refusal suggests is refused: %v", err)
	}
	// A cron tick's refusal, recorded on its schedule (whose next tick
	// comes by itself), names the freeze and gives no such advice.
	sc := &store.Schedule{ID: "sch_1", Requester: "token:ci",
		Descriptor: []byte("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: " + f.art + "}\nschedule: {cron: \"@daily\"}\n")}
	_, err = f.a.Tick(context.Background(), sc, "sch_1@2026-12-06T00:00:00Z")
	if err == nil || !strings.Contains(err.Error(), `frozen by "maintenance" until `+until) || strings.Contains(err.Error(), "submit it again") || strings.Contains(err.Error(), "schedule:") {
		t.Errorf("a tick during the freeze: %v, want the freeze named without advice to submit again", err)
	}
}

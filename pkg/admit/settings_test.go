package admit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// pickyTarget refuses every setting of its `with`, each on its own
// (plugin.SettingError), in key order: a plugin's Validate at its most
// talkative.
type pickyTarget struct{}

func (pickyTarget) Validate(with map[string]any) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(with)) {
		errs = append(errs, plugin.Settingf(plugin.SettingPath(k), "with.%s is not a setting", k))
	}
	return fmt.Errorf("picky: %w", errors.Join(errs...))
}
func (pickyTarget) Live(context.Context, plugin.Context) (json.RawMessage, error) { return nil, nil }
func (pickyTarget) Deploy(context.Context, plugin.Context) (plugin.Result, error) { return nil, nil }
func (pickyTarget) Activate(context.Context, plugin.Context) (plugin.Result, error) {
	return nil, nil
}
func (pickyTarget) Health(context.Context, plugin.Context) (plugin.Result, error) { return nil, nil }
func (pickyTarget) RollbackDeploy(context.Context, plugin.Context, json.RawMessage) (plugin.Result, error) {
	return nil, nil
}
func (pickyTarget) RollbackActivation(context.Context, plugin.Context, json.RawMessage) (plugin.Result, error) {
	return nil, nil
}

// A plugin's refused settings are reported one per setting at the
// setting's path, without the plugin's own prefix; a hostile `with` of
// hundreds of keys, one of them 1,000 bytes long (YAML's longest implicit
// key is 1,024), is answered with at most 100
// problems, each bounded, the last saying how many more there are.
func TestRefusedSettingsPlacedAndBounded(t *testing.T) {
	reg := plugin.NewRegistry()
	if err := reg.RegisterTarget("picky", pickyTarget{}); err != nil {
		t.Fatal(err)
	}
	a, err := admit.New(admit.Config{Store: newAdmitterStore(t), Plugins: reg, Sources: urlpolicy.TrialSources(), Trial: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{a: a, art: newAdmitter(t, admit.Config{Trial: true}).art}

	refusal := func(with string) *manent.Error {
		t.Helper()
		d, perr := descriptor.Parse([]byte("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: " + f.art + "}\ntarget: {plugin: picky, with: {" + with + "}}\n"))
		if perr != nil {
			var pe *manent.Error
			errors.As(perr, &pe)
			t.Fatalf("parse of %d bytes of with: %+v", len(with), pe.Fields)
		}
		_, err := a.Admit(context.Background(), admit.Request{Descriptor: d, Identity: ci, DryRun: true})
		var me *manent.Error
		if !errors.As(err, &me) || me.Code != manent.EInvalid {
			t.Fatalf("got %v, want a 422", err)
		}
		return me
	}

	me := refusal("a: 1, b/c: 2")
	want := []manent.FieldError{
		{Path: "/target/with/a", Message: "target picky: with.a is not a setting"},
		{Path: "/target/with/b~1c", Message: "target picky: with.b/c is not a setting"},
	}
	if !slices.Equal(me.Fields, want) {
		t.Fatalf("fields %+v, want %+v", me.Fields, want)
	}
	if me.Message != "the deploy was refused: 2 problems" {
		t.Errorf("message %q, want the count in words", me.Message)
	}
	if me := refusal("a: 1"); me.Message != "the deploy was refused: 1 problem" {
		t.Errorf("message %q, want the singular", me.Message)
	}

	long := strings.Repeat("a", 1000) // sorts first: among the problems shown
	keys := []string{long + ": 0"}
	for i := range 300 {
		keys = append(keys, fmt.Sprintf("k%03d: %d", i, i))
	}
	me = refusal(strings.Join(keys, ", "))
	if len(me.Fields) != 100 {
		t.Fatalf("%d problems, want 100", len(me.Fields))
	}
	if last := me.Fields[99]; last.Message != "… and 202 more problems not shown: fix these and validate again" {
		t.Errorf("last problem %+v: want it to count the 202 not shown", last)
	}
	if !strings.Contains(me.Message, "301 problems") {
		t.Errorf("message %q: want the total, 301", me.Message)
	}
	size := 0
	for _, fe := range me.Fields {
		size += len(fe.Path) + len(fe.Message)
	}
	if size > 100*3*512 {
		t.Errorf("the problems hold %d bytes: each path and message must be bounded", size)
	}
	clipped := false
	for _, fe := range me.Fields {
		clipped = clipped || strings.HasSuffix(fe.Path, "…")
		if len(fe.Path) > 512+len("…") || len(fe.Message) > 1024+len("…") {
			t.Errorf("problem %.60q… of %d+%d bytes: want at most 512+1024", fe.Path, len(fe.Path), len(fe.Message))
		}
	}
	if !clipped {
		t.Errorf("the long key's path is not among the problems, clipped: %+v", me.Fields[:3])
	}
}

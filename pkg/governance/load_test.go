package governance_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
)

func TestParseRulesErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // each line of the error, in order
	}{
		{
			name: "unknown field",
			yaml: "freezes:\n  - name: x\n    from: 2026-01-01T00:00:00Z\n    to: 2026-01-02T00:00:00Z\n    bogus: 1\n",
			want: []string{`g.yaml:5: unknown field "bogus"`},
		},
		{
			name: "syntax error",
			yaml: "freezes:\n  - {name: x\n",
			want: []string{`g.yaml:2:5: the mapping opened with "{" here is not closed`},
		},
		{
			name: "freeze mistakes",
			yaml: `freezes:
  - name: a
    recurring: {timezone: Mars/Olympus, from: "Fri 25:00", to: "Mon 08:00"}
  - name: a
    from: 2026-01-02T00:00:00Z
    to: 2026-01-01T00:00:00Z
  - name: b
    recurring: {from: "Fri 16:00", to: "08:00"}
  - name: c
    environments: ["[prod"]
  - name: d
    from: 2026-01-01
    to: 2026-01-02T00:00:00Z
    recurring: {from: "22:00", to: "22:00"}
`,
			want: []string{
				"g.yaml: 8 problems",
				`g.yaml:3: freezes[0].recurring.timezone: unknown time zone "Mars/Olympus"`,
				`g.yaml:3: freezes[0].recurring.from: "Fri 25:00" is not a time of the week`,
				`g.yaml:4: freezes[1].name: freeze "a" is already defined at freezes[0]`,
				"g.yaml:6: freezes[1].to: must be after from",
				"g.yaml:8: freezes[2].recurring: from and to must both name a day",
				`g.yaml:10: freezes[3].environments[0]: "[prod" is not a valid glob pattern`,
				"g.yaml:9: freezes[3]: a freeze needs from and to",
			},
		},
		{
			name: "other rules",
			yaml: `promotion:
  - {requires: [staging]}
  - {environment: prod}
approvals:
  - {environments: [prod]}
  - {environments: [prod], count: -1, expires: soon}
`,
			want: []string{
				"g.yaml: 5 problems",
				"g.yaml:2: promotion[0]: environment is required",
				"g.yaml:3: promotion[1]: requires must name at least one environment",
				"g.yaml:5: approvals[0]: count is required",
				"g.yaml:6: approvals[1].count: must not be negative",
				`g.yaml:6: approvals[1].expires: "soon" is not a positive duration`,
			},
		},
		{
			// Matched no one, without a word: a deploy waited for an
			// approval no one could give, a freeze let no one through.
			name: "identities that name no one",
			yaml: `freezes:
  - {name: x, from: 2026-01-01T00:00:00Z, to: 2026-01-02T00:00:00Z, allow: ["oidc:*@example.com", alice@example.com]}
approvals:
  - {environments: [prod], count: 1, approvers: [sre, "group:sre", "*"]}
`,
			want: []string{
				"g.yaml: 2 problems",
				`g.yaml:2: freezes[0].allow[1]: "alice@example.com" names no identity, so it matches no one`,
				`g.yaml:4: approvals[0].approvers[0]: "sre" names no identity, so it matches no one`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := governance.ParseRules("g.yaml", []byte(tt.yaml))
			var le *governance.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LoadError", err)
			}
			got := strings.Split(err.Error(), "\n")
			// The freeze with both kinds of window reports that first.
			if tt.name == "freeze mistakes" {
				got = slicesWithout(got, "give either from/to")
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d lines, want %d:\n%s", len(got), len(tt.want), err)
			}
			for i := range tt.want {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("line %d: got %q, want prefix %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// slicesWithout drops the lines containing s.
func slicesWithout(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

func TestParseRulesEmpty(t *testing.T) {
	for _, src := range []string{"", "# nothing\n", "freezes: []\n"} {
		r, err := governance.ParseRules("g.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		d, err := r.Decide(context.Background(), governance.Input{Descriptor: billing("prod")})
		if err != nil || !d.Allowed {
			t.Errorf("%q: got %+v, %v; want allowed", src, d, err)
		}
	}
}

func TestParseRegoErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"syntax", "package manent\n\ndecision := {\n", "p.rego:4: unexpected eof"},
		{"package", "package other\n\ndecision := {}\n", `p.rego:1: the policy must be "package manent", not "data.other"`},
		{"unsafe variable", "package manent\n\ndeny contains msg if {\n\tx == 1\n}\n", "p.rego:3: "},
		{"rego v0 syntax", "package manent\n\ndeny[msg] { msg := \"x\" }\n", "p.rego:3: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := governance.ParseRego("p.rego", tt.src)
			var le *governance.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LoadError", err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) && !strings.Contains(err.Error(), "\n"+tt.want) {
				t.Errorf("got %q, want %q", err, tt.want)
			}
		})
	}
}

// TestRegoShapes: a policy may define `decision` or the separate rules; a
// policy that says not allowed without a reason still denies; a runtime
// error or a wrong shape is an error, never an allow.
func TestRegoShapes(t *testing.T) {
	in := governance.Input{Descriptor: billing("prod"), Identity: manent.Identity{Subject: "token:ci"}}
	tests := []struct {
		name    string
		src     string
		want    string // JSON of the decision without source
		wantErr string
	}{
		{
			name: "partial rules",
			src: `package manent

deny contains msg if {
	input.environment.name == "prod"
	msg := sprintf("%s may not deploy to prod", [input.identity.subject])
}

deny contains "second reason" if true

approvals := {"count": 2, "approvers": ["group:sre"], "expires": "1h"}

change_required if input.environment.name == "prod"

missing_promotions contains "staging" if true

helper := 42
`,
			want: `{"allowed":false,"deny":["second reason","token:ci may not deploy to prod"],"approvals":{"count":2,"approvers":["group:sre"],"expires":"1h0m0s"},"change_required":true,"break_glass":false,"missing_promotions":["staging"]}`,
		},
		{
			name: "empty package allows",
			src:  "package manent\n\nhelper := 1\n",
			want: `{"allowed":true,"change_required":false,"break_glass":false}`,
		},
		{
			name: "not allowed without a reason",
			src:  "package manent\n\ndecision := {\"allowed\": false}\n",
			want: `{"allowed":false,"deny":["denied by the governance policy"],"change_required":false,"break_glass":false}`,
		},
		{
			name: "freeze and break glass",
			src:  "package manent\n\ndecision := {\"freeze\": {\"name\": \"f\", \"reopens_at\": \"2026-01-01T01:00:00+01:00\"}, \"break_glass\": true}\n",
			want: `{"allowed":true,"change_required":false,"freeze":{"name":"f","reopens_at":"2026-01-01T00:00:00Z"},"break_glass":true}`,
		},
		{
			name:    "undefined decision",
			src:     "package manent\n\ndecision := {} if input.environment.name == \"dev\"\n",
			wantErr: "data.manent.decision is undefined",
		},
		{
			name:    "runtime error",
			src:     "package manent\n\ndecision := {\"deny\": [x]} if x := time.parse_rfc3339_ns(\"not a time\")\n",
			wantErr: "evaluate rego:p.rego",
		},
		{
			// Every wrong field at once, in the policy's words, not Go's
			// ("cannot unmarshal string into Go struct field regoDecision.deny").
			name: "wrong shapes",
			src:  "package manent\n\ndecision := {\"deny\": \"one string\", \"approvals\": {\"count\": \"2\"}}\n",
			wantErr: "evaluate rego:p.rego: the decision has 2 mistakes: " +
				"(1) decision.deny is a string; it must be a set or array of strings (the reasons); " +
				"(2) decision.approvals.count is a string; it must be a number",
		},
		{
			// Separate rules are named as the policy names them.
			name:    "wrong shape of a rule",
			src:     "package manent\n\ndeny := \"one string\"\n\nchange_required := \"yes\"\n\nhelper := \"any shape\"\n",
			wantErr: "the decision has 2 mistakes: (1) deny is a string; it must be a set or array of strings (the reasons); (2) change_required is a string; it must be true or false",
		},
		{
			name:    "a reason that is not a string",
			src:     "package manent\n\ndecision := {\"deny\": [\"a reason\", 42]}\n",
			wantErr: "the decision has the wrong shape: decision.deny holds a number (42); every reason must be a string",
		},
		{
			// Read as Go's JSON decoder always read it: a key in another
			// case still denies, never silently allows.
			name: "keys in another case",
			src:  "package manent\n\ndecision := {\"Deny\": [\"no\"], \"APPROVALS\": {\"Count\": 2}}\n",
			want: `{"allowed":false,"deny":["no"],"approvals":{"count":2,"approvers":["*"]},"change_required":false,"break_glass":false}`,
		},
		{
			// A misspelled key was ignored: "aprovals" required no
			// approvals, "approver" let whoever RBAC allows approve.
			name: "misspelled keys",
			src:  "package manent\n\ndecision := {\"aprovals\": {\"count\": 2}, \"approvals\": {\"count\": 1, \"approver\": [\"group:sre\"]}, \"freeze\": {\"nme\": \"f\"}}\n",
			wantErr: "the decision has 3 mistakes: (1) decision.aprovals is not a key of the decision: did you mean approvals? (a key the decision does not read is ignored); " +
				"(2) decision.approvals.approver is not a key of approvals: did you mean approvers? (a key approvals does not read is ignored); " +
				"(3) decision.freeze.nme is not a key of freeze: did you mean name? (a key freeze does not read is ignored)",
		},
		{
			// A key of the policy's own, and a rule of a package written
			// rule by rule named like a key, are left alone.
			name: "keys of the policy's own",
			src:  "package manent\n\ndecision := {\"deny\": [\"no\"], \"note\": \"see the wiki\", \"approvals\": {\"count\": 1, \"owner\": \"sre\"}}\n",
			want: `{"allowed":false,"deny":["no"],"approvals":{"count":1,"approvers":["*"]},"change_required":false,"break_glass":false}`,
		},
		{
			name: "a rule named like a key",
			src:  "package manent\n\napproval := true\n\ndeny contains \"no\" if approval\n",
			want: `{"allowed":false,"deny":["no"],"change_required":false,"break_glass":false}`,
		},
		{
			// OPA writes 2.0 as 2.0: a whole number all the same.
			name: "a whole count written with a fraction",
			src:  "package manent\n\ndecision := {\"approvals\": {\"count\": 2.0}}\n",
			want: `{"allowed":true,"approvals":{"count":2,"approvers":["*"]},"change_required":false,"break_glass":false}`,
		},
		{
			name:    "a fractional count",
			src:     "package manent\n\ndecision := {\"approvals\": {\"count\": 1.5}}\n",
			wantErr: "the decision has the wrong shape: decision.approvals.count is 1.5; it must be a whole number",
		},
		{
			name: "approvals and freeze of the wrong kind",
			src:  "package manent\n\ndecision := {\"approvals\": 2, \"freeze\": {\"name\": \"f\", \"reopens_at\": 1}, \"missing_promotions\": {\"staging\": true}}\n",
			wantErr: "the decision has 3 mistakes: (1) decision.approvals is a number; it must be an object {count, approvers, expires} or null; " +
				"(2) decision.freeze.reopens_at is a number; it must be an RFC 3339 time string; " +
				"(3) decision.missing_promotions is an object; it must be a set or array of strings (environment names)",
		},
		{
			// Refused as governance.yaml refuses it; it was read as "no
			// approvals" and the deploy ran unapproved.
			name:    "negative count",
			src:     "package manent\n\ndecision := {\"approvals\": {\"count\": -1, \"approvers\": [\"group:sre\"]}}\n",
			wantErr: "approvals.count: -1 must not be negative",
		},
		{
			// "sre" is no identity pattern (group:sre is): the deploy
			// waited for an approval no one could give.
			name:    "approver naming no identity",
			src:     "package manent\n\ndecision := {\"approvals\": {\"count\": 1, \"approvers\": [\"group:sre\", \"sre\"]}}\n",
			wantErr: `approvals.approvers[1]: "sre" names no identity, so it matches no one`,
		},
		{
			name: "approvers of every kind and a glob",
			src:  "package manent\n\ndecision := {\"approvals\": {\"count\": 1, \"approvers\": [\"group:sre\", \"token:ci\", \"oidc:ann@example.com\", \"*\"]}}\n",
			want: `{"allowed":true,"approvals":{"count":1,"approvers":["*","group:sre","oidc:ann@example.com","token:ci"]},"change_required":false,"break_glass":false}`,
		},
		{
			name: "count 0 requires none",
			src:  "package manent\n\ndecision := {\"approvals\": {\"count\": 0}}\n",
			want: `{"allowed":true,"change_required":false,"break_glass":false}`,
		},
		{
			name:    "bad expires",
			src:     "package manent\n\ndecision := {\"approvals\": {\"count\": 1, \"expires\": \"a day\"}}\n",
			wantErr: "approvals.expires",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := governance.ParseRego("p.rego", tt.src)
			if err != nil {
				t.Fatal(err)
			}
			d, err := p.Decide(context.Background(), in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v (%s), want an error containing %q", err, jsonString(d), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Source != "rego:p.rego" {
				t.Errorf("source is %q", d.Source)
			}
			d.Source = ""
			if got := jsonString(d); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestRegoInputDocument pins the document a policy sees as input: the
// documented contract, with every collection present even when empty.
func TestRegoInputDocument(t *testing.T) {
	p, err := governance.ParseRego("echo.rego", "package manent\n\ndecision := {\"deny\": [json.marshal(input)]}\n")
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Decide(context.Background(), governance.Input{
		Descriptor: billing("prod"),
		Identity:   manent.Identity{Subject: "token:ci"},
		Now:        mustTime(t, "2026-06-10T12:00:00+02:00"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"descriptor":{"apiVersion":"manent/v1","application":"billing","artifact":{"url":"file:///srv/billing.tgz"},"environment":"prod","version":"1.4.2"},` +
		`"environment":{"config":{},"name":"prod","regions":[]},"identity":{"groups":[],"subject":"token:ci"},` +
		`"inventory":{"current":null,"rolled_back":[],"successes":[]},"now":"2026-06-10T10:00:00Z","target":{}}`
	if len(d.Deny) != 1 || d.Deny[0] != want {
		t.Errorf("input document:\ngot  %v\nwant %s", d.Deny, want)
	}
}

func TestFromConfig(t *testing.T) {
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "governance.yaml")
	regoPath := filepath.Join(dir, "policy.rego")
	badPath := filepath.Join(dir, "bad.yaml")
	writeFile(t, rulesPath, "change:\n  - {environments: [prod]}\n")
	writeFile(t, regoPath, "package manent\n\nchange_required := true\n")
	writeFile(t, badPath, "change: 1\n")
	in := governance.Input{Descriptor: billing("prod")}

	tests := []struct {
		name, rules, rego string
		wantSource        string
		wantErr           string
	}{
		{name: "none", wantSource: "none"},
		{name: "rules", rules: rulesPath, wantSource: "rules:" + rulesPath},
		{name: "rego", rego: regoPath, wantSource: "rego:" + regoPath},
		{name: "both", rules: rulesPath, rego: regoPath, wantErr: "either rules or rego"},
		{name: "bad rules", rules: badPath, wantErr: badPath + ":1: "},
		{name: "missing rules", rules: filepath.Join(dir, "nope.yaml"), wantErr: "no such file"},
		{name: "missing rego", rego: filepath.Join(dir, "nope.rego"), wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec, err := governance.FromConfig(tt.rules, tt.rego)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || dec != nil {
					t.Fatalf("got %v, %v; want nil and an error containing %q", dec, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d, err := dec.Decide(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed || d.Source != tt.wantSource || d.ChangeRequired != (tt.name != "none") {
				t.Errorf("got %s", jsonString(d))
			}
		})
	}
}

func TestDecideNeedsDescriptor(t *testing.T) {
	r, _ := governance.ParseRules("g.yaml", nil)
	p, _ := governance.ParseRego("p.rego", "package manent\n")
	for _, dec := range []governance.Decider{r, p, governance.AllowAll{}} {
		if _, err := dec.Decide(context.Background(), governance.Input{}); err == nil {
			t.Errorf("%T: no error without a descriptor", dec)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRegoNowIsInputNow: time.now_ns() in a policy is the input's now, so
// cases can replay any moment.
func TestRegoNowIsInputNow(t *testing.T) {
	p, err := governance.ParseRego("p.rego", "package manent\n\ndeny contains \"late\" if time.now_ns() >= time.parse_rfc3339_ns(\"2030-01-01T00:00:00Z\")\n")
	if err != nil {
		t.Fatal(err)
	}
	for now, want := range map[string]bool{"2029-12-31T23:59:59Z": true, "2030-01-01T00:00:00Z": false} {
		d, err := p.Decide(context.Background(), governance.Input{Descriptor: billing("prod"), Now: mustTime(t, now)})
		if err != nil || d.Allowed != want {
			t.Errorf("%s: got %+v, %v; want allowed %v", now, d, err, want)
		}
	}
}

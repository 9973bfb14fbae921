package governance_test

import (
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/governance"
)

func TestParseCasesErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"not a table", "- name: x\n", []string{`c.yaml:1: cases: want a list of cases under the key "cases"`}},
		{"unknown top-level key", "cases: [{name: a, input: {descriptor: {application: x}}}]\nextra: 1\n", []string{`c.yaml:2: unknown field "extra"`}},
		{
			name: "case mistakes",
			yaml: `cases:
  - name: a
    input: {descriptor: {application: x}}
  - name: a
    input: {descriptor: {application: x}}
  - input: {descriptor: {application: x}}
  - name: b
    input: {}
  - name: c
    input: {descriptor: {application: x}}
    expect: {allowd: true}
  - name: d
    input: {descriptor: {application: x}, now: yesterday}
`,
			want: []string{
				"c.yaml: 5 problems",
				`c.yaml:4: cases[1]: case "a" is defined twice`,
				"c.yaml:6: cases[2]: a case needs a name",
				`c.yaml:7: cases[3]: case "b": input.descriptor is required`,
				`c.yaml:9: cases[4]: case "c": unknown field "allowd"`,
				`c.yaml:12: cases[5]: case "d": parsing time "yesterday"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := governance.ParseCases("c.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			got := strings.Split(err.Error(), "\n")
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

func TestExpectCheck(t *testing.T) {
	cases, err := governance.ParseCases("c.yaml", []byte(`cases:
  - name: everything
    input: {descriptor: {application: x}}
    expect:
      allowed: true
      deny: [frozen, promotion]
      approvals: {count: 2, approvers: ["group:a"], expires: 1h}
      change_required: true
      freeze: {name: f, reopens_at: 2026-01-01T00:00:00Z}
      break_glass: true
      missing_promotions: []
  - name: no freeze
    input: {descriptor: {application: x}}
    expect: {freeze: ""}
  - name: a freeze by name
    input: {descriptor: {application: x}}
    expect: {freeze: g, approvals: {count: 0}}
`))
	if err != nil {
		t.Fatal(err)
	}
	d := governance.Decision{
		Deny:              []string{`prod is frozen by "f" until 2026-01-02T00:00:00Z`},
		Approvals:         &governance.Approvals{Count: 1, Approvers: []string{"group:b"}, Expires: descriptor.Duration(time.Hour)},
		Freeze:            &governance.FreezeInfo{Name: "f", ReopensAt: mustTime(t, "2026-01-02T00:00:00Z")},
		MissingPromotions: []string{"staging"},
	}
	want := [][]string{
		{
			"allowed: got false, want true",
			`deny: no reason contains "promotion" (reasons: ["prod is frozen by \"f\" until 2026-01-02T00:00:00Z"])`,
			"change_required: got false, want true",
			"break_glass: got false, want true",
			`missing_promotions: got ["staging"], want []`,
			"approvals.count: got 1, want 2",
			`approvals.approvers: got ["group:b"], want ["group:a"]`,
			"freeze.reopens_at: got 2026-01-02T00:00:00Z, want 2026-01-01T00:00:00Z",
		},
		{`freeze: got "f", want none`},
		{"approvals.count: got 1, want 0", `freeze: got "f", want "g"`},
	}
	for i, c := range cases {
		got := c.Expect.Check(d)
		if strings.Join(got, "\n") != strings.Join(want[i], "\n") {
			t.Errorf("%s:\ngot  %q\nwant %q", c.Name, got, want[i])
		}
	}
}

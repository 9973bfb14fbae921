package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

func names(p manent.Plan) []string {
	out := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		out[i] = s.Name
	}
	return out
}

func TestBuildOrder(t *testing.T) {
	pipeline := []string{"secrets", "artifacts", "deploy", "post-test", "activation"}
	tests := []struct {
		name  string
		steps []descriptor.CustomStep
		want  string
	}{
		{"none", nil, "secrets artifacts deploy post-test activation"},
		{"before and after one step", []descriptor.CustomStep{
			{Name: "a", Before: "deploy"}, {Name: "b", After: "deploy"}, {Name: "c", Before: "deploy"}, {Name: "d", After: "deploy"},
		}, "secrets artifacts a c deploy b d post-test activation"},
		{"against custom steps, in any order", []descriptor.CustomStep{
			{Name: "c", After: "b"}, {Name: "b", After: "deploy"}, {Name: "x", Before: "b"}, {Name: "a", Before: "c"},
		}, "secrets artifacts deploy x b a c post-test activation"},
		{"a chain", []descriptor.CustomStep{
			{Name: "s3", After: "s2"}, {Name: "s1", After: "activation"}, {Name: "s2", After: "s1"},
		}, "secrets artifacts deploy post-test activation s1 s2 s3"},
		{"after a step, then after that one", []descriptor.CustomStep{
			{Name: "a", After: "deploy"}, {Name: "c", After: "a"}, {Name: "b", After: "deploy"},
		}, "secrets artifacts deploy a c b post-test activation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.steps {
				tt.steps[i].Plugin = "script"
			}
			p, err := Build(&descriptor.Descriptor{Steps: tt.steps}, pipeline)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(p), " "); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name  string
		steps []descriptor.CustomStep
		want  string
	}{
		{"a step not in the pipeline", []descriptor.CustomStep{{Name: "a", Before: "qa"}}, `custom step "a" names unknown step "qa"`},
		{"a loop", []descriptor.CustomStep{{Name: "a", After: "b"}, {Name: "b", After: "a"}}, `custom step "a" cannot be placed: it and "b" are placed before/after each other in a loop`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(&descriptor.Descriptor{Steps: tt.steps}, []string{"artifacts", "deploy"})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %s", err, tt.want)
			}
		})
	}
}

// chain is n custom steps, each after the previous one, listed last first
// (the order that made the old Build cubic).
func chain(n int) *descriptor.Descriptor {
	d := &descriptor.Descriptor{}
	for i := n - 1; i >= 0; i-- {
		anchor := fmt.Sprintf("s%d", i-1)
		if i == 0 {
			anchor = "deploy"
		}
		d.Steps = append(d.Steps, descriptor.CustomStep{Name: fmt.Sprintf("s%d", i), After: anchor, Plugin: "script"})
	}
	return d
}

// The most custom steps a descriptor may have are planned in order.
func TestBuildManySteps(t *testing.T) {
	for _, n := range []int{200, 4000} {
		p, err := Build(chain(n), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := names(p)
		at := slices.Index(got, "deploy")
		if len(got) != len(manent.DefaultPipeline)+n || got[at+1] != "s0" || got[at+n] != fmt.Sprintf("s%d", n-1) {
			t.Fatalf("%d steps: got %d steps, %v … after deploy", n, len(got), got[at:at+3])
		}
	}
}

// BenchmarkBuild plans a chain of custom steps listed in reverse: linear
// time (the Build of before had to rescan the plan for each step of each
// round).
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{200, 4000} {
		d := chain(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Build(d, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

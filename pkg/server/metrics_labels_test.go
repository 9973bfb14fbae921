package server

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// Step names come from descriptors: past maxStepLabels distinct names, a
// new one is labelled "(other)", and the names already in use keep theirs.
func TestStepLabelsAreBounded(t *testing.T) {
	var l stepLabels
	for i := 0; i < maxStepLabels; i++ {
		if got, want := l.label(fmt.Sprintf("s%d", i)), fmt.Sprintf("s%d", i); got != want {
			t.Fatalf("label %d = %q, want %q", i, got, want)
		}
	}
	if got := l.label("one-too-many"); got != stepLabelOther {
		t.Fatalf("a name past the bound is labelled %q, want %q", got, stepLabelOther)
	}
	if got := l.label("s7"); got != "s7" {
		t.Fatalf("a name in use is labelled %q after the bound, want s7", got)
	}
	if len(l.seen) != maxStepLabels {
		t.Fatalf("%d names kept, want %d", len(l.seen), maxStepLabels)
	}
}

// The overflow label is no step's name: a step named "other" (a valid
// custom step name) keeps its own series, apart from the names counted
// past the bound. Step names are a custom step's (descriptor.md:
// ^[a-z0-9][a-z0-9:_-]{0,62}$), a built-in's, or one of those qualified by
// a wave (deploy[eu]) or prefixed (rollback:, checkpoint:) — all start
// with a lowercase letter or a digit.
func TestStepLabelOverflowIsNoStepName(t *testing.T) {
	stepName := regexp.MustCompile(`^[a-z0-9]`)
	if stepName.MatchString(stepLabelOther) {
		t.Fatalf("the overflow label %q could be a step's name", stepLabelOther)
	}
	var l stepLabels
	for i := 0; i < maxStepLabels-1; i++ {
		l.label(fmt.Sprintf("s%d", i))
	}
	if got := l.label("other"); got != "other" {
		t.Fatalf("a step named other is labelled %q, want other", got)
	}
	if got := l.label("one-too-many"); got == "other" || !strings.Contains(got, "other") {
		t.Fatalf("a name past the bound is labelled %q: want a label apart from the step named other", got)
	}
}

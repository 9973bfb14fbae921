package server

import (
	"fmt"
	"testing"
)

// Step names come from descriptors: past maxStepLabels distinct names, a
// new one is labelled "other", and the names already in use keep theirs.
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

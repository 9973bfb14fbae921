package cli

import (
	"testing"
	"time"
)

// The tables' times are reltime's (its test holds the rule); a missing
// time is an empty cell.
func TestRelativeTime(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	if got := relativeTime(now.Add(-(2*time.Minute + 13*time.Second)), now); got != "2m ago" {
		t.Errorf("relativeTime(now-2m13s) = %q, want %q", got, "2m ago")
	}
	if got := relativeTime(time.Time{}, now); got != "" {
		t.Errorf("zero time: %q, want empty", got)
	}
	if got := relativeTimePtr(nil, now); got != "" {
		t.Errorf("nil time: %q, want empty", got)
	}
}

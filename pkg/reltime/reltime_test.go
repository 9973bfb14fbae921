package reltime_test

import (
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/reltime"
)

func TestFormat(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		ago  time.Duration
		want string
	}{
		{0, "just now"},
		{9 * time.Second, "just now"},
		{-9 * time.Second, "just now"},
		{10 * time.Second, "10s ago"},
		{59*time.Second + 999*time.Millisecond, "59s ago"},
		{time.Minute, "1m ago"},
		{2*time.Minute + 13*time.Second, "2m ago"},
		{3*time.Minute + 59*time.Second, "3m ago"},
		{59 * time.Minute, "59m ago"},
		{2*time.Hour + 59*time.Minute, "2h ago"},
		{23 * time.Hour, "23h ago"},
		{24 * time.Hour, "1d ago"},
		{5*24*time.Hour + 23*time.Hour, "5d ago"},
		{364 * 24 * time.Hour, "364d ago"},
		{2 * 365 * 24 * time.Hour, "2y ago"},
		{-5 * time.Minute, "in 5m"},
		{-(5*time.Minute + 30*time.Second), "in 5m"},
		{-26 * time.Hour, "in 1d"},
	} {
		if got := reltime.Format(now.Add(-tt.ago), now); got != tt.want {
			t.Errorf("Format(now-%s) = %q, want %q", tt.ago, got, tt.want)
		}
	}
	if got := reltime.Format(time.Time{}, now); got != "" {
		t.Errorf("zero time: %q, want empty", got)
	}
}

// Package reltime prints an instant relative to now for people ("3m ago",
// "in 5m"): the one rule of the CLI's tables and of the web UI, each time
// truncated to its unit (docs/cli.md). The UI's script repeats the rule to
// keep its times current (pkg/web/static/app.js).
//
// It imports only the standard library.
package reltime

import (
	"strconv"
	"time"
)

// JustNow is how close to now an instant is "just now", on either side.
const JustNow = 10 * time.Second

// Format prints t relative to now: "just now" within JustNow, then "45s
// ago", "3m ago", "2h ago", "5d ago", "2y ago", each truncated to its unit
// (2m59s is "2m ago"); a time in the future is "in 3m". The zero time is "".
func Format(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	if d < JustNow {
		return "just now"
	}
	var s string
	switch day := 24 * time.Hour; {
	case d < time.Minute:
		s = strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		s = strconv.Itoa(int(d/time.Minute)) + "m"
	case d < day:
		s = strconv.Itoa(int(d/time.Hour)) + "h"
	case d < 365*day:
		s = strconv.Itoa(int(d/day)) + "d"
	default:
		s = strconv.Itoa(int(d/(365*day))) + "y"
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

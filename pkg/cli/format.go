package cli

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/reltime"
)

// timeLayout is how tables print instants: UTC, to the second.
const timeLayout = "2006-01-02T15:04:05Z"

// logTimeLayout is how log lines print their time: UTC, to the millisecond.
const logTimeLayout = "2006-01-02T15:04:05.000Z"

// formatTime prints t in UTC, or "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// formatTimePtr prints *t in UTC, or "" when t is nil.
func formatTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return formatTime(*t)
}

// formatDuration prints d for people: milliseconds under ten seconds
// ("1.234s", "250ms"), whole seconds above ("2m5s"), without the trailing
// zero units of time.Duration.String ("30m", not "30m0s").
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < 10*time.Second:
		d = d.Round(time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// elapsed returns how long something ran: finished-started, or now-started
// while it still runs, or 0 before it starts.
func elapsed(started, finished *time.Time, now time.Time) time.Duration {
	switch {
	case started == nil:
		return 0
	case finished != nil:
		return finished.Sub(*started)
	default:
		return now.Sub(*started)
	}
}

// durationCell prints a step's or deploy's duration, "" before it starts.
func durationCell(started, finished *time.Time, now time.Time) string {
	if started == nil {
		return ""
	}
	return formatDuration(elapsed(started, finished, now))
}

// truncate shortens s to at most n runes, ending with "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// failureReason explains why a final deploy is not SUCCESS, one line per
// fact: the server's error (already `step "<name>" failed: <error>`), the
// rollback outcome (of a failed one, each undo step that failed, with its
// error, in the same form), for CANCELLED its error ("cancelled by
// <identity>", "superseded by <id>" for a schedule tick a later tick
// replaced before it started; "cancelled" when it has none), otherwise the
// state name. It
// returns nil for SUCCESS.
func failureReason(d *manent.Deployment) []string {
	var lines []string
	switch d.State {
	case manent.StateSuccess:
		return nil
	case manent.StateCancelled:
		// Who cancelled it (`cancelled by token:ci`), or the later tick of
		// its schedule (`superseded by …`), and what the cancel left live
		// when rollback is disabled.
		if d.Error != "" {
			lines = append(lines, d.Error)
		} else {
			lines = append(lines, "cancelled")
		}
	case manent.StateError:
		if d.Error != "" {
			lines = append(lines, d.Error)
		} else {
			lines = append(lines, string(d.State))
		}
	default:
		if d.Error != "" {
			lines = append(lines, string(d.State)+": "+d.Error)
		} else {
			lines = append(lines, string(d.State))
		}
	}
	if d.Rollback != "" {
		lines = append(lines, "rollback: "+d.Rollback)
	}
	if d.Rollback == "failed" {
		// Which undo failed and why: what the failure left on the target.
		for _, st := range d.Steps {
			if strings.HasPrefix(st.Name, "rollback:") && st.State == manent.StepError {
				lines = append(lines, "step "+strconv.Quote(st.Name)+" failed: "+st.Error)
			}
		}
	}
	return lines
}

// decisionSummary prints a governance decision on one line.
func decisionSummary(dec *manent.Decision) string {
	if dec == nil {
		return ""
	}
	var parts []string
	if dec.Allowed {
		parts = append(parts, "allowed")
	} else {
		parts = append(parts, "denied")
	}
	if len(dec.Deny) > 0 {
		parts = append(parts, strings.Join(dec.Deny, "; "))
	}
	if dec.ApprovalsRequired > 0 {
		a := "approvals required: " + strconv.Itoa(dec.ApprovalsRequired)
		if len(dec.Approvers) > 0 {
			a += " (" + strings.Join(dec.Approvers, ", ") + ")"
		}
		parts = append(parts, a)
	}
	if dec.ChangeRequired {
		parts = append(parts, "change ticket required")
	}
	if dec.Freeze != "" {
		parts = append(parts, "freeze: "+dec.Freeze)
	}
	if dec.Source != "" {
		parts = append(parts, "source: "+dec.Source)
	}
	return strings.Join(parts, ", ")
}

// relativeTime prints t relative to now for tables (the AGE column), by
// the rule the web UI shares (reltime.Format: "3m ago", "in 5m", "" for the
// zero time). -o json/yaml keep the absolute RFC 3339 time.
func relativeTime(t, now time.Time) string { return reltime.Format(t, now) }

// relativeTimePtr is relativeTime for an optional time ("" when nil).
func relativeTimePtr(t *time.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	return relativeTime(*t, now)
}

package cli_test

import (
	"strings"
	"testing"
)

// A duration too long for Go's time.Duration said `must be a duration like
// "30s" or "5m"` (pflag's word for every duration it cannot parse), and
// "99999999h" looks like one; it now says it is too long and gives the
// longest accepted. A value that is no duration keeps pflag's word.
func TestDurationFlagTooLong(t *testing.T) {
	for _, c := range []struct {
		value, want, not string
	}{
		{"99999999h", `invalid argument "99999999h" for "--timeout" flag: too long: the longest duration is 2562047h47m16.854775807s (about 292 years)`, "must be a duration like"},
		{"-99999999h", `too long: the longest duration is 2562047h47m16.854775807s`, "must be a duration like"},
		{"soon", `invalid argument "soon" for "--timeout" flag: must be a duration like "30s" or "5m"`, "too long"},
		{"99999999", `must be a duration like "30s" or "5m"`, "too long"},
	} {
		code, _, stderr := runCLI(t, nil, "wait", "--timeout", c.value, "dpl_1")
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, c.not) {
			t.Errorf("--timeout %s: exit %d, stderr %q; want 2 and %q", c.value, code, stderr, c.want)
		}
	}
}

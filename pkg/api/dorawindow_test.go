package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// A DORA window that is refused says what is wrong with it. "100000d" is
// a number of days, too many: it was told "want a number of hours, days or
// weeks such as 12h, 30d or 4w", as "0d" and "-5d" were; and a 10 KB
// value came back whole in the answer.
func TestParseDORAWindowSaysWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"100000d", "longer than ten years"},
		{"99999999999999999999h", "longer than ten years"},
		{"3651d", "longer than ten years"},
		{"0d", "at least 1h"},
		{"00h", "at least 1h"},
		{"-5d", "negative"},
		{"abc", "such as 12h, 30d or 4w"},
		{"1.5d", "such as 12h, 30d or 4w"},
		{"30", "such as 12h, 30d or 4w"},
		{strings.Repeat("9", 10000) + "d", "longer than ten years"},
		{strings.Repeat("x", 10000), "such as 12h, 30d or 4w"},
	} {
		_, err := api.ParseDORAWindow(c.in)
		if manent.ErrorCode(err) != manent.EInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.20q: %v, want an invalid-argument error saying %q", c.in, err, c.want)
			continue
		}
		if len(err.Error()) > 300 {
			t.Errorf("%.20q: a message of %d bytes, want the value clipped", c.in, len(err.Error()))
		}
	}
	for in, want := range map[string]time.Duration{"1h": time.Hour, "30d": 30 * 24 * time.Hour, "4w": 28 * 24 * time.Hour, "3650d": 3650 * 24 * time.Hour} {
		if got, err := api.ParseDORAWindow(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
}

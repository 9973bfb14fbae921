package engine

import (
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/plugin"
)

// The cut-off ends well before dead_after, at least two heartbeats after
// the last one, and leaves the steps' processes gone a heartbeat before
// dead_after: cutOff + cutOffGrace <= dead_after - heartbeat.
func TestCutOffBeforeDeadAfter(t *testing.T) {
	for _, c := range []struct {
		heartbeat, deadAfter, cutOff, grace time.Duration
	}{
		{5 * time.Second, 30 * time.Second, 16666666666, plugin.DefaultGrace},
		{250 * time.Millisecond, 3 * time.Second, 1833333333, 916666667},
		{5 * time.Second, 15 * time.Second, 10 * time.Second, 0},
		{time.Second, time.Minute, 39333333333, plugin.DefaultGrace},
	} {
		e := &Engine{cfg: Config{Heartbeat: c.heartbeat, DeadAfter: c.deadAfter}}
		if got := e.cutOff(); got != c.cutOff {
			t.Errorf("heartbeat %s, dead_after %s: cut-off %s, want %s", c.heartbeat, c.deadAfter, got, c.cutOff)
		}
		if got := e.cutOffGrace(); got != c.grace {
			t.Errorf("heartbeat %s, dead_after %s: grace %s, want %s", c.heartbeat, c.deadAfter, got, c.grace)
		}
		if e.cutOff() < 2*c.heartbeat || e.cutOff()+e.cutOffGrace() > c.deadAfter-c.heartbeat {
			t.Errorf("heartbeat %s, dead_after %s: cut-off %s + grace %s does not fit", c.heartbeat, c.deadAfter, e.cutOff(), e.cutOffGrace())
		}
	}
}

package plugin_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
)

// SettingErrors finds the settings a plugin's error names, through its
// own prefix and a join, and gives up (nil) as soon as one problem names
// none: admission then reports the whole error at `with`.
func TestSettingErrors(t *testing.T) {
	a := plugin.Settingf("timeout", "with.timeout %q is not a positive duration", "5x")
	b := plugin.Settingf(plugin.SettingPath("headers", "X/A~1"), "with.headers.X/A~1 must be a string")
	got := plugin.SettingErrors(fmt.Errorf("http: %w", errors.Join(a, b)))
	if len(got) != 2 || got[0].Path != "timeout" || got[1].Path != "headers/X~1A~01" {
		t.Fatalf("settings %+v, want timeout and headers/X~1A~01 (escaped)", got)
	}
	if got[0].Error() != `with.timeout "5x" is not a positive duration` {
		t.Errorf("message %q: want the setting's own, without the plugin's prefix", got[0].Error())
	}
	for _, err := range []error{
		nil,
		errors.New("local: target.with.dir is required"),
		errors.Join(a, errors.New("something about no setting")),
		fmt.Errorf("http: %w", errors.Join(fmt.Errorf("x: %w", errors.New("plain")), b)),
	} {
		if got := plugin.SettingErrors(err); got != nil {
			t.Errorf("SettingErrors(%v) = %+v, want nil", err, got)
		}
	}
	// A setting's place: itself when set, `with` when missing.
	if at := plugin.SettingAt(map[string]any{"a/b": 1}, "a/b"); at != "a~1b" {
		t.Errorf("SettingAt of a set key: %q, want a~1b", at)
	}
	if at := plugin.SettingAt(map[string]any{}, "command"); at != "" {
		t.Errorf("SettingAt of a missing key: %q, want \"\" (with itself)", at)
	}
}

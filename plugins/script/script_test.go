package script

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
)

// Within a wave the command gets MANENT_ROLLOUT_* (targets comma-separated)
// and `rollout` on stdin; outside a rollout it gets neither.
func TestRolloutEnvironment(t *testing.T) {
	for _, tt := range []struct {
		name     string
		pc       plugin.Context
		env      string
		rollout  string
		captured bool
	}{
		{"wave of targets", plugin.Context{Wave: "eu", WaveIndex: 2, Targets: []string{"eu-1", "eu-2"}},
			"wave=eu index=2 targets=eu-1,eu-2 percent=0 set=yes", `{"wave":"eu","index":2,"targets":["eu-1","eu-2"],"percent":0}`, true},
		{"percentage", plugin.Context{Wave: "34%", WaveIndex: 1, Percent: 34},
			"wave=34% index=1 targets= percent=34 set=yes", `{"wave":"34%","index":1,"targets":[],"percent":34}`, true},
		{"no rollout", plugin.Context{}, "wave= index= targets= percent= set=no", ``, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			pc := tt.pc
			pc.DeployID, pc.Step, pc.WorkDir = "dpl_1", "deploy", dir
			pc.With = map[string]any{"command": []any{"sh", "-c",
				`set=no; env | grep -q '^MANENT_ROLLOUT_WAVE=' && set=yes
echo "wave=$MANENT_ROLLOUT_WAVE index=$MANENT_ROLLOUT_INDEX targets=$MANENT_ROLLOUT_TARGETS percent=$MANENT_ROLLOUT_PERCENT set=$set" > env.txt
cat > stdin.json`}}
			if _, err := New(Options{}).Run(context.Background(), pc); err != nil {
				t.Fatal(err)
			}
			env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
			if got := strings.TrimSpace(string(env)); got != tt.env {
				t.Errorf("environment: %s, want %s", got, tt.env)
			}
			raw, _ := os.ReadFile(filepath.Join(dir, "stdin.json"))
			var stdin map[string]json.RawMessage
			if err := json.Unmarshal(raw, &stdin); err != nil {
				t.Fatalf("stdin %s: %v", raw, err)
			}
			if got := string(stdin["rollout"]); got != tt.rollout {
				t.Errorf("stdin rollout: %s, want %s", got, tt.rollout)
			}
		})
	}
}

// QA: a NUL in an argument of with.command (a YAML "\0") passed validation
// and failed at the step as "fork/exec /usr/bin/sh: invalid argument".
// It is refused when the deploy is checked, naming the argument.
func TestCommandWithNULRefused(t *testing.T) {
	err := New(Options{}).Validate(map[string]any{"command": []any{"sh", "-c", "echo a\x00b"}})
	if err == nil || !strings.Contains(err.Error(), "with.command[2] holds a NUL character") {
		t.Fatalf("Validate: %v, want with.command[2] refused for its NUL", err)
	}
}

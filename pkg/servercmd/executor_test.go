package servercmd

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

// A second process with a running worker's executor id is refused with a
// hint to give each worker its own --executor-id and the key of
// manent-server.yaml that sets it. The hint named workers.executor_id, a
// key the server refuses ("unknown key \"executor_id\" in workers"): the
// key is executor_id, at the top level. Both refusals — on this host and
// data_dir (the seat lock), elsewhere on PostgreSQL (still beating) —
// must name a key the configuration accepts.
func TestExecutorInUseNamesItsKey(t *testing.T) {
	data, cfg, n := openNode(t)
	defer n.Close(0)
	second := *cfg
	second.Database = "sqlite:" + filepath.Join(t.TempDir(), "other.db") // not the first's database lock: its seat
	_, err := node.Open(context.Background(), &second, node.Options{})
	if err == nil {
		t.Fatalf("a second node with executor id %s and data_dir %s opened", cfg.ExecutorID, data)
	}
	hint := regexp.MustCompile(`--executor-id \(([a-z_.]+)[ )]`)
	for _, msg := range []string{err.Error(), (&store.ExecutorInUseError{ID: "w1", Seat: "host:/srv/manent"}).Error()} {
		m := hint.FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("%q names no key after --executor-id", msg)
		}
		path := filepath.Join(t.TempDir(), "manent-server.yaml")
		if err := os.WriteFile(path, []byte(m[1]+": w9\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := loadConfig(path, nil)
		if err != nil {
			t.Errorf("%q names %s, which manent-server.yaml refuses: %v", msg, m[1], err)
		} else if c.ExecutorID != "w9" {
			t.Errorf("%q names %s, which does not set the executor id (it is %q)", msg, m[1], c.ExecutorID)
		}
	}
}

package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write flushes the directory once the file has its name: before, a power
// loss could undo the rename (the old file back, or none), after Write
// said it was done.
func TestWriteFlushesTheDirectoryAfterTheRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	var synced []string
	old := syncDir
	defer func() { syncDir = old }()
	syncDir = func(d string) error {
		b, err := os.ReadFile(path)
		if err != nil || string(b) != "new" {
			t.Errorf("directory flushed before the rename: %s reads %q (%v)", path, b, err)
		}
		synced = append(synced, d)
		return old(d)
	}
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directories flushed %q, want %q once", synced, dir)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want mode 0600", path, st, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".config.yaml.tmp-*"))
	if len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

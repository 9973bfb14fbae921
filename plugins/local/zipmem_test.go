package local_test

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// writeZipOf writes a zip of n empty files with names like those of a
// node_modules tree, and returns its path.
func writeZipOf(tb testing.TB, dir string, n int) string {
	tb.Helper()
	art := filepath.Join(dir, fmt.Sprintf("app-%d.zip", n))
	out, err := os.Create(art)
	if err != nil {
		tb.Fatal(err)
	}
	zw := zip.NewWriter(out)
	for i := range n {
		name := fmt.Sprintf("node_modules/package-%d/lib/module-%d.js", i/20, i)
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
	return art
}

// What archive/zip allocates to open a zip of N entries: it reads the
// whole central directory into memory (a *zip.File per entry) before the
// first entry is unpacked, and holds it while the release is written. The
// default of plugins.local.max_archive_entries is chosen from this
// (docs/plugins.md).
//
//	go test ./plugins/local -run '^$' -bench ZipDirectoryMemory -benchtime 1x
func BenchmarkZipDirectoryMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			art := writeZipOf(b, b.TempDir(), n)
			var before, after runtime.MemStats
			var total uint64
			b.ResetTimer()
			for range b.N {
				runtime.GC()
				runtime.ReadMemStats(&before)
				zr, err := zip.OpenReader(art)
				if err != nil {
					b.Fatal(err)
				}
				runtime.ReadMemStats(&after)
				if len(zr.File) != n {
					b.Fatalf("%d entries, want %d", len(zr.File), n)
				}
				zr.Close()
				total += after.TotalAlloc - before.TotalAlloc
			}
			per := float64(total) / float64(b.N)
			b.ReportMetric(per, "bytes/zip")
			b.ReportMetric(per/float64(n), "bytes/entry")
		})
	}
}

// A zip's entries are bounded by plugins.local.max_zip_entries (default
// 100,000), checked from its end record before archive/zip reads its
// directory: a zip just under the 1,000,000 entries a release may hold
// took ~330 MiB (more with long names) on the worker.
func TestZipEntriesBoundedByTheServer(t *testing.T) {
	dir := t.TempDir()
	deploy := func(p *local.Plugin, art, id string) error {
		_, err := p.Deploy(context.Background(), plugin.Context{DeployID: id, Version: id, Step: "deploy", Artifact: art, With: map[string]any{"dir": filepath.Join(dir, "target")}, Log: io.Discard})
		return err
	}
	big := writeZipOf(t, dir, local.DefaultMaxZipEntries+1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := deploy(local.New(local.Options{}), big, "dpl_1")
	runtime.ReadMemStats(&after)
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "plugins.local.max_zip_entries") || !strings.Contains(err.Error(), fmt.Sprint(local.DefaultMaxZipEntries+1)) {
		t.Fatalf("deploy of %d entries: %v, want a permanent error naming plugins.local.max_zip_entries", local.DefaultMaxZipEntries+1, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("refusing the zip allocated %d bytes, want less than 4 MiB (its directory was read)", got)
	}
	p := local.New(local.Options{MaxZipEntries: 10})
	if err := deploy(p, writeZipOf(t, dir, 11), "dpl_2"); err == nil || !strings.Contains(err.Error(), "more than the 10 this server allows (plugins.local.max_zip_entries)") {
		t.Errorf("deploy of 11 entries under a bound of 10: %v", err)
	}
	if err := deploy(p, writeZipOf(t, dir, 10), "dpl_3"); err != nil {
		t.Errorf("deploy of 10 entries under a bound of 10: %v", err)
	}
}

// Its directory is bounded too, to 1 KiB an entry on average: a zip of
// few entries with names of tens of KiB would be read whole into memory.
func TestZipDirectoryBoundedByItsEntries(t *testing.T) {
	dir := t.TempDir()
	art := filepath.Join(dir, "app.zip")
	out, err := os.Create(art)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(out)
	for i := range 5 {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("%d/%s", i, strings.Repeat("n", 3000)), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	p := local.New(local.Options{MaxZipEntries: 5})
	_, err = p.Deploy(context.Background(), plugin.Context{DeployID: "dpl_1", Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": filepath.Join(dir, "target")}, Log: io.Discard})
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "directory") || !strings.Contains(err.Error(), "plugins.local.max_zip_entries") {
		t.Fatalf("deploy: %v, want a permanent error about the zip's directory naming plugins.local.max_zip_entries", err)
	}
}

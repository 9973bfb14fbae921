package local_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
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

// entry is one member of a test archive.
type entry struct {
	name string
	kind byte // tar type flag
	body string
	link string
	size int64 // declared size when not len(body)
	pax  int   // bytes of a PAX comment record
}

func tarGz(t *testing.T, path string, entries ...entry) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.kind, Mode: 0o644, Linkname: e.link, Size: int64(len(e.body))}
		if e.kind == tar.TypeDir {
			h.Mode = 0o755
		}
		if e.pax > 0 {
			h.PAXRecords = map[string]string{"comment": strings.Repeat("z", e.pax)}
		}
		if e.kind == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: e.kind, PAXRecords: map[string]string{"comment": "0123abc"}}
		}
		if e.size > 0 {
			h.Size = e.size
		}
		if e.kind == tar.TypeSymlink || e.kind == tar.TypeLink || e.kind == tar.TypeChar || e.kind == tar.TypeFifo {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > int64(len(e.body)) {
			if _, err := io.CopyN(tw, zeros{}, h.Size); err != nil {
				t.Fatal(err)
			}
		} else if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func zipOf(t *testing.T, path string, entries ...entry) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		switch e.kind {
		case tar.TypeDir:
			h.SetMode(os.ModeDir | 0o755)
		case tar.TypeSymlink:
			h.SetMode(os.ModeSymlink | 0o777)
			body = e.link
		case tar.TypeChar:
			h.SetMode(os.ModeDevice | os.ModeCharDevice | 0o644)
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkFile(name, body string) entry { return entry{name: name, kind: tar.TypeReg, body: body} }
func mkDir(name string) entry        { return entry{name: name, kind: tar.TypeDir} }
func mkLink(name, to string) entry {
	return entry{name: name, kind: tar.TypeSymlink, link: to}
}

// An artifact that cannot make a release — two entries at one path, a
// name leading out of the release, a link leading out of it or through
// which later entries would be written, a hard link, a device, more bytes
// or entries than the bounds — fails the deploy step for good, naming the
// entry (a retry unpacks the same archive), and says nothing of the
// temporary directory it was unpacked into.
func TestHostileArtifactFailsForGoodNamingTheEntry(t *testing.T) {
	defer local.SetLimits(1<<20, 50)()
	many := []entry{}
	for i := range 51 {
		many = append(many, mkFile(strings.Repeat("f", 1+i%7)+"/"+string(rune('a'+i%26))+string(rune('a'+i/26)), ""))
	}
	cases := []struct {
		name    string
		zip     bool
		entries []entry
		want    string // in the error
	}{
		{name: "file then directory", entries: []entry{mkFile("a", "x"), mkFile("a/b", "y")}, want: `"a/b"`},
		{name: "directory then file", entries: []entry{mkDir("a/"), mkFile("a/b", "y"), mkFile("a", "x")}, want: `"a"`},
		{name: "file named dot", entries: []entry{mkFile(".", "x")}, want: `"."`},
		{name: "dot dot", entries: []entry{mkFile("../x", "x")}, want: `"../x"`},
		{name: "dot dot inside", entries: []entry{mkFile("a/../../x", "x")}, want: `"a/../../x"`},
		{name: "absolute", entries: []entry{mkFile("/etc/cron.d/x", "x")}, want: `"/etc/cron.d/x"`},
		{name: "absolute link", entries: []entry{mkLink("etc", "/etc")}, want: `"etc"`},
		{name: "relative link out", entries: []entry{mkLink("a/up", "../../x")}, want: `"a/up"`},
		{name: "write through a link", entries: []entry{mkDir("d/"), mkLink("l", "d"), mkFile("l/x", "x")}, want: `"l/x"`},
		{name: "link chain out", entries: []entry{mkLink("p", "."), mkLink("p/q", "../x")}, want: `"p/q"`},
		{name: "link climbing after a link", entries: []entry{mkLink("a", "."), mkDir("d/"), mkLink("d/b", "../a/..")}, want: `"d/b"`},
		{name: "file over a link", entries: []entry{mkFile("t", "x"), mkLink("l", "t"), mkFile("l", "y")}, want: `"l"`},
		{name: "hard link", entries: []entry{mkFile("a", "x"), {name: "b", kind: tar.TypeLink, link: "a"}}, want: `"b"`},
		{name: "device", entries: []entry{{name: "dev/null", kind: tar.TypeChar}}, want: `"dev/null"`},
		{name: "fifo", entries: []entry{{name: "pipe", kind: tar.TypeFifo}}, want: `"pipe"`},
		{name: "too many bytes", entries: []entry{{name: "zeros", kind: tar.TypeReg, size: 2 << 20}}, want: `"zeros"`},
		{name: "too many entries", entries: many, want: "50 entries"},
		{name: "headers past the stream bound", entries: []entry{{name: "a", kind: tar.TypeReg, pax: 900 << 10}, {name: "b", kind: tar.TypeReg, pax: 900 << 10}, {name: "c", kind: tar.TypeReg, pax: 900 << 10}}, want: "bytes once decompressed"},
		{name: "zip file then directory", zip: true, entries: []entry{mkFile("a", "x"), mkFile("a/b", "y")}, want: `"a/b"`},
		{name: "zip absolute", zip: true, entries: []entry{mkFile("/tmp/x", "x")}, want: `"/tmp/x"`},
		{name: "zip dot dot", zip: true, entries: []entry{mkFile("a/../../x", "x")}, want: `"a/../../x"`},
		{name: "zip link out", zip: true, entries: []entry{mkLink("l", "/etc/passwd")}, want: `"l"`},
		{name: "zip device", zip: true, entries: []entry{{name: "tty", kind: tar.TypeChar}}, want: `"tty"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "target")
			art := filepath.Join(dir, "app.tar.gz")
			if c.zip {
				art = filepath.Join(dir, "app.zip")
				zipOf(t, art, c.entries...)
			} else {
				tarGz(t, art, c.entries...)
			}
			p := local.New(local.Options{})
			_, err := p.Deploy(context.Background(), plugin.Context{DeployID: "dpl_1", Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard})
			if err == nil {
				t.Fatalf("deploy unpacked %s", c.name)
			}
			t.Log(err)
			if !plugin.IsPermanent(err) {
				t.Errorf("error is retryable, want permanent: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), ".tmp-") {
				t.Errorf("error %q, want it to name %s and not the temporary directory", err, c.want)
			}
			left, _ := os.ReadDir(filepath.Join(target, "releases"))
			if len(left) != 0 {
				t.Errorf("releases/ holds %v after the failure, want nothing", left)
			}
			if _, err := os.Lstat(filepath.Join(dir, "x")); err == nil {
				t.Errorf("the archive wrote %s, outside the target", filepath.Join(dir, "x"))
			}
		})
	}
}

// What real archives hold unpacks: a "./" entry, git archive's global
// header, and links that stay inside the release (kept as links: dropping
// them silently made a release without its files).
func TestArtifactWithLinksInsideUnpacks(t *testing.T) {
	for _, zipped := range []bool{false, true} {
		dir := t.TempDir()
		target := filepath.Join(dir, "target")
		es := []entry{mkDir("./"), mkFile("lib/run.sh", "echo hi"), mkDir("bin/"), mkLink("bin/run", "../lib/run.sh"), mkLink("www", "lib")}
		art := filepath.Join(dir, "app.tar.gz")
		if zipped {
			art = filepath.Join(dir, "app.zip")
			zipOf(t, art, es...)
		} else {
			es = append([]entry{{name: "pax_global_header", kind: tar.TypeXGlobalHeader}}, es...)
			tarGz(t, art, es...)
		}
		p := local.New(local.Options{})
		if _, err := p.Deploy(context.Background(), plugin.Context{DeployID: "dpl_1", Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard}); err != nil {
			t.Fatalf("zip %v: %v", zipped, err)
		}
		got, err := os.ReadFile(filepath.Join(target, "releases", "1", "bin", "run"))
		if err != nil || string(got) != "echo hi" {
			t.Errorf("zip %v: bin/run reads %q, %v, want the file it links to", zipped, got, err)
		}
		if to, err := os.Readlink(filepath.Join(target, "releases", "1", "www")); err != nil || to != "lib" {
			t.Errorf("zip %v: www links to %q, %v, want lib", zipped, to, err)
		}
	}
}

// A cancelled deploy stops unpacking.
func TestUnpackStopsWhenCancelled(t *testing.T) {
	dir := t.TempDir()
	art := filepath.Join(dir, "app.tar.gz")
	tarGz(t, art, mkFile("a", "x"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := local.New(local.Options{})
	_, err := p.Deploy(ctx, plugin.Context{DeployID: "dpl_1", Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": filepath.Join(dir, "target")}, Log: io.Discard})
	if err == nil {
		t.Fatal("a cancelled deploy unpacked the artifact")
	}
}

// A zip's directory is read whole before its first entry: one of millions
// of entries (a few tens of MiB) would take GiBs of memory — and take the
// server down again each time it recovers the step. Its count is checked
// first, from the end of the file.
func TestZipWithTooManyEntriesIsRefusedBeforeItsDirectoryIsRead(t *testing.T) {
	defer local.SetLimits(1<<20, 1000)()
	dir := t.TempDir()
	art := filepath.Join(dir, "app.zip")
	out, err := os.Create(art)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(out)
	for i := range 100_000 {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("f%d", i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	p := local.New(local.Options{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = p.Deploy(context.Background(), plugin.Context{DeployID: "dpl_1", Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": filepath.Join(dir, "target")}, Log: io.Discard})
	runtime.ReadMemStats(&after)
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "100000 entries") {
		t.Fatalf("deploy: %v, want a permanent error saying the zip has 100000 entries", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("refusing the zip allocated %d bytes, want less than 4 MiB (its directory was read)", got)
	}
}

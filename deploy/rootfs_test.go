package deploy_test

import (
	"archive/tar"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite deploy/image/rootfs.tar from imageRootfs")

// rootfsPath is the file both Dockerfiles ADD (extracted, owners and modes
// kept) onto their FROM scratch image.
var rootfsPath = filepath.Join("image", "rootfs.tar")

// nonroot is the image's user: 65532, distroless's and ko's nonroot, which
// the Helm chart's securityContext and deploy/agent name too.
const nonroot = 65532

// imageRootfs builds the image's few files: the users and groups (root,
// nobody, nonroot) for whatever looks a user up by id, a name service
// order (files, then DNS), /tmp (1777) and /data, the data directory,
// owned by nonroot so the server writes its SQLite database there with no
// volume. Every entry's time is the epoch, so the bytes depend on nothing
// but this function.
func imageRootfs(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body string) {
		h.ModTime = time.Unix(0, 0)
		h.Format = tar.FormatUSTAR
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	dir := func(name string, owner int, mode int64) {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner}, "")
	}
	file := func(name, body string) {
		add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, body)
	}
	dir("etc", 0, 0o755)
	file("etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
		"nonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n")
	file("etc/group", "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")
	file("etc/nsswitch.conf", "hosts: files dns\n")
	dir("tmp", 0, 0o1777)
	dir("data", nonroot, 0o755)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestImageRootfs: deploy/image/rootfs.tar is what imageRootfs builds
// (`go test ./deploy -run TestImageRootfs -update` rewrites it), so the
// image's users, /tmp and /data are reviewed here as code, not as a blob.
func TestImageRootfs(t *testing.T) {
	want := imageRootfs(t)
	if *update {
		if err := os.WriteFile(rootfsPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(rootfsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from imageRootfs: run go test ./deploy -run TestImageRootfs -update", rootfsPath)
	}
	// What the image relies on, read back from the file.
	tr := tar.NewReader(bytes.NewReader(got))
	seen := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		seen[h.Name] = h
	}
	if h := seen["data/"]; h == nil || h.Uid != nonroot || h.Gid != nonroot || h.Typeflag != tar.TypeDir {
		t.Errorf("data/ is %+v, want a directory owned by %d:%d", h, nonroot, nonroot)
	}
	if h := seen["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ is %+v, want mode 1777", h)
	}
}

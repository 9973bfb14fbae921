package regularfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/manent-io/manent/pkg/regularfile"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	regular := write("regular", "hello\n")
	empty := write("empty", "")
	exact := write("exact", strings.Repeat("x", 16))
	large := write("large", strings.Repeat("x", 17))
	pipe := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	linkToPipe := filepath.Join(dir, "link-to-pipe")
	if err := os.Symlink(pipe, linkToPipe); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		path     string
		follow   regularfile.Follow
		want     string
		wantMode fs.FileMode // the type of a *NotRegularError
		wantErr  error       // errors.Is
	}{
		{name: "regular", path: regular, follow: regularfile.NoFollow, want: "hello\n"},
		{name: "empty", path: empty, follow: regularfile.NoFollow, want: ""},
		{name: "exactly the limit", path: exact, follow: regularfile.FollowLinks, want: strings.Repeat("x", 16)},
		{name: "too large", path: large, follow: regularfile.FollowLinks, wantErr: regularfile.ErrTooLarge},
		{name: "missing", path: filepath.Join(dir, "missing"), follow: regularfile.FollowLinks, wantErr: fs.ErrNotExist},
		{name: "missing, no follow", path: filepath.Join(dir, "missing"), follow: regularfile.NoFollow, wantErr: fs.ErrNotExist},
		{name: "below a file", path: filepath.Join(regular, "x"), follow: regularfile.NoFollow, wantErr: syscall.ENOTDIR},
		{name: "pipe", path: pipe, follow: regularfile.FollowLinks, wantMode: fs.ModeNamedPipe},
		{name: "pipe, no follow", path: pipe, follow: regularfile.NoFollow, wantMode: fs.ModeNamedPipe},
		{name: "directory", path: sub, follow: regularfile.FollowLinks, wantMode: fs.ModeDir},
		{name: "device", path: "/dev/zero", follow: regularfile.FollowLinks, wantMode: fs.ModeDevice | fs.ModeCharDevice},
		{name: "link followed", path: link, follow: regularfile.FollowLinks, want: "hello\n"},
		{name: "link refused", path: link, follow: regularfile.NoFollow, wantMode: fs.ModeSymlink},
		{name: "link to a pipe followed", path: linkToPipe, follow: regularfile.FollowLinks, wantMode: fs.ModeNamedPipe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := regularfile.Read(tc.path, 16, tc.follow)
			var nr *regularfile.NotRegularError
			switch {
			case tc.wantMode != 0:
				if !errors.As(err, &nr) {
					t.Fatalf("got %q, %v; want a *NotRegularError", got, err)
				}
				if nr.Mode != tc.wantMode || nr.Name != tc.path {
					t.Fatalf("got %s %s; want %s %s", nr.Name, nr.Mode, tc.path, tc.wantMode)
				}
				if !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("got %q, want the path in it", err)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %q, %v; want %v", got, err, tc.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if got == nil || string(got) != tc.want {
					t.Fatalf("got %#v, want %q (non-nil)", got, tc.want)
				}
			}
		})
	}
}

package web

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
)

// staticHandler serves the embedded files with strong ETags; pages link
// them with ?v=<hash>, so they may be cached for long.
func staticHandler(files fs.FS) http.Handler {
	type file struct {
		body []byte
		etag string
		typ  string
	}
	all := map[string]file{}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		typ := "application/octet-stream"
		switch {
		case strings.HasSuffix(p, ".js"):
			typ = "text/javascript; charset=utf-8"
		case strings.HasSuffix(p, ".css"):
			typ = "text/css; charset=utf-8"
		case strings.HasSuffix(p, ".svg"):
			typ = "image/svg+xml"
		}
		all[p] = file{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, typ: typ}
		return nil
	})
	names := make([]string, 0, len(all))
	for p := range all {
		names = append(names, p)
	}
	slices.Sort(names)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := all[r.URL.Path]
		if !ok {
			writeProblem(w, http.StatusNotFound, fmt.Sprintf("no static file %q: the UI's files are %s",
				manent.ClipText(r.URL.Path, 64), strings.Join(names, ", ")))
			return
		}
		w.Header().Set("Content-Type", f.typ)
		w.Header().Set("ETag", f.etag)
		w.Header().Set("Cache-Control", "public, max-age=300")
		if r.Header.Get("If-None-Match") == f.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(f.body)
	})
}

package web

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/manent-io/manent/pkg/manent"
)

// staticFile is one embedded static file.
type staticFile struct {
	body []byte
	// version is its content's hash: its ETag, and the ?v= of the
	// address pages link it by (assetPath).
	version string
	typ     string
}

// embeddedStatic is the UI's embedded static files, by name.
var embeddedStatic = sync.OnceValue(func() map[string]staticFile {
	sub, _ := fs.Sub(staticFS, "static")
	return loadStatic(sub)
})

// loadStatic reads every file of files with its version and type.
func loadStatic(files fs.FS) map[string]staticFile {
	all := map[string]staticFile{}
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
		all[p] = staticFile{body: b, version: hex.EncodeToString(sum[:8]), typ: typ}
		return nil
	})
	return all
}

// assetPath is the address pages link static file name by: under the UI's
// path prefix, with ?v=<its version>, so that a browser caches it for
// long and a new release's page never runs an older release's script
// or stylesheet (the address changes with the content).
func assetPath(prefix, name string) string {
	return prefix + "/static/" + name + "?v=" + embeddedStatic()[name].version
}

// immutable is how long a static file asked for by its current version is
// cached: its address changes with its content.
const immutable = "public, max-age=31536000, immutable"

// staticHandler serves the embedded files with strong ETags. A file asked
// for with its current ?v= (assetPath) may be cached for a year; without
// it (or with an older release's) for 5 minutes, then revalidated.
func staticHandler(all map[string]staticFile) http.Handler {
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
		etag := `"` + f.version + `"`
		w.Header().Set("Content-Type", f.typ)
		w.Header().Set("ETag", etag)
		if r.URL.Query().Get("v") == f.version {
			w.Header().Set("Cache-Control", immutable)
		} else {
			w.Header().Set("Cache-Control", "public, max-age=300")
		}
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(f.body)
	})
}

package servercmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/node"
)

// docs/operations.md's "Every key of manent-server.yaml" lists exactly the
// keys of node.Config (a key read but documented nowhere was a setting no
// operator could find; a key documented but not read, an "unknown key"
// error on the first try), and each default the server sets itself
// (loadConfig's) is the one the table shows first.
func TestEveryConfigKeyIsDocumented(t *testing.T) {
	doc := docSection(t, filepath.Join("..", "..", "docs", "operations.md"), "## Every key of manent-server.yaml")
	row := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\| ([^|]*) \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		if _, dup := documented[m[1]]; dup {
			t.Errorf("docs/operations.md lists %s twice", m[1])
		}
		documented[m[1]] = strings.TrimSpace(m[2])
	}

	t.Setenv("MANENT_DATABASE", "")
	defaults, err := loadConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]reflect.Value{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		t := v.Type()
		if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
			walk(reflect.New(t.Elem()).Elem(), path) // auth.oidc: nil by default
			return
		}
		if t.Kind() != reflect.Struct || t == durationType {
			read[path] = v
			return
		}
		for i := range t.NumField() {
			key, ok := configKey(t.Field(i))
			if !ok {
				continue
			}
			if path != "" {
				key = path + "." + key
			}
			walk(v.Field(i), key)
		}
	}
	walk(reflect.ValueOf(*defaults), "")

	for key, v := range read {
		cell, ok := documented[key]
		if !ok {
			t.Errorf("%s is read by the server (pkg/node/config.go) but not in docs/operations.md's table of keys", key)
			continue
		}
		if v.IsZero() || key == "data_dir" || key == "database" {
			continue // a default applied later, or a path made absolute
		}
		got, _, _ := strings.Cut(strings.TrimPrefix(cell, "`"), "`")
		if !sameValue(v, got) {
			t.Errorf("%s: docs/operations.md says the default is %s, the server's is %v", key, cell, v.Interface())
		}
	}
	for key := range documented {
		if _, ok := read[key]; !ok {
			t.Errorf("docs/operations.md documents %s, which the server does not read: a configuration that sets it is refused as an unknown key", key)
		}
	}
	if len(read) < 50 {
		t.Fatalf("found %d keys in node.Config: the walk is broken", len(read))
	}
}

// sameValue says whether the documented default text equals v.
func sameValue(v reflect.Value, text string) bool {
	if d, ok := v.Interface().(time.Duration); ok {
		got, err := time.ParseDuration(text)
		return err == nil && got == d
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, 64)
		return err == nil && n == v.Int()
	}
	return text == fmt.Sprint(v.Interface())
}

// Every manent-server.yaml shown in README.md and docs/*.md (a YAML block
// whose top-level keys are all the server's) loads as it is.
func TestDocumentedServerConfigsLoad(t *testing.T) {
	// The kind of each top-level key: a descriptor's callbacks: and
	// health: are lists, the server's mappings.
	// A descriptor's secrets: is a mapping as the server's is: there, a
	// mapping is the server's when its keys are the server's.
	top := map[string]reflect.Kind{}
	subkeys := map[string]map[string]bool{}
	cfg := reflect.TypeFor[node.Config]()
	for i := range cfg.NumField() {
		if key, ok := configKey(cfg.Field(i)); ok {
			ft := cfg.Field(i).Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			k := ft.Kind()
			if k == reflect.Struct {
				k = reflect.Map
				subkeys[key] = map[string]bool{}
				for j := range ft.NumField() {
					if sub, ok := configKey(ft.Field(j)); ok {
						subkeys[key][sub] = true
					}
				}
			}
			top[key] = k
		}
	}
	// The descriptor's mappings (secrets:), whose keys are the user's.
	descMaps := map[string]bool{}
	dt := reflect.TypeFor[descriptor.Descriptor]()
	for i := range dt.NumField() {
		name, _, _ := strings.Cut(dt.Field(i).Tag.Get("json"), ",")
		if dt.Field(i).Type.Kind() == reflect.Map {
			descMaps[name] = true
		}
	}
	ownKeys := func(key string, v any) bool {
		m, ok := v.(map[string]any)
		if !ok || subkeys[key] == nil || !descMaps[key] {
			return true
		}
		for sub := range m {
			if !subkeys[key][sub] {
				return false
			}
		}
		return true
	}
	kindOf := func(v any) reflect.Kind {
		switch v.(type) {
		case map[string]any:
			return reflect.Map
		case []any:
			return reflect.Slice
		}
		return reflect.String
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	loaded := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatchIndex(data, -1) {
			text := data[m[2]:m[3]]
			line := strings.Count(string(data[:m[0]]), "\n") + 1
			var doc map[string]any
			if yaml.Unmarshal(text, &doc) != nil || len(doc) == 0 {
				continue // a list, a fragment, not YAML
			}
			server := true
			for k, v := range doc {
				want, ok := top[k]
				server = server && ok && ownKeys(k, v) && (kindOf(v) == want || kindOf(v) == reflect.String && want != reflect.Map && want != reflect.Slice)
			}
			if !server {
				continue // a descriptor, governance.yaml, an environment's file
			}
			// The placeholder the reader replaces with the hash
			// admin new-token prints (checked when the file loads).
			text = bytes.ReplaceAll(text, []byte("<hex sha256 of the token>"), []byte(strings.Repeat("0", 64)))
			path := filepath.Join(t.TempDir(), "manent-server.yaml")
			if err := os.WriteFile(path, text, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := loadConfig(path, nil); err != nil {
				t.Errorf("%s:%d: the manent-server.yaml shown does not load: %v", filepath.Base(file), line, err)
			}
			loaded++
		}
	}
	if loaded < 10 {
		t.Fatalf("found %d server configurations in the docs: the extraction is broken", loaded)
	}
}

// docSection returns the text of file from the heading to the next heading
// of the same level.
func docSection(t *testing.T, file, heading string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %q", file, heading)
	}
	s = s[i+len(heading)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

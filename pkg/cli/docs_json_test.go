package cli_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
)

// The JSON a script reads from `manent activity -o json` (GET
// /api/v1/activity) and `manent schedules -o json` (GET
// /api/v1/schedules) is documented field by field: a CI author writing
// --jq against them found only a jq example and `next_tick`.
func TestDocsNameTheJSONFields(t *testing.T) {
	for _, c := range []struct {
		doc   string
		types []any
	}{
		{"ci.md", []any{api.ActivityResult{}, api.ActivityGroup{}, api.ActivityItem{}}},
		{"descriptor.md", []any{api.SchedulesResult{}, api.Schedule{}}},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", c.doc))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, v := range c.types {
			rt := reflect.TypeOf(v)
			for i := 0; i < rt.NumField(); i++ {
				name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
				if name == "" || name == "-" {
					continue
				}
				// `name`, or "name" in a JSON shape such as `{"id", "state"}`.
				if !strings.Contains(text, "`"+name+"`") && !strings.Contains(text, `"`+name+`"`) {
					t.Errorf("docs/%s does not name the field `%s` of %s", c.doc, name, rt.Name())
				}
			}
		}
	}
}

package cli

import (
	"bytes"
	"testing"
)

func TestExporter(t *testing.T) {
	type inner struct {
		B string `json:"b"`
	}
	v := struct {
		Zeta    string         `json:"zeta"`
		Version string         `json:"version"`
		Flag    string         `json:"flag"`
		Empty   string         `json:"empty"`
		Null    *inner         `json:"null"`
		List    []inner        `json:"list"`
		Map     map[string]int `json:"map"`
		HTML    string         `json:"html"`
	}{Zeta: "first", Version: "1.4", Flag: "true", List: []inner{{B: "x"}}, Map: map[string]int{"n": 3}, HTML: "<a&b>"}

	tests := []struct {
		format Format
		want   string
	}{
		{FormatJSON, `{
  "zeta": "first",
  "version": "1.4",
  "flag": "true",
  "empty": "",
  "null": null,
  "list": [
    {
      "b": "x"
    }
  ],
  "map": {
    "n": 3
  },
  "html": "<a&b>"
}
`},
		// Same document, same key order; strings that would read as
		// another type stay quoted.
		{FormatYAML, `zeta: first
version: "1.4"
flag: "true"
empty: ""
"null": null
list:
  - b: x
map:
  n: 3
html: <a&b>
`},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			var buf bytes.Buffer
			if err := NewExporter(tt.format).Write(&buf, v); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	if NewExporter(FormatTable) != nil {
		t.Error("NewExporter(table) is not nil")
	}
}

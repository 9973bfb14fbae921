package descriptor

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/descriptors")

const testdata = "../testdata/descriptors"

// descriptorFiles returns the .yml files of testdata/descriptors/<dir>.
func descriptorFiles(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, dir, "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no descriptors in %s/%s", testdata, dir)
	}
	return files
}

// golden compares got with the .golden file next to file, or rewrites it
// with -update.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := strings.TrimSuffix(file, ".yml") + ".golden"
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./descriptor -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test ./descriptor -update after checking)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// invalidError asserts err is the EInvalid *manent.Error Parse returns for
// bad input, and returns it.
func invalidError(t *testing.T, err error) *manent.Error {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want an invalid descriptor")
	}
	var e *manent.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %T %v, want *manent.Error", err, err)
	}
	if got, want := e.Code, manent.EInvalid; got != want {
		t.Fatalf("got code %q, want %q (%v)", got, want, err)
	}
	if len(e.Fields) == 0 {
		t.Fatalf("got no field errors in %v", err)
	}
	noun := "errors"
	if len(e.Fields) == 1 {
		noun = "error"
	}
	if got, want := e.Message, fmt.Sprintf("descriptor is invalid: %d %s", len(e.Fields), noun); got != want && len(e.Fields) < maxErrors {
		t.Errorf("got message %q, want %q", got, want)
	}
	for i := 1; i < len(e.Fields); i++ {
		a, b := e.Fields[i-1], e.Fields[i]
		if a.Line > b.Line || (a.Line == b.Line && a.Column > b.Column) {
			t.Errorf("field errors not sorted by position: %+v before %+v", a, b)
		}
	}
	return e
}

func TestParseValid(t *testing.T) {
	for _, file := range descriptorFiles(t, "valid") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Parse(data)
			if err != nil {
				var e *manent.Error
				if errors.As(err, &e) {
					t.Fatalf("got %v: %+v, want a valid descriptor", err, e.Fields)
				}
				t.Fatalf("got %v, want a valid descriptor", err)
			}
			got, err := json.MarshalIndent(d, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, file, got)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, file := range descriptorFiles(t, "invalid") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Parse(data)
			if d != nil {
				t.Errorf("got descriptor %+v with an error", d)
			}
			e := invalidError(t, err)
			got, err := json.MarshalIndent(e.Fields, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, file, got)
		})
	}
}

// valid is a minimal valid descriptor that tests extend.
const valid = `apiVersion: manent/v1
application: billing
environment: prod
version: "1.4.2"
artifact: {url: "https://artifacts.example/billing.tgz"}
`

func TestParseFieldErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want manent.FieldError
	}{
		{
			name: "unknown field at the key",
			in:   valid + "replica: 3\n",
			want: manent.FieldError{Path: "/replica", Message: `unknown field "replica"`, Line: 6, Column: 1},
		},
		{
			name: "unknown field with a suggestion",
			in:   strings.Replace(valid, "environment:", "enviroment:", 1) + "",
			want: manent.FieldError{Path: "/enviroment", Message: `unknown field "enviroment" (did you mean "environment"?)`, Line: 3, Column: 1},
		},
		{
			name: "missing field at its parent",
			in:   strings.Replace(valid, `version: "1.4.2"`+"\n", "", 1),
			want: manent.FieldError{Path: "/version", Message: `missing required field "version"`, Line: 1, Column: 1},
		},
		{
			name: "missing nested field",
			in:   strings.Replace(valid, `artifact: {url: "https://artifacts.example/billing.tgz"}`, "artifact:\n  sha256: "+strings.Repeat("a", 64), 1),
			want: manent.FieldError{Path: "/artifact/url", Message: `missing required field "url"`, Line: 6, Column: 3},
		},
		{
			// A Cyrillic "а" looks like "a": the message names it.
			name: "pattern with a lookalike",
			in:   strings.Replace(valid, "application: billing", "application: bill\u0456ng", 1),
			want: manent.FieldError{Path: "/application", Message: `must match ^[a-z0-9][a-z0-9-]{0,62}$ (lowercase letters, digits and "-", starting with a letter or digit, at most 63 characters): "billіng" has U+0456 at character 5, which is not ASCII (a lookalike of a Latin letter? retype it)`, Line: 2, Column: 14},
		},
		{
			name: "pattern with an invisible character",
			in:   strings.Replace(valid, "application: billing", "application: billing\u202e", 1),
			want: manent.FieldError{Path: "/application", Message: `must match ^[a-z0-9][a-z0-9-]{0,62}$ (lowercase letters, digits and "-", starting with a letter or digit, at most 63 characters): "billing\u202e" has U+202E at character 8, which is not ASCII (an invisible or formatting character? delete it)`, Line: 2, Column: 14},
		},
		{
			name: "duration out of range",
			in:   valid + "health:\n  - url: http://billing.example/\n    timeout: 3000000h\n",
			want: manent.FieldError{Path: "/health/0/timeout", Message: `duration "3000000h" is too long: the most is 2562047h (about 292 years)`, Line: 8, Column: 14},
		},
		{
			name: "pattern",
			in:   strings.Replace(valid, "application: billing", "application: Billing", 1),
			want: manent.FieldError{Path: "/application", Message: `must match ^[a-z0-9][a-z0-9-]{0,62}$ (lowercase letters, digits and "-", starting with a letter or digit, at most 63 characters): "Billing"`, Line: 2, Column: 14},
		},
		{
			name: "number where text is expected",
			in:   strings.Replace(valid, `version: "1.4.2"`, "version: 1.10", 1),
			want: manent.FieldError{Path: "/version", Message: `must be a string, got a number: quote it ("1.10") to keep it as text`, Line: 4, Column: 10},
		},
		{
			name: "integer that would lose digits",
			in:   valid + "parameters: {build: 12345678901234567890}\n",
			want: manent.FieldError{Path: "/parameters/build", Message: `the integer 12345678901234567890 cannot be kept exactly (it is beyond ±2^53); quote it to pass it as a string`, Line: 6, Column: 21},
		},
		{
			// Quoted, it would be a string where an integer is wanted: the
			// field's range is what helps.
			name: "integer field beyond 2^53",
			in:   valid + "max_retries: 99999999999999999999\n",
			want: manent.FieldError{Path: "/max_retries", Message: `must be an integer from 0 to 20, got 99999999999999999999`, Line: 6, Column: 14},
		},
		{
			name: "integer field of a list item beyond 2^53",
			in:   valid + "health:\n  - {url: http://billing.example/, retries: -9007199254740993}\n",
			want: manent.FieldError{Path: "/health/0/retries", Message: `must be an integer from 0 to 100, got -9007199254740993`, Line: 7, Column: 45},
		},
		{
			name: "integer just past 2^53",
			in:   valid + "parameters: {build: -9007199254740993}\n",
			want: manent.FieldError{Path: "/parameters/build", Message: `the integer -9007199254740993 cannot be kept exactly (it is beyond ±2^53); quote it to pass it as a string`, Line: 6, Column: 21},
		},
		{
			name: "duplicate key",
			in:   valid + "application: shop\n",
			want: manent.FieldError{Path: "/application", Message: `duplicate field "application" (first at line 2)`, Line: 6, Column: 1},
		},
		{
			name: "schedule at and cron",
			in:   valid + "schedule: {at: 2026-12-24T06:00:00Z, cron: '@daily'}\n",
			want: manent.FieldError{Path: "/schedule/cron", Message: `set either "at" (run once) or "cron" (recurring), not both`, Line: 6, Column: 38},
		},
		{
			name: "schedule at without zone",
			in:   valid + "schedule: {at: 2026-12-24T06:00:00}\n",
			want: manent.FieldError{Path: "/schedule/at", Message: `must be an RFC 3339 date-time with a time zone, e.g. 2026-12-24T06:00:00Z: "2026-12-24T06:00:00"`, Line: 6, Column: 16},
		},
		{
			name: "schedule at leap second",
			in:   valid + "schedule: {at: 2026-12-31T23:59:60Z}\n",
			want: manent.FieldError{Path: "/schedule/at", Message: `must be an RFC 3339 date-time with a time zone, e.g. 2026-12-24T06:00:00Z: "2026-12-31T23:59:60Z"`, Line: 6, Column: 16},
		},
		{
			name: "source committed_at without zone",
			in:   valid + "source: {commit: abc, committed_at: 2026-11-30T16:04:05}\n",
			want: manent.FieldError{Path: "/source/committed_at", Message: `must be an RFC 3339 date-time with a time zone, e.g. 2026-12-24T06:00:00Z: "2026-11-30T16:04:05"`, Line: 6, Column: 37},
		},
		{
			name: "source control character",
			in:   valid + "source: {repository: \"a\\eb\"}\n",
			want: manent.FieldError{Path: "/source/repository", Message: `must match ^[^\x00-\x1f\x7f]+$ (one line of text without control characters): "a\x1bb"`, Line: 6, Column: 22},
		},
		{
			name: "source commit all digits",
			in:   valid + "source: {commit: 1234567}\n",
			want: manent.FieldError{Path: "/source/commit", Message: `must be a string, got a number: quote it ("1234567") to keep it as text`, Line: 6, Column: 18},
		},
		{
			name: "source unknown field",
			in:   valid + "source: {branch: main}\n",
			want: manent.FieldError{Path: "/source/branch", Message: `unknown field "branch"`, Line: 6, Column: 10},
		},
		{
			name: "cron",
			in:   valid + "schedule:\n  cron: '0 3 * *'\n",
			want: manent.FieldError{Path: "/schedule/cron", Message: `invalid cron expression "0 3 * *": expected exactly 5 fields, found 4: [0 3 * *] (want 5 fields: minute hour day-of-month month day-of-week, optionally after CRON_TZ=<zone>, or @hourly, @daily, @weekly, @monthly, @every 1h…)`, Line: 7, Column: 9},
		},
		{
			name: "cron zone",
			in:   valid + "schedule: {cron: 'CRON_TZ=Mars/Olympus 0 3 * * *'}\n",
			want: manent.FieldError{Path: "/schedule/cron", Message: `invalid cron expression "CRON_TZ=Mars/Olympus 0 3 * * *": CRON_TZ=Mars/Olympus: unknown time zone (want 5 fields: minute hour day-of-month month day-of-week, optionally after CRON_TZ=<zone>, or @hourly, @daily, @weekly, @monthly, @every 1h…)`, Line: 6, Column: 18},
		},
		{
			name: "escape sequence in version",
			in:   strings.Replace(valid, `version: "1.4.2"`, `version: "1.4.2\e[2J\e]0;pwned\a"`, 1),
			want: manent.FieldError{Path: "/version", Message: "version must be a single line of plain text: it contains an escape character (U+001B, terminal escape sequences) at character 6", Line: 4, Column: 10},
		},
		{
			name: "line break in a wave name",
			in:   valid + "rollout:\n  waves:\n    - {name: \"canary\\nSUCCESS\", targets: [eu-1]}\n",
			want: manent.FieldError{Path: "/rollout/waves/0/name", Message: "rollout.waves[0].name must be a single line of plain text: it contains a line break (U+000A) at character 7", Line: 8, Column: 14},
		},
		{
			name: "C1 control in a target",
			in:   valid + "rollout:\n  waves:\n    - {name: canary, targets: [\"eu\\x9b2J\"]}\n",
			want: manent.FieldError{Path: "/rollout/waves/0/targets/0", Message: "rollout.waves[0].targets[0] must be a single line of plain text: it contains the control character U+009B at character 3", Line: 8, Column: 32},
		},
		{
			name: "bidirectional override in a secret name",
			in:   valid + "secrets:\n  \"DB\\u202ePASS\": env:X\n",
			want: manent.FieldError{Path: `/secrets/DB\u202EPASS`, Message: `the field name "DB\u202ePASS" must be plain text: it contains the bidirectional-text control U+202E at character 3`, Line: 7, Column: 3},
		},
		{
			name: "bidirectional override in a parameter name",
			in:   valid + "parameters:\n  \"replicas\\u202e\": 3\n",
			want: manent.FieldError{Path: `/parameters/replicas\u202E`, Message: `the field name "replicas\u202e" must be plain text: it contains the bidirectional-text control U+202E at character 9`, Line: 7, Column: 3},
		},
		{
			name: "right-to-left mark in a version",
			in:   strings.Replace(valid, "version: ", "version: \"1.2\\u200f.3\" # ", 1),
			want: manent.FieldError{Path: "/version", Message: "version must be a single line of plain text: it contains the bidirectional-text mark U+200F at character 4", Line: 4, Column: 10},
		},
		{
			name: "Arabic letter mark in a parameter name",
			in:   valid + "parameters:\n  \"replicas\\u061c\": 3\n",
			want: manent.FieldError{Path: `/parameters/replicas\u061C`, Message: `the field name "replicas\u061c" must be plain text: it contains the bidirectional-text mark U+061C at character 9`, Line: 7, Column: 3},
		},
		{
			name: "line break in a nested parameter name",
			in:   valid + "parameters:\n  db:\n    pool: {\"max\\nsize\": 3}\n",
			want: manent.FieldError{Path: `/parameters/db/pool/max\u000Asize`, Message: `the field name "max\nsize" must be plain text: it contains a line break (U+000A) at character 4`, Line: 8, Column: 12},
		},
		{
			name: "isolate in a step's with name",
			in:   valid + "steps: [{name: smoke, before: deploy, plugin: script, with: {env: {\"A\\u2066B\": x}}}]\n",
			want: manent.FieldError{Path: `/steps/0/with/env/A\u2066B`, Message: `the field name "A\u2066B" must be plain text: it contains the bidirectional-text control U+2066 at character 2`, Line: 6, Column: 68},
		},
		{
			name: "escape sequence in a cron expression",
			in:   valid + "schedule: {cron: \"@daily\\e[2J\"}\n",
			want: manent.FieldError{Path: "/schedule/cron", Message: "schedule.cron must be a single line of plain text: it contains an escape character (U+001B, terminal escape sequences) at character 7", Line: 6, Column: 18},
		},
		{
			name: "step before unknown step",
			in:   valid + "steps: [{name: smoke, before: activaton, plugin: script}]\n",
			want: manent.FieldError{Path: "/steps/0/before", Message: `unknown step "activaton" (did you mean "activation"?); known steps: secrets, artifacts, qa, deploy, post-test, activation, smoke`, Line: 6, Column: 31},
		},
		{
			name: "step named like a built-in",
			in:   valid + "steps: [{name: cleanup, after: deploy, plugin: script}]\n",
			want: manent.FieldError{Path: "/steps/0/name", Message: `"cleanup" is a built-in step; choose another name`, Line: 6, Column: 16},
		},
		{
			name: "step after a built-in step outside the plan",
			in:   valid + "steps: [{name: x, after: config, plugin: script}]\n",
			want: manent.FieldError{Path: "/steps/0/after", Message: `unknown step "config"; known steps: secrets, artifacts, qa, deploy, post-test, activation, x`, Line: 6, Column: 26},
		},
		{
			name: "rollback on a custom step that does not exist",
			in:   valid + "rollback: {on: [smoke]}\n",
			want: manent.FieldError{Path: "/rollback/on/0", Message: `unknown step "smoke"; known steps: secrets, artifacts, qa, deploy, post-test, activation`, Line: 6, Column: 17},
		},
		{
			name: "percentages not ending at 100",
			in:   valid + "rollout: {percentages: [10, 50]}\n",
			want: manent.FieldError{Path: "/rollout/percentages/1", Message: "the last percentage must be 100, got 50", Line: 6, Column: 29},
		},
		{
			name: "duplicate wave",
			in:   valid + "rollout:\n  waves:\n  - {name: a, targets: [x]}\n  - {name: a, targets: [y]}\n",
			want: manent.FieldError{Path: "/rollout/waves/1/name", Message: `duplicate wave name "a" (first at line 8)`, Line: 9, Column: 12},
		},
		{
			name: "health timeout zero",
			in:   valid + "health: [{url: 'http://x/', timeout: 0s}]\n",
			want: manent.FieldError{Path: "/health/0/timeout", Message: `must be more than zero, got "0s"`, Line: 6, Column: 38},
		},
		{
			name: "error inside a merged mapping points at its source",
			in:   valid + "x: &x {url: ftp://a}\nhealth: [{<<: *x}]\n",
			want: manent.FieldError{Path: "/health/0/url", Message: `must match ^https?://\S+$ (an http:// or https:// URL): "ftp://a"`, Line: 6, Column: 13},
		},
		{
			name: "artifact path relative to deploy.yml",
			in:   strings.Replace(valid, `url: "https://artifacts.example/billing.tgz"`, `url: ./dist/billing.tgz`, 1),
			want: manent.FieldError{Path: "/artifact/url", Message: `must match ^(https?|file)://\S+$ (an http://, https:// or file:// URL): "./dist/billing.tgz"; a file on the server's machine is written with its absolute path, file:///path/to/artifact.tar.gz (the server does not read paths relative to deploy.yml)`, Line: 5, Column: 17},
		},
		{
			name: "artifact absolute path",
			in:   strings.Replace(valid, `url: "https://artifacts.example/billing.tgz"`, `url: /tmp/billing.tgz`, 1),
			want: manent.FieldError{Path: "/artifact/url", Message: `must match ^(https?|file)://\S+$ (an http://, https:// or file:// URL): "/tmp/billing.tgz"; a file on the server's machine is written file:///tmp/billing.tgz`, Line: 5, Column: 17},
		},
		{
			name: "infinite number",
			in:   valid + "parameters: {ratio: .inf}\n",
			want: manent.FieldError{Path: "/parameters/ratio", Message: "must be a finite number, got .inf", Line: 6, Column: 21},
		},
		{
			name: "escaped path",
			in:   valid + "parameters: {a/b: 1, a/b: 2}\n",
			want: manent.FieldError{Path: "/parameters/a~1b", Message: `duplicate field "a/b" (first at line 6)`, Line: 6, Column: 22},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.in))
			e := invalidError(t, err)
			for _, got := range e.Fields {
				if got == tt.want {
					return
				}
			}
			t.Errorf("got %+v, want it to contain %+v", e.Fields, tt.want)
		})
	}
}

func TestParseDefaults(t *testing.T) {
	in := valid + "health: [{url: 'http://x/'}]\ncallbacks: [{url: 'https://ci/'}]\n"
	d, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Health[0].Expect, DefaultHealthExpect; got != want {
		t.Errorf("got expect %d, want %d", got, want)
	}
	if got, want := d.Callbacks[0].Events, CallbackEvents(); !reflect.DeepEqual(got, want) {
		t.Errorf("got events %v, want %v", got, want)
	}
}

func TestParseSource(t *testing.T) {
	d, err := Parse([]byte(valid + "source:\n  repository: https://github.com/example/billing\n  commit: \"0123456\"\n  committed_at: 2026-11-30T16:04:05+01:00\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Source{Repository: "https://github.com/example/billing", Commit: "0123456", CommittedAt: "2026-11-30T16:04:05+01:00"}
	if d.Source == nil || *d.Source != want {
		t.Fatalf("source = %+v, want %+v", d.Source, want)
	}
	at, ok := d.Source.CommitTime()
	if !ok || !at.Equal(time.Date(2026, 11, 30, 15, 4, 5, 0, time.UTC)) {
		t.Fatalf("CommitTime = %v %v", at, ok)
	}
}

func TestParseScheduleAt(t *testing.T) {
	d, err := Parse([]byte(valid + "schedule: {at: 2026-12-24T07:00:00+01:00}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Schedule.At, time.Date(2026, 12, 24, 6, 0, 0, 0, time.UTC); got == nil || !got.Equal(want) {
		t.Errorf("got at %v, want %v", got, want)
	}
}

// billionLaughs is the classic alias bomb: 9 levels of 9 aliases each, a
// few hundred bytes that expand to 9^9 values.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString(valid + "parameters:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 9; i++ {
		ref := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, strings.Repeat(ref+", ", 8)+ref)
	}
	return b.String()
}

func TestParseBadInput(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string // in the message of the first field error
	}{
		{"empty", nil, "the descriptor is empty"},
		{"blank", []byte("\n\n   \n"), "the descriptor is empty"},
		{"only a document marker", []byte("---\n"), "the descriptor is empty"},
		{"binary garbage", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8"), "not UTF-8 text"},
		{"NUL byte", []byte("apiVersion: manent/v1\x00\n"), "NUL byte"},
		{"UTF-16", []byte("\xff\xfea\x00p\x00i\x00"), "not UTF-8 text"},
		{"control character", []byte("apiVersion: \x1b[31mmanent/v1\n"), "control character U+001B"},
		{"billion laughs", []byte(billionLaughs()), "expands to more than 100000 values"},
		{"deep flow sequence", []byte("a: " + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)), "nested more than 64 levels deep"},
		{"deep flow mapping", []byte(strings.Repeat("{a: ", 10_000) + "1" + strings.Repeat("}", 10_000)), "nested more than 64 levels deep"},
		{"deep block sequence", []byte("a:\n" + strings.Repeat("- ", 10_000) + "x\n"), "nested more than 64 levels deep"},
		{"deep block mapping", []byte(deepBlockMapping(1_000)), "nested more than 64 levels deep"},
		{"unclosed flow", []byte(strings.Repeat("[", 20_000)), "invalid YAML"},
		{"5 MB", bytes.Repeat([]byte("# padding padding padding\n"), 5<<20/26), "larger than 1 MiB"},
		{"just over the limit", append([]byte(valid), bytes.Repeat([]byte("#"), MaxSize)...), "larger than 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Parse(tt.in)
			if d != nil {
				t.Errorf("got a descriptor, want none")
			}
			e := invalidError(t, err)
			if got := e.Fields[0].Message; !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestParseManyErrors(t *testing.T) {
	in := valid + "parameters:\n" + strings.Repeat("  k: 1\n", 5000)
	_, err := Parse([]byte(in))
	e := invalidError(t, err)
	if got, want := e.Message, "descriptor is invalid: more than 100 errors"; got != want {
		t.Errorf("got message %q, want %q", got, want)
	}
	if got, want := len(e.Fields), maxErrors; got != want {
		t.Fatalf("got %d field errors, want %d", got, want)
	}
	// The first ones in the file: the second "k" is on line 8.
	for i, f := range e.Fields[:maxErrors-1] {
		if f.Line != 8+i || !strings.HasPrefix(f.Message, `duplicate field "k"`) {
			t.Fatalf("field error %d is %+v, want the duplicate k of line %d", i, f, 8+i)
		}
	}
	if got, want := e.Fields[maxErrors-1].Message, "… and more errors not shown: fix these and validate again"; got != want {
		t.Errorf("got last message %q, want %q", got, want)
	}
}

// deepBlockMapping nests block mappings depth levels deep, one space of
// indentation per level.
func deepBlockMapping(depth int) string {
	var b strings.Builder
	for i := range depth {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return b.String()
}

func TestParseReader(t *testing.T) {
	t.Run("valid", func(t *testing.T) {
		d, err := ParseReader(strings.NewReader(valid))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Application, "billing"; got != want {
			t.Errorf("got application %q, want %q", got, want)
		}
	})
	t.Run("too large", func(t *testing.T) {
		_, err := ParseReader(io5MB())
		e := invalidError(t, err)
		if got, want := e.Fields[0].Message, "larger than 1 MiB"; !strings.Contains(got, want) {
			t.Errorf("got %q, want it to contain %q", got, want)
		}
	})
	t.Run("read error", func(t *testing.T) {
		cause := errors.New("disk on fire")
		_, err := ParseReader(iotest.ErrReader(cause))
		if !errors.Is(err, cause) {
			t.Errorf("got %v, want it to wrap %v", err, cause)
		}
	})
}

// io5MB reads 5 MB of comments without allocating them up front.
func io5MB() *bytes.Reader { return bytes.NewReader(bytes.Repeat([]byte("#\n"), 5<<20/2)) }

func TestSchema(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if got, want := doc["$schema"], "https://json-schema.org/draft/2020-12/schema"; got != want {
		t.Errorf("got $schema %v, want %v", got, want)
	}
	s := Schema()
	s[0] = 'x'
	if Schema()[0] == 'x' {
		t.Error("Schema returns the embedded bytes, want a copy")
	}
}

// TestSchemaMatchesTypes checks that the schema and the Go types name the
// same fields, so neither drifts from the other.
func TestSchemaMatchesTypes(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	defs, _ := doc["$defs"].(map[string]any)
	deref := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			def, _ := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			return def
		}
		return s
	}
	var walk func(path string, typ reflect.Type, s map[string]any)
	walk = func(path string, typ reflect.Type, s map[string]any) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
			if items, ok := s["items"].(map[string]any); ok {
				s = deref(items)
			}
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() {
			return
		}
		props, _ := s["properties"].(map[string]any)
		fields := map[string]bool{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields[name] = true
			p, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s/%s: in the Go type, not in the schema", path, name)
				continue
			}
			if desc, _ := p["description"].(string); desc == "" {
				t.Errorf("%s/%s: no description in the schema", path, name)
			}
			walk(path+"/"+name, f.Type, deref(p))
		}
		for name := range props {
			if !fields[name] {
				t.Errorf("%s/%s: in the schema, not in the Go type", path, name)
			}
		}
		if s["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties is not false", path)
		}
	}
	walk("", reflect.TypeFor[Descriptor](), doc)
}

func FuzzParse(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		for _, file := range descriptorFiles(f, dir) {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(billionLaughs()))
	for _, tt := range syntaxErrors {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err == nil {
			if d == nil {
				t.Fatal("got a nil descriptor and no error")
			}
			if _, err := json.Marshal(d); err != nil {
				t.Fatalf("valid descriptor does not encode: %v", err)
			}
			return
		}
		if d != nil {
			t.Fatal("got a descriptor and an error")
		}
		var e *manent.Error
		if !errors.As(err, &e) || e.Code != manent.EInvalid || len(e.Fields) == 0 {
			t.Fatalf("got %#v, want an EInvalid *manent.Error with field errors", err)
		}
		// Every position is in the input (a syntax error at its end is on
		// the line after the last break).
		lines := bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) + 1
		for _, fe := range e.Fields {
			if fe.Line < 0 || fe.Line > lines || fe.Column < 0 || (fe.Line == 0) != (fe.Column == 0) {
				t.Fatalf("field error %+v is outside the input's %d lines", fe, lines)
			}
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(testdata, "valid", "full.yml"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Parse(data); err != nil { // compile the schema outside the loop
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/validation")
}

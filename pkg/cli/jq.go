package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/itchyny/gojq"
)

// --jq <expr> (like gh --jq): the JSON output of a command is filtered
// through a jq expression (github.com/itchyny/gojq); each result is printed
// on its own line, a string raw, any other value as compact JSON. --jq
// implies -o json; with an explicit -o table or -o yaml it is a usage
// error, and so is an expression that does not compile. Both are refused
// while the flags are parsed, before the command does anything.

// jqFlag is the pflag.Value behind --jq. It shares the -o value with
// formatValue so that each can refuse the other whichever comes first on
// the command line.
type jqFlag struct {
	expr string
	code *gojq.Code
	// format is the -o value; formatSet says -o was given explicitly.
	format    *Format
	formatSet bool
}

func (j *jqFlag) String() string { return j.expr }

func (j *jqFlag) Type() string { return "expression" }

func (j *jqFlag) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("want a jq expression, e.g. '.id'")
	}
	code, err := compileJQ(s)
	if err != nil {
		return err
	}
	if err := j.conflict(); err != nil {
		return err
	}
	j.expr, j.code = s, code
	return nil
}

// conflict refuses --jq with an explicit -o other than json.
func (j *jqFlag) conflict() error {
	if j.formatSet && *j.format != FormatJSON {
		return fmt.Errorf("--jq filters JSON output and cannot be combined with -o %s (drop -o, --jq implies -o json)", *j.format)
	}
	return nil
}

// compileJQ parses and compiles a jq expression, with the error saying
// where a parse error is.
func compileJQ(expr string) (*gojq.Code, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) && pe.Token != "" {
			return nil, fmt.Errorf("bad jq expression %q: %v (after %d characters)", expr, err, pe.Offset-len(pe.Token))
		}
		return nil, fmt.Errorf("bad jq expression %q: %v", expr, err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, fmt.Errorf("bad jq expression %q: %v", expr, err)
	}
	return code, nil
}

// writeJQ runs code over v's JSON document and writes each result to w:
// strings raw, other values as compact JSON, one per line. A runtime error
// of the expression (e.g. indexing a string) ends the command (exit 1).
func writeJQ(w io.Writer, code *gojq.Code, v any) error {
	data, err := marshalJSON(v, false)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // gojq reads json.Number: big integers keep their digits
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("--jq: decode output: %w", err)
	}
	var buf bytes.Buffer
	iter := code.RunWithContext(context.Background(), doc)
	for {
		r, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := r.(error); isErr {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break // halt: stop without an error
			}
			// What was printed before the error stays printed, like jq.
			_, _ = w.Write(buf.Bytes())
			return fmt.Errorf("--jq: %v", err)
		}
		if s, isString := r.(string); isString {
			buf.WriteString(s)
		} else {
			b, err := gojq.Marshal(r)
			if err != nil {
				_, _ = w.Write(buf.Bytes())
				return fmt.Errorf("--jq: encode result: %w", err)
			}
			buf.Write(b)
		}
		buf.WriteByte('\n')
	}
	_, err = w.Write(buf.Bytes())
	return err
}

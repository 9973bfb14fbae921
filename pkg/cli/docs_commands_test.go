package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/cli"
)

// Every `manent …` command shown in README.md and docs/*.md (in a shell
// block or an indented block) and in each command's --help examples parses
// with the current commands, flags and arguments: a newcomer who copies one
// gets the command's own errors (an unknown deploy, an unreachable server),
// never "unknown flag" or "missing deploy id". A command named in the text
// (`manent status <id>`, `manent rollback --to`) must at least name an
// existing command and flags. Nothing runs: each command's RunE is replaced,
// so cobra checks flags, arguments and required flags only.
func TestDocsCommandsParse(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The control: the check can fail.
	if err := parseCommand([]string{"status", "--bogus", "dpl_x"}); err == nil {
		t.Fatal("manent status --bogus parsed")
	}
	if err := parseCommand([]string{"deploy", "--wait"}); err == nil {
		t.Fatal("manent deploy without -f parsed")
	}
	if err := parseCommand([]string{"deploy", "-f", "deploy.yml", "--wait", "--timeout", "20m"}); err != nil {
		t.Fatalf("manent deploy -f deploy.yml --wait --timeout 20m: %v", err)
	}

	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	shown, named := 0, 0
	for _, file := range files {
		for _, c := range docCommands(t, file) {
			err := parseCommand(c.args)
			if c.inBlock {
				shown++
				if err != nil {
					t.Errorf("%s:%d: manent %s: %v", filepath.Base(file), c.line, strings.Join(c.args, " "), err)
				}
				continue
			}
			named++
			if err != nil && strings.Contains(err.Error(), "unknown") {
				t.Errorf("%s:%d: `manent %s`: %v", filepath.Base(file), c.line, strings.Join(c.args, " "), err)
			}
		}
	}
	if shown < 40 || named < 100 {
		t.Fatalf("found %d commands in shell blocks and %d in the text of the docs: the extraction is broken", shown, named)
	}

	examples := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, l := range strings.Split(c.Example, "\n") {
			for _, args := range manentCommands(l) {
				examples++
				if err := parseCommand(args); err != nil {
					t.Errorf("the examples of '%s --help': manent %s: %v", c.CommandPath(), strings.Join(args, " "), err)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cli.NewCmdRoot(cli.NewFactory(cli.Invocation{Getenv: func(string) string { return "" }})))
	if examples < 40 {
		t.Fatalf("found %d commands in the --help examples: the extraction is broken", examples)
	}
}

// parseCommand runs the CLI's command tree on args with every command's
// action replaced by nothing: the error is cobra's (unknown command or
// flag, wrong arguments, missing required flag) or the Args check's.
func parseCommand(args []string) error {
	var out, errOut bytes.Buffer
	f := cli.NewFactory(cli.Invocation{Args: args, Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	root := cli.NewCmdRoot(f)
	var stub func(c *cobra.Command)
	stub = func(c *cobra.Command) {
		if c.Runnable() {
			c.Run = nil
			c.RunE = func(*cobra.Command, []string) error { return nil }
		}
		for _, sub := range c.Commands() {
			stub(sub)
		}
	}
	stub(root)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	_, err := root.ExecuteContextC(context.Background())
	return err
}

type docCommand struct {
	args    []string
	line    int
	inBlock bool // in a shell or indented block, else named in the text
}

// inlineCommand is a `manent …` code span in the text.
var inlineCommand = regexp.MustCompile("`(?:bin/)?(manent [^`]+)`")

// docCommands returns the manent commands of a Markdown file: those of its
// fenced blocks (sh, bash, console or none; a backslash continues a line),
// the script lines of its YAML blocks (CI pipelines) and indented blocks, and those named in code spans of its text.
func docCommands(t *testing.T, file string) []docCommand {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []docCommand
	fenced, shell, yamlBlock := false, false, false
	pending, pendingLine := "", 0
	for i, l := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			lang := strings.TrimPrefix(trimmed, "```")
			shell = fenced && (lang == "" || lang == "sh" || lang == "bash" || lang == "console" || lang == "shell")
			yamlBlock = fenced && lang == "yaml"
			continue
		}
		if yamlBlock {
			// A CI pipeline's script: "- manent …", "run: manent …" or a
			// line of a "run: |" block.
			line := strings.TrimPrefix(strings.TrimPrefix(trimmed, "- "), "run: ")
			if strings.HasPrefix(line, "manent ") {
				for _, args := range manentCommands(line) {
					cmds = append(cmds, docCommand{args: args, line: i + 1, inBlock: true})
				}
			}
			continue
		}
		if (fenced && shell) || (!fenced && strings.HasPrefix(l, "    ")) {
			if pending == "" {
				pendingLine = i + 1
			}
			if strings.HasSuffix(trimmed, "\\") {
				pending += strings.TrimSuffix(trimmed, "\\") + " "
				continue
			}
			line := pending + strings.TrimPrefix(trimmed, "$ ")
			pending = ""
			if strings.ContainsAny(line, "─│├└►") { // a diagram
				continue
			}
			for _, args := range manentCommands(line) {
				cmds = append(cmds, docCommand{args: args, line: pendingLine, inBlock: true})
			}
			continue
		}
		if fenced {
			continue
		}
		for _, m := range inlineCommand.FindAllStringSubmatch(l, -1) {
			for _, args := range manentCommands(m[1]) {
				cmds = append(cmds, docCommand{args: args, line: i + 1})
			}
		}
	}
	return cmds
}

// manentCommands returns the arguments of each `manent` (or `bin/manent`)
// command of one shell line: split at ; | & ( ) and a comment, quotes
// removed, variable assignments before it and redirections left out. A
// command whose arguments are a placeholder (`manent <command>`) or end in
// an ellipsis is left out.
func manentCommands(line string) [][]string {
	var out [][]string
	for _, words := range shellWords(line) {
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			words = words[1:] // VAR=value manent …
		}
		if len(words) == 0 || (words[0] != "manent" && words[0] != "bin/manent") {
			continue
		}
		var args []string
		for i := 1; i < len(words); i++ {
			w := words[i]
			switch {
			case w == ">" || w == ">>" || w == "<" || w == "2>":
				i++ // and its file
			case strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") || (strings.HasPrefix(w, "<") && !strings.HasSuffix(w, ">")):
			default:
				args = append(args, w)
			}
		}
		if len(args) > 0 && (strings.HasPrefix(args[0], "<") || args[len(args)-1] == "…" || args[len(args)-1] == "...") {
			continue
		}
		out = append(out, args)
	}
	return out
}

// shellWords splits a shell line into the words of its simple commands.
func shellWords(line string) [][]string {
	var (
		cmds   [][]string
		words  []string
		word   strings.Builder
		inWord bool
		quote  byte
	)
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				word.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			endWord()
		case c == '#' && !inWord:
			endCmd()
			return cmds
		case strings.IndexByte(";|&()`", c) >= 0:
			endCmd()
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

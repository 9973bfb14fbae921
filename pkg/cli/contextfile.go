package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/atomicfile"
)

// The CLI config file ($XDG_CONFIG_HOME/manent/config.yaml) holds, besides
// the top-level keys every version reads (server, token, request_timeout),
// named contexts and the one selected:
//
//	current_context: staging
//	contexts:
//	  staging: {server: https://manent-staging.example, token: mnt_…}
//	  prod:    {server: https://manent.example, token_file: /run/secrets/manent}
//
// Context names are case-sensitive, which is why this file parses them with
// yaml.v3 and not through viper (whose keys are case-insensitive).

// contextEntry is one named context.
type contextEntry struct {
	Server string `yaml:"server,omitempty"`
	// Token is stored in the file (login, context add --token-stdin).
	Token string `yaml:"token,omitempty"`
	// TokenFile names a file holding the token, read on each run.
	TokenFile      string `yaml:"token_file,omitempty"`
	RequestTimeout string `yaml:"request_timeout,omitempty"`
}

// cliFile is the parsed config file, as far as contexts are concerned.
type cliFile struct {
	Path           string
	Exists         bool
	Mode           fs.FileMode
	CurrentContext string
	Contexts       map[string]*contextEntry
	// LegacyToken says the file has a top-level token:.
	LegacyToken bool

	doc *yaml.Node // the document, rewritten in place by save
}

// fileContents is what parseCLIFile decodes.
type fileContents struct {
	CurrentContext string                   `yaml:"current_context"`
	Contexts       map[string]*contextEntry `yaml:"contexts"`
	Token          string                   `yaml:"token"`
}

// contextNameRE is what a context name looks like.
var contextNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func checkContextName(name string) error {
	if !contextNameRE.MatchString(name) {
		return &UsageError{
			Err:  fmt.Errorf("invalid context name %q", name),
			Hint: "a context name is 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit",
		}
	}
	return nil
}

// readCLIFile reads the config file at path; a missing file is an empty one.
func readCLIFile(path string) (*cliFile, error) {
	f := &cliFile{Path: path, Contexts: map[string]*contextEntry{}}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, usageErrorf("read config file: %v", unwrapPathError(err))
	}
	f.Exists = true
	if st, err := os.Stat(path); err == nil {
		f.Mode = st.Mode().Perm()
	}
	if err := f.parse(data); err != nil {
		return nil, err
	}
	return f, nil
}

// parse decodes data into f.
func (f *cliFile) parse(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return usageErrorf("config file %s: %v", f.Path, err)
	}
	if doc.Kind == 0 { // empty file
		return nil
	}
	var c fileContents
	if err := doc.Decode(&c); err != nil {
		return usageErrorf("config file %s: %v", f.Path, err)
	}
	f.doc = &doc
	f.CurrentContext = c.CurrentContext
	f.LegacyToken = strings.TrimSpace(c.Token) != ""
	for name, e := range c.Contexts {
		if e == nil {
			e = &contextEntry{}
		}
		f.Contexts[name] = e
	}
	return nil
}

// holdsToken says whether the file stores a token itself.
func (f *cliFile) holdsToken() bool {
	if f.LegacyToken {
		return true
	}
	for _, e := range f.Contexts {
		if e.Token != "" {
			return true
		}
	}
	return false
}

// looseModeWarning returns a warning when the file holds a token and others
// may read it, "" otherwise.
func (f *cliFile) looseModeWarning() string {
	if !f.Exists || f.Mode&0o077 == 0 || !f.holdsToken() {
		return ""
	}
	return fmt.Sprintf("config file %s holds a token and is readable by others (mode %04o): run 'chmod 600 %s'", f.Path, f.Mode, f.Path)
}

// names returns the context names, sorted.
func (f *cliFile) names() []string {
	names := make([]string, 0, len(f.Contexts))
	for n := range f.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lookup returns the named context or a usage error listing the known ones.
func (f *cliFile) lookup(name, from string) (*contextEntry, error) {
	if e, ok := f.Contexts[name]; ok {
		return e, nil
	}
	return nil, f.unknownContext(name, from)
}

func (f *cliFile) unknownContext(name, from string) error {
	known := "none is defined"
	if names := f.names(); len(names) > 0 {
		known = "known contexts: " + strings.Join(names, ", ")
	}
	msg := fmt.Sprintf("unknown context %q", name)
	if from != "" {
		msg += " (" + from + ")"
	}
	where := f.Path
	if where == "" {
		where = "the config file"
	}
	return &UsageError{
		Err:  fmt.Errorf("%s in %s: %s", msg, where, known),
		Hint: "add it with 'manent context add " + name + " --server URL' or 'manent login --context " + name + " --server URL'",
	}
}

// token returns the context's token: the stored one, else the content of
// its token file.
func (e *contextEntry) token(name string) (string, error) {
	if e.Token != "" {
		return strings.TrimSpace(e.Token), nil
	}
	if e.TokenFile == "" {
		return "", nil
	}
	data, err := os.ReadFile(e.TokenFile)
	if err != nil {
		return "", &UsageError{
			Err:  fmt.Errorf("context %q: read token file %s: %w", name, e.TokenFile, unwrapPathError(err)),
			Hint: "fix it with 'manent context add " + name + " --force …' or 'manent login --context " + name + "'",
		}
	}
	return strings.TrimSpace(string(data)), nil
}

// auth says how the context authenticates, never the token itself.
func (e *contextEntry) auth() string {
	switch {
	case e.Token != "":
		return "token"
	case e.TokenFile != "":
		return "token_file"
	}
	return "none"
}

// save writes the file atomically (a temporary file in the same directory,
// renamed over it) with mode 0600, keeping every other key of the document
// as it was. The directory is created with mode 0700 when missing.
func (f *cliFile) save() error {
	if f.Path == "" {
		return usageErrorf("no config file: set XDG_CONFIG_HOME or HOME, or pass --config")
	}
	root := f.root()
	setKey(root, "current_context", scalarNode(f.CurrentContext), f.CurrentContext == "")
	ctxs := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range f.names() {
		var n yaml.Node
		if err := n.Encode(f.Contexts[name]); err != nil {
			return err
		}
		ctxs.Content = append(ctxs.Content, scalarNode(name), &n)
	}
	setKey(root, "contexts", ctxs, len(f.Contexts) == 0)

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f.doc); err != nil {
		return fmt.Errorf("encode config file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if err := atomicfile.Write(f.Path, buf.Bytes(), 0o600); err != nil {
		return &UsageError{Err: fmt.Errorf("write config file %s: %w", f.Path, unwrapPathError(err))}
	}
	f.Exists, f.Mode = true, 0o600
	return nil
}

// root returns the document's top-level mapping, creating it when needed.
func (f *cliFile) root() *yaml.Node {
	if f.doc == nil || len(f.doc.Content) == 0 {
		f.doc = &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := f.doc.Content[0]
	if root.Kind != yaml.MappingNode {
		// A file whose top level is not a mapping does not parse as a config
		// file (parse refuses it), so this is a fresh document.
		*root = yaml.Node{Kind: yaml.MappingNode}
	}
	return root
}

func scalarNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// setKey sets key to value in the mapping m (appending it when missing), or
// removes it when del.
func setKey(m *yaml.Node, key string, value *yaml.Node, del bool) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		if del {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
		} else {
			value.HeadComment, value.LineComment = m.Content[i+1].HeadComment, m.Content[i+1].LineComment
			m.Content[i+1] = value
		}
		return
	}
	if !del {
		m.Content = append(m.Content, scalarNode(key), value)
	}
}

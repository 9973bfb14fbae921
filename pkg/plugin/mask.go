package plugin

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Masked replaces a secret value in what a step wrote.
const Masked = "***"

// MinMasked is the length, in bytes, of the shortest secret value masked:
// masking a value of one to three characters ("1", "yes", "dev") would
// take those characters out of every line of the log and tell nothing. A
// shorter credential is not masked, and the deploy's `config` step says
// which (Unmasked).
const MinMasked = 4

// Secret is a value a step is given that readers must not see, and where it
// comes from (`target.with.env.DB_PASSWORD`, `plugins.pass_env
// AWS_SECRET_ACCESS_KEY`) to name it without showing it.
type Secret struct {
	Where string
	Value string
}

// SettingSecrets returns the credentials of settings (a target's or a
// step's `with`, a deploy's parameters) — exactly what RedactSettings
// hides from readers: every value of a `headers` map, every value under a
// key named like a credential (SensitiveKey), the password of a URL's user
// information and the values of its query parameters named like
// credentials. where prefixes each path (`target.with`).
func SettingSecrets(where string, settings map[string]any) []Secret {
	var out []Secret
	settingSecrets(where, settings, false, &out)
	return out
}

func settingSecrets(where string, v any, hide bool, out *[]Secret) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range x {
				if !yield(k) {
					return
				}
			}
		}) {
			settingSecrets(where+"."+k, x[k], hide || SensitiveKey(k) || strings.EqualFold(k, "headers"), out)
		}
	case []any:
		for i, val := range x {
			settingSecrets(where+"["+strconv.Itoa(i)+"]", val, hide, out)
		}
	case string:
		if hide {
			*out = append(*out, Secret{Where: where, Value: x})
			return
		}
		urlSecrets(where, x, out)
	case nil:
	default:
		if hide {
			s := fmt.Sprint(x)
			if f, ok := x.(float64); ok {
				// As plugin.WithEnv gives it to the command: 12345678.
				s = strconv.FormatFloat(f, 'f', -1, 64)
			}
			*out = append(*out, Secret{Where: where, Value: s})
		}
	}
}

// urlSecrets adds the credentials of a URL RedactURL hides.
func urlSecrets(where, s string, out *[]Secret) {
	if !strings.Contains(s, "://") {
		return
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return
	}
	if p, ok := u.User.Password(); ok {
		*out = append(*out, Secret{Where: where + " (its password)", Value: p})
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range q {
			if !yield(k) {
				return
			}
		}
	}) {
		if SensitiveKey(k) {
			for _, v := range q[k] {
				*out = append(*out, Secret{Where: where + " (its " + k + ")", Value: v})
			}
		}
	}
}

// PassEnvSecrets returns the values of the server's variables named in
// plugins.pass_env that are set: they are given to every script and
// external plugin command, and are masked as secrets.
func PassEnvSecrets(names []string) []Secret {
	var out []Secret
	for _, k := range names {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, Secret{Where: "plugins.pass_env " + k, Value: v})
		}
	}
	return out
}

// MaxMaskedBytes bounds what a Masker looks for, all forms of all values
// together: its automaton takes some 60 bytes of memory per byte of them,
// and a descriptor may hold a megabyte of header values. A deploy's
// credentials are far fewer; those past the bound are not masked, and the
// deploy's `config` step says which (Unmasked).
const MaxMaskedBytes = 256 << 10

// Unmasked names the secrets NewMasker does not mask, sorted, once each:
// those shorter than MinMasked, and those past MaxMaskedBytes.
func Unmasked(secrets []Secret) []string {
	var out []string
	_, _ = maskForms(secrets, func(s Secret) { out = append(out, s.Where) })
	sort.Strings(out)
	return slices.Compact(out)
}

// maskForms returns the texts a masker of secrets looks for, calling
// skipped for a secret it leaves out.
func maskForms(secrets []Secret, skipped func(Secret)) (map[string]bool, int) {
	forms, size := map[string]bool{}, 0
	for _, s := range secrets {
		v := s.Value
		if v == "" {
			continue
		}
		if len(strings.TrimSpace(v)) < MinMasked {
			skipped(s)
			continue
		}
		these := map[string]bool{}
		add := func(f string) {
			if len(strings.TrimSpace(f)) >= MinMasked && !forms[f] {
				these[f] = true
			}
		}
		add(v)
		if strings.ContainsAny(v, "\r\n") {
			for line := range strings.Lines(v) {
				add(strings.TrimRight(line, "\r\n"))
			}
		}
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
		if q := strconv.Quote(v); len(q) >= 2 {
			add(q[1 : len(q)-1])
		}
		if q := strconv.QuoteToASCII(v); len(q) >= 2 {
			add(q[1 : len(q)-1])
		}
		n := 0
		for f := range these {
			n += len(f)
		}
		if size+n > MaxMaskedBytes {
			skipped(s)
			continue
		}
		size += n
		for f := range these {
			forms[f] = true
		}
	}
	return forms, size
}

// Masker replaces secret values with "***" in what a step writes: its log
// lines, its error, its output. It finds them all in one pass over the
// text (Aho–Corasick), so its cost grows with the text, not with the
// number of secrets: a 1 MiB line with 100 secrets costs about what it
// costs with one (BenchmarkMask). The zero or nil Masker masks nothing.
//
// What is masked of a value of at least MinMasked bytes: the value as
// given; each of its lines when it has several (a log is read line by
// line, and a certificate or key printed comes out one line at a time);
// its URL-encoded forms (`a%2Fb`, `a+b`) and its form inside a quoted Go
// or JSON string (`\"`, `\\`, `\n`), when they differ. Nothing else: not
// its base64 or any other encoding, nor a part of it — a step that
// transforms a secret before printing it shows it. Masking is a guard
// against a mistake, not against a step that means to show a secret.
type Masker struct {
	root  [256]int32       // the root's transitions; 0 is the root itself
	next  map[uint64]int32 // the other trie edges: node<<8 | byte → child
	fail  []int32
	depth []int32 // length of the node's string
	match []int32 // longest pattern that is a suffix of the node's string (0: none)
}

// NewMasker returns a masker of the secrets' values (nil when none is
// long enough to be masked).
func NewMasker(secrets []Secret) *Masker {
	forms, _ := maskForms(secrets, func(Secret) {})
	if len(forms) == 0 {
		return nil
	}
	m := &Masker{next: map[uint64]int32{}, fail: []int32{0}, depth: []int32{0}, match: []int32{0}}
	// The trie. firstKid/sibling/label list each node's children, for the
	// breadth-first pass below.
	firstKid, sibling, label := []int32{-1}, []int32{-1}, []byte{0}
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for f := range forms {
			if !yield(f) {
				return
			}
		}
	}) {
		n := int32(0)
		for i := 0; i < len(p); i++ {
			c := p[i]
			var kid int32
			if n == 0 {
				kid = m.root[c]
			} else {
				kid = m.next[uint64(n)<<8|uint64(c)]
			}
			if kid == 0 {
				kid = int32(len(m.fail))
				m.fail = append(m.fail, 0)
				m.depth = append(m.depth, m.depth[n]+1)
				m.match = append(m.match, 0)
				firstKid = append(firstKid, -1)
				sibling = append(sibling, firstKid[n])
				label = append(label, c)
				firstKid[n] = kid
				if n == 0 {
					m.root[c] = kid
				} else {
					m.next[uint64(n)<<8|uint64(c)] = kid
				}
			}
			n = kid
		}
		m.match[n] = int32(len(p))
	}
	// Failure links, breadth first: a node's fail is the longest proper
	// suffix of its string that is in the trie; match takes the longest
	// pattern among its suffixes.
	queue := []int32{0}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for v := firstKid[u]; v >= 0; v = sibling[v] {
			if u != 0 {
				m.fail[v] = m.step(m.fail[u], label[v])
			}
			m.match[v] = max(m.match[v], m.match[m.fail[v]])
			queue = append(queue, v)
		}
	}
	return m
}

// step is the automaton's transition from node s on byte c.
func (m *Masker) step(s int32, c byte) int32 {
	for s != 0 {
		if t, ok := m.next[uint64(s)<<8|uint64(c)]; ok {
			return t
		}
		s = m.fail[s]
	}
	return m.root[c]
}

// Mask returns s with every secret in it replaced by "***"; secrets that
// overlap or touch become one "***".
func (m *Masker) Mask(s string) string { return m.mask(s, false) }

// MaskCut is Mask for a text cut short (a log line kept to its first
// bytes): a start of a secret at its end is masked too, since the rest of
// the secret was in the part not kept.
func (m *Masker) MaskCut(s string) string { return m.mask(s, true) }

func (m *Masker) mask(s string, cut bool) string {
	if m == nil || s == "" {
		return s
	}
	type span struct{ from, to int }
	var spans []span
	state := int32(0)
	for i := 0; i < len(s); i++ {
		state = m.step(state, s[i])
		if l := int(m.match[state]); l > 0 {
			spans = append(spans, span{i + 1 - l, i + 1})
		}
	}
	if cut && state != 0 {
		spans = append(spans, span{len(s) - int(m.depth[state]), len(s)})
	}
	if len(spans) == 0 {
		return s
	}
	// The spans come by increasing end; merged from the last, a span that
	// ends before the region being built starts can overlap no region
	// already built after it.
	regions := make([]span, 0, 4)
	cur := spans[len(spans)-1]
	for i := len(spans) - 2; i >= 0; i-- {
		sp := spans[i]
		if sp.to >= cur.from {
			cur.from = min(cur.from, sp.from)
			continue
		}
		regions = append(regions, cur)
		cur = sp
	}
	regions = append(regions, cur)
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := len(regions) - 1; i >= 0; i-- {
		r := regions[i]
		b.WriteString(s[last:r.from])
		b.WriteString(Masked)
		last = r.to
	}
	b.WriteString(s[last:])
	return b.String()
}

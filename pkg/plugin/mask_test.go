package plugin

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func secrets(values ...string) []Secret {
	out := make([]Secret, len(values))
	for i, v := range values {
		out[i] = Secret{Where: fmt.Sprintf("s%d", i), Value: v}
	}
	return out
}

func TestMask(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"none", nil, "hunter22 here", "hunter22 here"},
		{"whole value", []string{"hunter22"}, "password is hunter22.", "password is ***."},
		{"every occurrence", []string{"hunter22"}, "hunter22 hunter22hunter22", "*** ***"},
		{"short values are kept", []string{"abc", "a"}, "abc a abcd", "abc a abcd"},
		{"four bytes are masked", []string{"abcd"}, "xabcdx", "x***x"},
		{"overlapping secrets are one", []string{"abcdef", "defghi"}, "abcdefghi!", "***!"},
		{"a secret inside another", []string{"bcd1", "abcd1234"}, "abcd1234 bcd1", "*** ***"},
		{"a longer one reaching back over two", []string{"bc12", "ef34", "abc12def34g"}, "abc12def34g bc12", "*** ***"},
		{"partial is not masked", []string{"hunter22"}, "hunter2", "hunter2"},
		{"each line of a multi-line secret", []string{"line-one\nline-two\r\n"}, "got line-two", "got ***"},
		{"url-encoded", []string{"p@ss/w rd"}, "?pw=p%40ss%2Fw+rd", "?pw=***"},
		{"path-escaped", []string{"p@ss/w rd"}, "/p@ss%2Fw%20rd/", "/***/"},
		{"quoted", []string{`say "hi" now`}, `{"x":"say \"hi\" now"}`, `{"x":"***"}`},
		{"non-ASCII quoted", []string{"pässwört"}, `"p\u00e4ssw\u00f6rt"`, `"***"`},
		{"utf-8 kept around", []string{"sécrét"}, "→sécrét←", "→***←"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewMasker(secrets(tc.secrets...)).Mask(tc.in)
			if got != tc.want {
				t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestMaskCut(t *testing.T) {
	m := NewMasker(secrets("hunter22-long-secret"))
	for _, tc := range []struct{ in, want string }{
		{"aaaa hunter22-lo", "aaaa ***"},
		{"aaaa h", "aaaa ***"},
		{"aaaa x", "aaaa x"},
		{"hunter22-long-secret tail", "*** tail"},
	} {
		if got := m.MaskCut(tc.in); got != tc.want {
			t.Errorf("MaskCut(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := m.Mask(tc.in); strings.HasSuffix(tc.in, "-lo") && got != tc.in {
			t.Errorf("Mask(%q) = %q: a whole text keeps what is no secret", tc.in, got)
		}
	}
}

// TestMaskMatchesNaive compares Mask with replacing each secret in turn,
// the longest first, on random texts over a small alphabet.
func TestMaskMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[r.IntN(3)]
		}
		return string(b)
	}
	for range 2000 {
		var vals []string
		for range 1 + r.IntN(4) {
			vals = append(vals, word(4+r.IntN(3)))
		}
		text := word(40)
		got := NewMasker(secrets(vals...)).Mask(text)
		// The naive answer: mark every byte inside an occurrence.
		covered := make([]bool, len(text))
		for _, v := range vals {
			for i := 0; i+len(v) <= len(text); i++ {
				if text[i:i+len(v)] == v {
					for k := i; k < i+len(v); k++ {
						covered[k] = true
					}
				}
			}
		}
		var want strings.Builder
		for i := 0; i < len(text); i++ {
			if !covered[i] {
				want.WriteByte(text[i])
				continue
			}
			want.WriteString(Masked)
			for i+1 < len(text) && covered[i+1] {
				i++
			}
		}
		if got != want.String() {
			t.Fatalf("secrets %q in %q: got %q, want %q", vals, text, got, want.String())
		}
	}
}

func TestUnmasked(t *testing.T) {
	big := strings.Repeat("x", MaxMaskedBytes+1)
	got := Unmasked([]Secret{{"a", "abc"}, {"b", "abcd"}, {"c", ""}, {"d", big}, {"e", "  ab  "}})
	if want := []string{"a", "d", "e"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Unmasked = %q, want %q", got, want)
	}
	if m := NewMasker([]Secret{{"d", big}, {"b", "abcd"}}); m.Mask("abcd") != Masked {
		t.Errorf("a secret after one past the bound is still masked")
	}
}

func TestSettingSecrets(t *testing.T) {
	with := map[string]any{
		"command": []any{"sh", "-c", "echo $DB_PASSWORD"},
		"env":     map[string]any{"DB_PASSWORD": "s3cret-pw", "REGION": "eu-west-1", "API_TOKEN": float64(12345678)},
		"headers": map[string]any{"X-Custom": "hdr-value"},
		"url":     "https://user:url-pw@example.com/x?token=qtok&page=2",
	}
	var got []string
	for _, s := range SettingSecrets("target.with", with) {
		got = append(got, s.Where+"="+s.Value)
	}
	want := []string{
		"target.with.env.API_TOKEN=12345678",
		"target.with.env.DB_PASSWORD=s3cret-pw",
		"target.with.headers.X-Custom=hdr-value",
		"target.with.url (its password)=url-pw",
		"target.with.url (its token)=qtok",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("SettingSecrets:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkMask: a 1 MiB line with 1 and with 100 secrets of 24 bytes,
// some of them in it. The cost per byte stays the same: one pass.
func BenchmarkMask(b *testing.B) {
	for _, n := range []int{1, 100} {
		r := rand.New(rand.NewPCG(3, 4))
		var vals []string
		for i := range n {
			vals = append(vals, fmt.Sprintf("secret-%02d-%016x", i, r.Uint64()))
		}
		var line strings.Builder
		for line.Len() < 1<<20 {
			if r.IntN(100) == 0 {
				line.WriteString(vals[r.IntN(n)])
			}
			line.WriteString("the quick brown fox jumps over the lazy dog ")
		}
		text := line.String()
		m := NewMasker(secrets(vals...))
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				_ = m.Mask(text)
			}
		})
	}
}

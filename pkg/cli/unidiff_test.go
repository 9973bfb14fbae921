package cli

import "testing"

func TestUnifiedDiff(t *testing.T) {
	a := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
	b := "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\n"
	got := unifiedDiff("current", "new", a, b, 2)
	want := `--- current
+++ new
@@ -2,5 +2,5 @@
 b
 c
-d
+D
 e
 f
@@ -9,2 +9,3 @@
 i
 j
+k
`
	if got != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", got, want)
	}
	if d := unifiedDiff("x", "y", a, a, 3); d != "" {
		t.Fatalf("equal texts: %q", d)
	}
	if got := unifiedDiff("x", "y", "", "one\n", 3); got != "--- x\n+++ y\n@@ -0,0 +1 @@\n+one\n" {
		t.Fatalf("from empty: %q", got)
	}
}

package envconfig

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeListed(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listedDirs renders a listing as "file env/app plugin dir" lines, sorted.
func listedDirs(given []Given) []string {
	var out []string
	for _, g := range given {
		d, _ := g.Target.With["dir"].(string)
		out = append(out, strings.Join([]string{g.File, g.Environment + "/" + g.Application, g.Target.Plugin, d}, " "))
	}
	slices.Sort(out)
	return out
}

// Files lists every target its files give, merged as Get merges them; a
// file with mistakes that still parses gives what it sets, a file that
// does not parse gives nothing, and names Get never reads are left out.
func TestFilesListsEveryTarget(t *testing.T) {
	dir := t.TempDir()
	writeListed(t, dir, "prod.yaml", "target: {plugin: local, with: {dir: /srv/prod}}\n")
	writeListed(t, dir, "prod/billing.yaml", "target: {with: {dir: /srv/billing}}\n")
	writeListed(t, dir, "prod/shop.yml", "parameters: {a: 1}\n")
	writeListed(t, dir, "staging.yml", "target: {plugin: local, with: {dir: /srv/staging}}\nunknown: 1\n")
	writeListed(t, dir, "dev.yaml", "target: {plugin: local, with: {dir: [\n")
	writeListed(t, dir, "qa/api.yaml", "target: {plugin: script, with: {command: [true]}}\n")
	writeListed(t, dir, "Bad.yaml", "target: {plugin: local, with: {dir: /srv/bad}}\n")
	writeListed(t, dir, "notes.txt", "target: {plugin: local, with: {dir: /srv/notes}}\n")
	got, err := Files{Dir: dir}.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"prod.yaml prod/ local /srv/prod",
		"prod/billing.yaml prod/billing local /srv/billing",
		"prod/shop.yml prod/shop local /srv/prod",
		"qa/api.yaml qa/api script ",
		"staging.yml staging/ local /srv/staging",
	}
	if g := listedDirs(got); !slices.Equal(g, want) {
		t.Errorf("listed\n%s\nwant\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

// Listed reads the files once and keeps the reading: again at once when
// an environment file is added, and within ListEvery when one is edited
// in place; a provider that cannot list gives nil.
func TestListedIsFreshAndCheap(t *testing.T) {
	dir := t.TempDir()
	writeListed(t, dir, "prod.yaml", "target: {plugin: local, with: {dir: /srv/prod}}\n")
	now := time.Now()
	d := &Defaults{Provider: Files{Dir: dir}}
	d.list.now = func() time.Time { return now }
	first := d.Listed()
	if got := listedDirs(first.Given); !slices.Equal(got, []string{"prod.yaml prod/ local /srv/prod"}) {
		t.Fatalf("first listing %v", got)
	}
	if d.Listed() != first {
		t.Fatal("a second call read the files again")
	}
	// Edited in place: the directory does not change; seen after ListEvery.
	writeListed(t, dir, "prod.yaml", "target: {plugin: local, with: {dir: /srv/prod2}}\n")
	if d.Listed() != first {
		t.Fatal("an edit in place read again before ListEvery")
	}
	now = now.Add(ListEvery)
	if got := listedDirs(d.Listed().Given); !slices.Equal(got, []string{"prod.yaml prod/ local /srv/prod2"}) {
		t.Fatalf("after ListEvery: %v", got)
	}
	// A new environment: the directory changes, seen at once. (Its
	// modification time may keep its value within a coarse clock tick:
	// set it apart.)
	writeListed(t, dir, "dev.yaml", "target: {plugin: local, with: {dir: /srv/dev}}\n")
	if err := os.Chtimes(dir, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := listedDirs(d.Listed().Given); len(got) != 2 {
		t.Fatalf("after a new environment: %v", got)
	}
	if (&Defaults{Provider: &HTTP{URL: "http://127.0.0.1:1/{environment}"}}).Listed() != nil || (&Defaults{Provider: None{}}).Listed() != nil {
		t.Error("a provider that cannot list gave a listing")
	}
}

// What an operator who copies a new environment's file in sees. `cp`
// creates the file, then writes it: a check between the two reads the
// empty file (it gives nothing), and the writing changes the file, not
// the directory, so the environment's directory is listed only once the
// reading is ListEvery old. A file moved in whole (`mv`, an editor's save,
// `install`) is seen at once; so is one copied in when no check falls
// between its creation and its writing. An application's file is in the
// environment's subdirectory: seen within ListEvery, unless it is the
// environment's first (the subdirectory is new). (docs/plugins.md)
func TestListedSeesACopiedFile(t *testing.T) {
	dir := t.TempDir()
	writeListed(t, dir, "prod.yaml", "target: {plugin: local, with: {dir: /srv/prod}}\n")
	writeListed(t, dir, "prod/shop.yaml", "{}\n")
	now := time.Now()
	d := &Defaults{Provider: Files{Dir: dir}}
	d.list.now = func() time.Time { return now }
	d.Listed()
	// Set the directory's modification time apart from the reading's: a
	// coarse clock tick may keep its value (TestListedIsFreshAndCheap).
	touch := func(h int) {
		if err := os.Chtimes(dir, time.Now(), time.Now().Add(time.Duration(h)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// Moved in whole: seen at once.
	tmp := filepath.Join(t.TempDir(), "dev.yaml")
	if err := os.WriteFile(tmp, []byte("target: {plugin: local, with: {dir: /srv/dev}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "dev.yaml")); err != nil {
		t.Fatal(err)
	}
	touch(1)
	if got := listedDirs(d.Listed().Given); len(got) != 3 {
		t.Fatalf("after a file moved in: %v", got)
	}
	// Copied in, a check between its creation and its writing: the empty
	// file is what the reading keeps, until it is ListEvery old.
	writeListed(t, dir, "qa.yaml", "")
	touch(2)
	d.Listed()
	writeListed(t, dir, "qa.yaml", "target: {plugin: local, with: {dir: /srv/qa}}\n")
	if got := listedDirs(d.Listed().Given); len(got) != 3 {
		t.Fatalf("a file written after its creation was seen before ListEvery (the test's premise no longer holds: update docs/plugins.md): %v", got)
	}
	// Another application's file of an environment that has one: the top
	// directory does not change (the first one's subdirectory does).
	writeListed(t, dir, "prod/billing.yaml", "target: {plugin: local, with: {dir: /srv/billing}}\n")
	if got := listedDirs(d.Listed().Given); len(got) != 3 {
		t.Fatalf("an application's file was seen before ListEvery: %v", got)
	}
	now = now.Add(ListEvery)
	if got := listedDirs(d.Listed().Given); len(got) != 5 {
		t.Fatalf("after ListEvery: %v, want the copied environment's and the application's directories too", got)
	}
}

// A pipe or a directory named like an environment's or an application's
// file is left out of the listing, without waiting on it: a pipe opened
// for reading waits for a writer, and the listing serves every
// environment's submissions. Get refuses the pipe at once, naming it.
func TestListSkipsWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	writeListed(t, dir, "prod.yaml", "target: {plugin: local, with: {dir: /srv/prod}}\n")
	if err := syscall.Mkfifo(filepath.Join(dir, "qa.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "prod", "shop.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "prod", "billing.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan []Given, 1)
	var getErr error
	go func() {
		_, _, getErr = Files{Dir: dir}.Get(context.Background(), "billing", "qa")
		got, _ := Files{Dir: dir}.List()
		done <- got
	}()
	select {
	case got := <-done:
		if g := listedDirs(got); !slices.Equal(g, []string{"prod.yaml prod/ local /srv/prod"}) {
			t.Errorf("listed %v", g)
		}
		if getErr == nil || !strings.Contains(getErr.Error(), "qa.yaml is no regular file") {
			t.Errorf("Get of qa: %v, want it to say qa.yaml is no regular file", getErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Get or List waits on a pipe")
	}
}

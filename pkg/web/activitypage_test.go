package web_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// copyDeploy inserts n copies of deploy id's row (no steps) with the ids
// <prefix>0000, <prefix>0001, …, each a second newer than the last.
func copyDeploy(t testing.TB, s *uiServer, id, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	db := s.Store.DB()
	rows, err := db.QueryContext(ctx, `SELECT * FROM manent_deployments WHERE id = ?`, id)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	rows.Close()
	sel := make([]string, len(cols))
	for i, c := range cols {
		switch c {
		case "id", "created_at":
			sel[i] = "?"
		default:
			sel[i] = c
		}
	}
	q := `INSERT INTO manent_deployments (` + strings.Join(cols, ", ") + `) SELECT ` + strings.Join(sel, ", ") + ` FROM manent_deployments WHERE id = ?`
	base := time.Now().Add(-time.Duration(n+10) * time.Second)
	for i := 0; i < n; i++ {
		args := []any{}
		for _, c := range cols {
			switch c {
			case "id":
				args = append(args, fmt.Sprintf("%s%04d", prefix, i))
			case "created_at":
				args = append(args, base.Add(time.Duration(i)*time.Second).UTC().Format(time.RFC3339Nano))
			}
		}
		if _, err := db.ExecContext(ctx, q, append(args, id)...); err != nil {
			t.Fatal(err)
		}
	}
}

var cardRE = regexp.MustCompile(`<li class="card `)

// The activity page shows at most 50 deploys of an environment, says how
// many more wait there and pages through them (?environment=&from=):
// 10,000 waiting deploys made a 6 MB page that each event reloaded whole.
func TestActivityPages(t *testing.T) {
	s := startUI(t)
	g := s.gate(t, "g")
	open(t, g)
	waiting := s.submit(t, "alice-token", gatedDeploy(t, "prod", "1.0", g))
	s.waitState(t, waiting, manent.StateAwaitingApproval)
	copyDeploy(t, s, waiting, "dpl_copy", 119) // 120 waiting in prod

	b := newBrowser(t, s.URL)
	b.login("bob-token")
	tests := []struct {
		path      string
		cards     int
		want, not []string
	}{
		{path: "/", cards: 50, want: []string{"50 of 120", `href="/?environment=prod&amp;from=50"`}},
		{path: "/?environment=prod&from=50", cards: 50, want: []string{"51–100 of 120", `href="/?environment=prod&amp;from=100"`, `href="/?environment=prod"`}},
		{path: "/?environment=prod&from=100", cards: 20, want: []string{"101–120 of 120", `href="/?environment=prod&amp;from=50"`}, not: []string{"from=150"}},
		{path: "/?environment=staging", cards: 0, want: []string{"Nothing is running or waiting in this environment"}},
		{path: "/?environment=call%20555-0100", cards: 0, not: []string{"555-0100"}},
		{path: "/?environment=prod&from=-3", cards: 50},
		{path: "/?environment=prod&from=x", cards: 50},
		{path: "/?environment=prod&from=500", cards: 20, want: []string{"101–120 of 120"}},
	}
	for _, tt := range tests {
		p := b.get(tt.path)
		if p.Status != 200 {
			t.Errorf("GET %s: %d\n%s", tt.path, p.Status, p.Body)
			continue
		}
		if got := len(cardRE.FindAllString(p.Body, -1)); got != tt.cards {
			t.Errorf("GET %s: %d deploys shown, want %d", tt.path, got, tt.cards)
		}
		for _, w := range tt.want {
			if !strings.Contains(p.Body, w) {
				t.Errorf("GET %s: no %q in\n%s", tt.path, w, p.Body)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(p.Body, n) {
				t.Errorf("GET %s: %q in the page", tt.path, n)
			}
		}
	}
	// The fragment the script reloads is the same slice.
	if p := b.do("GET", "/?environment=prod&from=100", nil, "X-Manent-Fragment", "1"); len(cardRE.FindAllString(p.Body, -1)) != 20 {
		t.Errorf("fragment: %d deploys shown, want 20", len(cardRE.FindAllString(p.Body, -1)))
	}
}

package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// releaseHash is the chain hash as the releases before migration 28 wrote
// it: nine length-prefixed fields, no client.
func releaseHash(prev string, seq int64, at, identity, action, target, requestID, outcome, detail string) string {
	h := sha256.New()
	for _, f := range []string{prev, fmt.Sprint(seq), at, identity, action, target, requestID, outcome, detail} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// An audit entry names the client of its request — the address and the
// User-Agent WithClient put in the context, made one line of text and
// bounded — and its chain hash covers them: a row whose client was edited
// or blanked no longer verifies. Rows an earlier release wrote (its INSERT
// names no client column) still verify, before and after new rows.
func TestAuditRecordsTheClient(t *testing.T) {
	for _, db := range []string{enginetest.SQLite(t), enginetest.Postgres(t)} {
		if db == "" {
			continue
		}
		st := openStore(t, db)
		ctx := context.Background()

		// Row 1 as a release before migration 28 writes it (an old worker
		// beside new ones during a rolling upgrade).
		at := time.Now().UTC().Format("2006-01-02T15:04:05.000000000Z") // the store's time format
		h1 := releaseHash("", 1, at, "token:old", "deployment.submit", "dpl_1", "r1", "accepted", "")
		exec(t, st, `INSERT INTO manent_audit (seq, time, identity, action, target, request_id, outcome, detail, prev_hash, hash)
			VALUES (1, ?, 'token:old', 'deployment.submit', 'dpl_1', 'r1', 'accepted', '', '', ?)`, at, h1)
		exec(t, st, `UPDATE manent_audit_head SET seq = 1, hash = ? WHERE id = 1`, h1)

		ua := "curl/8.5.0 " + strings.Repeat("é", 400) + "\x00\x1b[31m\xff"
		cctx := store.WithClient(ctx, "2001:db8::7", ua)
		if err := st.AppendAudit(context.WithoutCancel(cctx), store.AuditEntry{Identity: "token:ci", Action: "deployment.cancel",
			Target: "dpl_2", RequestID: "r2", Outcome: "accepted"}); err != nil {
			t.Fatal(err)
		}
		// No request: no client (a schedule's tick).
		if err := st.AppendAudit(ctx, store.AuditEntry{Identity: "schedule", Action: "schedule.tick", Target: "s1", Outcome: "accepted"}); err != nil {
			t.Fatal(err)
		}
		got, err := st.Audit(ctx, store.AuditFilter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("%d entries, want 3", len(got))
		}
		e := got[1]
		if e.ClientAddr != "2001:db8::7" || !strings.HasPrefix(e.UserAgent, "curl/8.5.0 éé") || len(e.UserAgent) > store.MaxAuditUserAgent ||
			!utf8.ValidString(e.UserAgent) || strings.ContainsAny(e.UserAgent, "\x00\x1b") {
			t.Errorf("entry 2's client: %q %q (%d bytes), want the address and the user agent, one line of text of at most %d bytes",
				e.ClientAddr, e.UserAgent, len(e.UserAgent), store.MaxAuditUserAgent)
		}
		if got[0].ClientAddr != "" || got[0].UserAgent != "" || got[2].ClientAddr != "" {
			t.Errorf("entries without a request name a client: %+v %+v", got[0], got[2])
		}
		if n, problems, err := st.VerifyAudit(ctx); err != nil || n != 3 || len(problems) != 0 {
			t.Fatalf("verify: %d rows, %v, %v; want 3 rows and no problem (the old row too)", n, problems, err)
		}

		// The client is covered by the hash: edited, or blanked to read as
		// an old row, the entry no longer verifies.
		for _, edit := range []struct{ addr, ua string }{{"198.51.100.1", e.UserAgent}, {"", ""}} {
			exec(t, st, `UPDATE manent_audit SET client_addr = ?, user_agent = ? WHERE seq = 2`, edit.addr, edit.ua)
			_, problems, err := st.VerifyAudit(ctx)
			if err != nil || len(problems) != 1 || problems[0].Seq != 2 || !strings.Contains(problems[0].Problem, "edited") {
				t.Errorf("client of row 2 set to %q %q: %v, %v; want row 2 edited", edit.addr, edit.ua, problems, err)
			}
		}
	}
}

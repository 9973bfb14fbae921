package store_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// auditOf opens a store with an audit log of n entries.
func auditOf(t *testing.T, db string, n int) *store.Store {
	t.Helper()
	st := openStore(t, db)
	for i := 1; i <= n; i++ {
		if err := st.AppendAudit(context.Background(), store.AuditEntry{Identity: "token:ci", Action: "deployment.submit",
			Target: fmt.Sprintf("dpl_%d", i), RequestID: "r", Outcome: "accepted"}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func exec(t *testing.T, st *store.Store, query string, args ...any) {
	t.Helper()
	if _, err := st.DB().ExecContext(context.Background(), st.Q(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// rehash recomputes the hashes of the rows from seq on and the head, as
// someone with write access to the database who read manent's source can.
func rehash(t *testing.T, st *store.Store, from int64) {
	t.Helper()
	ctx := context.Background()
	all, err := st.Audit(ctx, store.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for i := len(all) - 1; i >= 0; i-- {
		e := all[i]
		if e.Seq >= from {
			e.PrevHash = prev
			e.Hash = store.AuditHashOf(e)
			exec(t, st, `UPDATE manent_audit SET prev_hash = ?, hash = ? WHERE seq = ?`, e.PrevHash, e.Hash, e.Seq)
		}
		prev = e.Hash
	}
	exec(t, st, `UPDATE manent_audit_head SET seq = ?, hash = ? WHERE id = 1`, all[0].Seq, prev)
}

// verify-audit says what is wrong, once, at the row it is: a row deleted
// in the middle is one problem ("row 3 is missing"), not a gap and a hash
// mismatch; a row edited and its hash recomputed is named as such at the
// next row; a head that names the last row with another hash says so
// (it read "rows at the end were deleted" with the same row numbers).
func TestVerifyAuditSaysWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(*store.Store)
		want   []store.AuditProblem
	}{
		{"intact", func(*store.Store) {}, nil},
		{"a row deleted in the middle", func(st *store.Store) {
			exec(t, st, `DELETE FROM manent_audit WHERE seq = 3`)
		}, []store.AuditProblem{{Seq: 4, Problem: "row 3 is missing (deleted)"}}},
		{"rows deleted in the middle", func(st *store.Store) {
			exec(t, st, `DELETE FROM manent_audit WHERE seq IN (2, 3)`)
		}, []store.AuditProblem{{Seq: 4, Problem: "rows 2 to 3 are missing (deleted)"}}},
		{"a row edited", func(st *store.Store) {
			exec(t, st, `UPDATE manent_audit SET outcome = 'refused' WHERE seq = 2`)
		}, []store.AuditProblem{{Seq: 2, Problem: "its hash does not match its content: the row was edited"}}},
		{"a row edited and its hash recomputed", func(st *store.Store) {
			all, _ := st.Audit(context.Background(), store.AuditFilter{Before: 3, Limit: 1})
			e := all[0]
			e.Outcome = "refused"
			exec(t, st, `UPDATE manent_audit SET outcome = ?, hash = ? WHERE seq = 2`, e.Outcome, store.AuditHashOf(e))
		}, []store.AuditProblem{{Seq: 3, Problem: "its previous hash is not row 2's hash: row 2 was edited and its hash recomputed, or row 3 was inserted"}}},
		{"the last row edited, its hash recomputed, the head left", func(st *store.Store) {
			all, _ := st.Audit(context.Background(), store.AuditFilter{Limit: 1})
			e := all[0]
			e.Outcome = "refused"
			exec(t, st, `UPDATE manent_audit SET outcome = ?, hash = ? WHERE seq = 5`, e.Outcome, store.AuditHashOf(e))
		}, []store.AuditProblem{{Seq: 5, Problem: "the head names row 5 with another hash: row 5 was edited and its hash recomputed, or the head was edited"}}},
		{"the tail deleted, the head left", func(st *store.Store) {
			exec(t, st, `DELETE FROM manent_audit WHERE seq >= 4`)
		}, []store.AuditProblem{{Seq: 5, Problem: "the chain ends at row 3 but the head names row 5: rows 4 to 5 at the end were deleted"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			enginetest.Databases(t, func(t *testing.T, db string) {
				st := auditOf(t, db, 5)
				c.tamper(st)
				_, got, err := st.VerifyAudit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("problems\n%+v\nwant\n%+v", got, c.want)
				}
			})
		})
	}
}

// A hash chain kept in the database cannot see rows deleted at its end
// with the head moved back, nor a chain rewritten from an edited row on:
// whoever can write the table can write the head. An anchor kept
// elsewhere — a row number and its hash, printed by an earlier
// verify-audit — can: the row must still be there with that hash.
func TestAuditAnchor(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		tamper func(*store.Store)
		want   string
	}{
		{"intact", func(*store.Store) {}, ""},
		{"more rows since", func(st *store.Store) {
			if err := st.AppendAudit(ctx, store.AuditEntry{Identity: "token:ci", Action: "x", Outcome: "accepted"}); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"the tail deleted and the head moved back", func(st *store.Store) {
			exec(t, st, `DELETE FROM manent_audit WHERE seq >= 4`)
			rehash(t, st, 99)
		}, "the chain ends at row 3, before the anchor's row 5: rows at the end were deleted and the head moved back"},
		{"the chain rewritten from an edited row", func(st *store.Store) {
			exec(t, st, `UPDATE manent_audit SET outcome = 'refused' WHERE seq = 2`)
			rehash(t, st, 2)
		}, "row 5's hash is not the anchor's: the chain was rewritten at or before row 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			enginetest.Databases(t, func(t *testing.T, db string) {
				st := auditOf(t, db, 5)
				anchor, err := st.AuditLast(ctx)
				if err != nil || anchor.Seq != 5 || len(anchor.Hash) != 64 {
					t.Fatalf("anchor %+v %v", anchor, err)
				}
				c.tamper(st)
				if _, problems, err := st.VerifyAudit(ctx); err != nil || len(problems) != 0 {
					t.Fatalf("the chain alone sees %v %v: the test is not about an anchor", problems, err)
				}
				got, err := st.CheckAuditAnchor(ctx, anchor)
				if err != nil {
					t.Fatal(err)
				}
				if got != c.want && !(c.want != "" && strings.HasPrefix(got, c.want)) {
					t.Errorf("anchor check: %q, want %q", got, c.want)
				}
			})
		})
	}
}

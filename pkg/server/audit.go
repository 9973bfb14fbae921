package server

import (
	"context"
	"database/sql"
	"net/http"
	"strconv"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// routesAudit registers the routes of the audit log (GET /api/v1/audit).
func (s *Server) routesAudit() {
	s.handle(route{Pattern: "GET /api/v1/audit", Params: []string{"action", "before", "limit"}}, s.handleAudit)
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if err := s.cfg.Guard.Authorize(p, PermAudit, "", ""); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	q := r.URL.Query()
	f := store.AuditFilter{Action: q.Get("action")}
	for key, dst := range map[string]*int64{"before": &f.Before} {
		if v := q.Get(key); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				writeError(w, r, s.log, manent.Errorf(manent.EInvalid, "%s must be a positive number, got %q", key, v))
				return
			}
			*dst = n
		}
	}
	var err error
	if f.Limit, err = limitParam(r, api.MaxAuditPage, 0); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	items, err := s.st.Audit(r.Context(), f)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := api.AuditResult{Items: make([]api.AuditEntry, len(items))}
	for i, e := range items {
		out.Items[i] = wireAuditEntry(e)
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	if len(items) == f.Limit {
		out.NextBefore = items[len(items)-1].Seq
	}
	writeJSON(w, http.StatusOK, out)
}

// auditIn is audit in the transaction of what it records (engine.Submit's
// also): an accepted deploy and its audit entry commit together, in one
// commit instead of two. detail is computed from the record.
func (s *Server) auditIn(ctx context.Context, r *http.Request, p manent.Identity, action, target string, detail func(*store.Record) string) func(*sql.Tx, *store.Record) error {
	return func(tx *sql.Tx, rec *store.Record) error {
		return s.st.AppendAuditTx(ctx, tx, store.AuditEntry{
			Identity: p.Subject, Action: action, Target: target, RequestID: requestID(r), Outcome: "accepted", Detail: detail(rec),
		})
	}
}

// refusal is the audit detail of a refused call: the error's message, or
// for a storage fault (busy database, full disk) its reason, as the caller
// was told, rather than "internal error".
func refusal(err error) string {
	if f := storageFault(err); f != nil {
		return f.Reason
	}
	return manent.ErrorMessage(err)
}

// audit records a state-changing call; a failure to write it is logged,
// never hidden.
func (s *Server) audit(ctx context.Context, r *http.Request, p manent.Identity, action, target, outcome, detail string) {
	err := s.st.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{
		Identity: p.Subject, Action: action, Target: target, RequestID: requestID(r), Outcome: outcome, Detail: detail,
	})
	if err != nil {
		s.log.Error("audit write failed", "action", action, "target", target, "error", err)
	}
}

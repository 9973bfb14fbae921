package itsm_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/plugin"
)

// QA: an open answered 201 {"state":"pending"} was taken for a change with
// an empty id, and polling then asked GET /changes/. It is a protocol
// error: permanent, saying what is missing.
func TestOpenWithoutAnID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"state":"pending"}`))
	}))
	defer srv.Close()
	h := &itsm.HTTP{URL: srv.URL, Client: srv.Client()}
	c, err := h.Open(context.Background(), itsm.Request{DeployID: "dpl_1"})
	if err == nil {
		t.Fatalf("open answered %+v without an error", c)
	}
	if !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "no change id") || !strings.Contains(err.Error(), `{"state":"pending"}`) {
		t.Errorf("error %q (permanent %v), want a permanent protocol error quoting the answer", err, plugin.IsPermanent(err))
	}
}

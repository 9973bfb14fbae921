package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/manent-io/manent/pkg/manent"
)

// intParam reads the query parameter name of r as an integer from lo to
// hi, def when it is absent. Anything else is an EInvalid saying what name
// must be (want) and quoting the value, clipped to maxEchoed.
func intParam(r *http.Request, name string, lo, hi, def int, want string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, manent.Errorf(manent.EInvalid, "%s must be %s, got %q", name, want, manent.ClipText(v, maxEchoed))
	}
	return n, nil
}

// limitParam reads ?limit=, a page size from 1 to hi, def when absent.
func limitParam(r *http.Request, hi, def int) (int, error) {
	return intParam(r, "limit", 1, hi, def, fmt.Sprintf("a number from 1 to %d", hi))
}

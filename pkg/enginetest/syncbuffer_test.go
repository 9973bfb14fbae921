package enginetest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/manent-io/manent/pkg/enginetest"
)

// Writers and a reader at once (run with -race): every write lands whole.
func TestSyncBuffer(t *testing.T) {
	var buf enginetest.SyncBuffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&buf, "w%d-%d\n", i, j)
				_ = buf.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(buf.String(), "\n"); got != 400 {
		t.Fatalf("%d lines, want 400", got)
	}
}

package manent_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

func TestNewDeploymentIDUniqueAndSortable(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				id := manent.NewDeploymentID()
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate id %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	a := manent.NewDeploymentID()
	later := time.Now().Add(2 * time.Millisecond)
	for time.Now().Before(later) {
	}
	b := manent.NewDeploymentID()
	if !(a < b) || len(a) != 30 || !strings.HasPrefix(a, "dpl_") {
		t.Fatalf("ids %s, %s: want dpl_ + 26 chars, increasing with time", a, b)
	}
}

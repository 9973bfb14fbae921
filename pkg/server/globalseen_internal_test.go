package server

import (
	"fmt"
	"testing"

	"github.com/manent-io/manent/pkg/store"
)

// A global stream forgets a deploy with its done event, readable or not:
// over 10,000 finished deploys it remembers none, and it still sends each
// event once, only of deploys the caller may read, asking the store once
// per deploy.
func TestGlobalStreamForgetsFinishedDeploys(t *testing.T) {
	g := newGlobalSeen()
	types := map[string]bool{store.EventState: true, store.EventStep: true, store.EventDone: true}
	asked := map[string]int{}
	may := func(id string) (bool, bool) {
		asked[id]++
		var n int
		fmt.Sscanf(id, "dpl_%d", &n)
		return n%2 == 0, true // the caller may read the even ones
	}
	g.start("dpl_running", 3, true)
	sent := 0
	for i := range 10000 {
		id := fmt.Sprintf("dpl_%d", i)
		for seq, typ := range []string{store.EventState, store.EventStep, store.EventStep, store.EventDone} {
			e := store.Event{DeploymentID: id, Seq: int64(seq + 1), Type: typ}
			if g.pass(e, types, may) {
				sent++
			}
			if seq == 1 && g.pass(e, types, may) { // the same event again
				t.Fatalf("%s seq %d sent twice", id, e.Seq)
			}
		}
		if asked[id] != 1 {
			t.Fatalf("%s: the store was asked %d times, want once", id, asked[id])
		}
	}
	if want := 5000 * 4; sent != want {
		t.Fatalf("%d events sent, want %d (the readable deploys' 4 each)", sent, want)
	}
	if g.len() != 1 {
		t.Fatalf("the stream remembers %d deploys, want 1 (the running one)", g.len())
	}
	if g.pass(store.Event{DeploymentID: "dpl_running", Seq: 3, Type: store.EventStep}, types, may) {
		t.Fatal("an event the first states covered was sent")
	}
	if !g.pass(store.Event{DeploymentID: "dpl_running", Seq: 4, Type: store.EventStep}, types, may) {
		t.Fatal("a new event of the running deploy was not sent")
	}
}

package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/manent-io/manent/pkg/clusterstate"
)

// checkSize refuses, before it is sent, a snapshot the server would refuse
// for its size (over clusterstate.MaxBytes encoded, or MaxObjects objects):
// the error names the namespaces holding the most of it, so that an
// operator finds what grew — the server's 413 names nothing.
func checkSize(snap *clusterstate.Snapshot) error {
	n := snap.Objects()
	size := 0
	if n <= clusterstate.MaxObjects {
		b, err := json.Marshal(snap)
		if err != nil {
			return fmt.Errorf("encode the snapshot: %w", err)
		}
		size = len(b)
		if size <= clusterstate.MaxBytes {
			return nil
		}
	}
	type share struct {
		ns                    string
		bytes, pods, workload int
	}
	by := map[string]*share{}
	at := func(ns string) *share {
		if by[ns] == nil {
			by[ns] = &share{ns: ns}
		}
		return by[ns]
	}
	total := 0
	for i := range snap.Pods {
		b, _ := json.Marshal(&snap.Pods[i])
		s := at(snap.Pods[i].Namespace)
		s.bytes += len(b)
		s.pods++
		total += len(b)
	}
	for i := range snap.Workloads {
		b, _ := json.Marshal(&snap.Workloads[i])
		s := at(snap.Workloads[i].Namespace)
		s.bytes += len(b)
		s.workload++
		total += len(b)
	}
	list := make([]*share, 0, len(by))
	for _, s := range by {
		list = append(list, s)
	}
	byObjects := n > clusterstate.MaxObjects
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if byObjects && a.pods+a.workload != b.pods+b.workload {
			return a.pods+a.workload > b.pods+b.workload
		}
		if a.bytes != b.bytes {
			return a.bytes > b.bytes
		}
		return a.ns < b.ns
	})
	var top []string
	for _, s := range list[:min(3, len(list))] {
		top = append(top, fmt.Sprintf("%s (%d pods, %d workloads, %s)", s.ns, s.pods, s.workload, mib(s.bytes)))
	}
	what := fmt.Sprintf("the snapshot is %s, over the server's limit of %s", mib(size), mib(clusterstate.MaxBytes))
	if byObjects {
		what = fmt.Sprintf("the snapshot has %d objects, over the server's limit of %d", n, clusterstate.MaxObjects)
	}
	return fmt.Errorf("%s; nothing was sent, the server keeps the last report: most of it is in namespace %s — look there for "+
		"objects labelled %s by the thousand or with enormous fields (hundreds of containers, huge images), bound them "+
		"(a ResourceQuota on pods), or give each part its own cluster name and agent with --namespace",
		what, strings.Join(top, ", "), clusterstate.LabelDeployID)
}

func mib(n int) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

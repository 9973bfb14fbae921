package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
)

// BenchmarkFanout follows one deploy with 1,000 concurrent SSE clients on
// loopback and reports the delay from each event's commit to its receipt
// (p50, p99 and max over every event every client got) and the peak RSS of
// the server. The server runs in the benchmark's process; the followers
// run in a child process (TestFanoutFollowers), so the RSS is the
// server's. Each iteration is one deploy of about six seconds: 20 commits
// of 10 log lines, plus its state and step events. Run it with:
//
//	go test ./pkg/server -run '^$' -bench Fanout -benchtime 1x
func BenchmarkFanout(b *testing.B) {
	const followers = 1000
	var (
		mu        sync.Mutex
		committed = map[string]map[int64]int64{} // deploy -> seq -> commit time (unix ns)
	)
	f := newFlow(b, servertest.WithConfig(func(c *node.Config) {
		c.Limits.StreamsPerIdentity = followers + 10 // one token follows
	}), servertest.WithStore(func(st *store.Store) {
		// Registered before the API's own listener: the time is taken
		// right after the commit, before the hub fans out.
		st.OnCommit(func(evs []store.Event) {
			now := time.Now().UnixNano()
			mu.Lock()
			defer mu.Unlock()
			for _, e := range evs {
				m := committed[e.DeploymentID]
				if m == nil {
					m = map[int64]int64{}
					committed[e.DeploymentID] = m
				}
				m[e.Seq] = now
			}
		})
	}))
	var delays []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		gate := f.gate("gate" + strconv.Itoa(i))
		id := f.submit(f.descriptor("billing", "prod", gatedScript+`
r=1; while [ $r -le 20 ]; do sleep 0.26; l=1; while [ $l -le 10 ]; do echo round $r line $l; l=$((l+1)); done; r=$((r+1)); done`,
			map[string]string{"GATE": gate}))
		f.waitLog(id, "waiting for the gate")

		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFanoutFollowers$")
		cmd.Env = append(os.Environ(), "MANENT_FANOUT_URL="+eventsURL(f.srv, id), "MANENT_FANOUT_TOKEN="+f.srv.Token,
			"MANENT_FANOUT_N="+strconv.Itoa(followers))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		var arrivals [][2]int64 // seq, unix ns
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "fanout ready":
				f.open(gate) // every follower has read the history
			case strings.HasPrefix(line, "fanout error "):
				b.Error(line)
			case strings.HasPrefix(line, "a "):
				var seq, at int64
				if _, err := fmt.Sscanf(line, "a %d %d", &seq, &at); err == nil {
					arrivals = append(arrivals, [2]int64{seq, at})
				}
			}
		}
		if err := cmd.Wait(); err != nil {
			b.Fatalf("followers: %v", err)
		}
		cancel()
		mu.Lock()
		for _, a := range arrivals {
			if c, ok := committed[id][a[0]]; ok {
				delays = append(delays, time.Duration(a[1]-c))
			}
		}
		mu.Unlock()
	}
	b.StopTimer()
	if len(delays) == 0 {
		b.Fatal("no live event was received")
	}
	slices.Sort(delays)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(delays[len(delays)/2]), "p50_ms")
	b.ReportMetric(ms(delays[len(delays)*99/100]), "p99_ms")
	b.ReportMetric(ms(delays[len(delays)-1]), "max_ms")
	b.ReportMetric(float64(len(delays))/float64(b.N), "deliveries/op")
	if kb, ok := procStatusKB("VmHWM"); ok {
		b.ReportMetric(float64(kb)/1024, "server_peak_rss_MB")
	}
}

// TestFanoutFollowers is BenchmarkFanout's child process: it follows
// $MANENT_FANOUT_URL with $MANENT_FANOUT_N clients, prints "fanout ready"
// once each has read the history, then "a <seq> <unix ns>" for every live
// event each client received. Without the variables it does nothing.
func TestFanoutFollowers(t *testing.T) {
	url := os.Getenv("MANENT_FANOUT_URL")
	if url == "" {
		t.Skip("BenchmarkFanout's child process")
	}
	n, _ := strconv.Atoi(os.Getenv("MANENT_FANOUT_N"))
	token := os.Getenv("MANENT_FANOUT_TOKEN")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var ready, finished sync.WaitGroup
	ready.Add(n)
	finished.Add(n)
	arrivals := make([][][2]int64, n)
	errs := make([]error, n)
	for i := range n {
		go func() {
			defer finished.Done()
			arrivals[i], errs[i] = follow(ctx, hc, url, token, ready.Done)
		}()
	}
	ready.Wait()
	fmt.Println("fanout ready")
	finished.Wait()
	w := bufio.NewWriter(os.Stdout)
	for i := range n {
		if errs[i] != nil {
			fmt.Fprintf(w, "fanout error %v\n", errs[i])
		}
		for _, a := range arrivals[i] {
			fmt.Fprintf(w, "a %d %d\n", a[0], a[1])
		}
	}
	w.Flush()
}

// follow reads a deploy's stream to its end, noting when each live event
// arrived (seq, unix ns); ready is called once the history has been read.
func follow(ctx context.Context, hc *http.Client, url, token string, ready func()) ([][2]int64, error) {
	calledReady := false
	defer func() {
		if !calledReady {
			ready()
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	var out [][2]int64
	idPrefix, gate := []byte("id: "), []byte("waiting for the gate")
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return out, nil // the server ends the stream after done
		}
		switch {
		case bytes.HasPrefix(line, idPrefix):
			if calledReady {
				seq, _ := strconv.ParseInt(string(bytes.TrimSpace(line[len(idPrefix):])), 10, 64)
				out = append(out, [2]int64{seq, time.Now().UnixNano()})
			}
		case !calledReady && bytes.Contains(line, gate):
			calledReady = true
			ready()
		}
	}
}

// procStatusKB reads a kB field of /proc/self/status (Linux).
func procStatusKB(field string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
)

// A stream replays a deploy's history a bounded page at a time, whatever
// its events weigh. A log line is at most 16 KiB, but a line of NUL bytes
// is stored JSON-escaped, six times longer; a page of 500 such events was
// about 48 MB, held by each stream while its client did not read: 20
// never-reading streams of one read-only token took a server from 280 MB
// to 1.4 GB, and the 200 one identity may open would take 11 GB.
func TestStreamReplayHoldsABoundedPage(t *testing.T) {
	// Streams stay blocked on their stalled clients for the whole test.
	server.SetStreamTiming(t, 0, 0, time.Minute, 0)
	f := newFlow(t)
	gate := f.gate("gate")
	id := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
	f.waitLog(id, "waiting for the gate")
	defer f.open(gate)

	nul := strings.Repeat("\x00", 16<<10)
	var lines []store.LogEntry
	for range 300 {
		lines = append(lines, store.LogEntry{Time: time.Now(), Text: nul})
	}
	if err := f.srv.Store.AppendLog(context.Background(), id, "work", lines); err != nil {
		t.Fatal(err)
	}

	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()

	// Clients that read the start of the history, up to the first event's
	// id (its page is read by then), and then nothing more.
	const streams = 8
	u := strings.TrimPrefix(f.srv.URL, "http://")
	for i := range streams {
		conn, err := (&net.Dialer{Control: smallReceiveBuffer}).Dial("tcp", u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /api/v1/deployments/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", id, u, f.srv.Token)
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var got []byte
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte("\nid: ")) {
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("stream %d: %v after %q", i, err, got)
			}
			got = append(got, buf[:n]...)
		}
	}

	grown := int64(heap()) - int64(before)
	t.Logf("%d stalled streams replaying 300 lines of 16 KiB NULs hold %.1f MB", streams, float64(grown)/1e6)
	if most := int64(streams * 4 << 20); grown > most {
		t.Fatalf("%d stalled streams hold %.1f MB, want at most %.1f MB (4 MiB each): each holds a whole page of the history",
			streams, float64(grown)/1e6, float64(most)/1e6)
	}
}

// A page of GET …/logs is bounded by what it weighs as JSON, not by its
// text: 4 MiB of NUL bytes is 24 MiB of "\u0000", and the server held
// that (and the 500 lines it read at once, 48 MB) for every client that
// asked, for as long as the client took to read it.
func TestLogsPageOfControlCharactersIsBounded(t *testing.T) {
	t.Parallel()
	f := newFlow(t)
	gate := f.gate("gate")
	id := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
	f.waitLog(id, "waiting for the gate")
	defer f.open(gate)

	nul := strings.Repeat("\x00", 16<<10)
	var lines []store.LogEntry
	for range 300 {
		lines = append(lines, store.LogEntry{Time: time.Now(), Text: nul})
	}
	if err := f.srv.Store.AppendLog(context.Background(), id, "work", lines); err != nil {
		t.Fatal(err)
	}
	// Every line comes, page by page, each page at most about
	// MaxLogPageBytes of JSON.
	var after int64
	n := 0
	for page := 0; ; page++ {
		req, err := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/deployments/%s/logs?after=%d", f.srv.URL, id, after), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.srv.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("page %d: %d %v %.200s", page, resp.StatusCode, err, body)
		}
		if most := api.MaxLogPageBytes + 256<<10; len(body) > most {
			t.Fatalf("page %d is %.1f MB of JSON, want at most %.1f MB (api.MaxLogPageBytes and one line)", page, float64(len(body))/1e6, float64(most)/1e6)
		}
		var res api.LogsResult
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		for _, l := range res.Lines {
			if l.Text == nul {
				n++
			}
		}
		if res.NextAfter == 0 {
			break
		}
		after = res.NextAfter
	}
	if n != 300 {
		t.Fatalf("the pages hold %d of the 300 lines", n)
	}
}

// A client that does not read an answer is disconnected once a write to
// it waits for the write timeout, as a stream's is: an answer had no
// deadline at all, and a client that asked for a 4 MiB page of log and
// never read it held the page, its goroutine and its connection for good.
func TestUnreadAnswerIsDropped(t *testing.T) {
	server.SetStreamTiming(t, 0, 0, 300*time.Millisecond, 0)
	var logs enginetest.SyncBuffer
	f := newFlow(t, servertest.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	gate := f.gate("gate")
	id := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
	f.waitLog(id, "waiting for the gate")
	defer f.open(gate)
	var lines []store.LogEntry
	for range 250 {
		lines = append(lines, store.LogEntry{Time: time.Now(), Text: strings.Repeat("x", 16<<10)})
	}
	if err := f.srv.Store.AppendLog(context.Background(), id, "work", lines); err != nil {
		t.Fatal(err)
	}

	u := strings.TrimPrefix(f.srv.URL, "http://")
	conn, err := (&net.Dialer{Control: smallReceiveBuffer}).Dial("tcp", u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	path := "/api/v1/deployments/" + id + "/logs"
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", path, u, f.srv.Token)
	// The handler ends (the server logs each request as it ends) while
	// the client still reads nothing.
	enginetest.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(logs.String(), `"path":"`+path+`"`)
	}, "the answer to a client that does not read it to be given up")
}

package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
)

// flow is a real server plus what its deploys need: an artifact, gate
// files that let a script step go on, and a client.
type flow struct {
	t      testing.TB
	srv    *servertest.Server
	client *api.Client
	dir    string
}

func newFlow(t testing.TB, opts ...servertest.Option) *flow {
	t.Helper()
	srv := servertest.Start(t, opts...)
	return &flow{t: t, srv: srv, client: srv.Client(), dir: t.TempDir()}
}

// gate returns the path of a gate file; a step waits for it with
// `while [ ! -f "$GATE" ]`.
func (f *flow) gate(name string) string { return filepath.Join(f.dir, name) }

func (f *flow) open(gate string) {
	f.t.Helper()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// descriptor returns a deploy of app/env whose custom step "work" runs sh
// script with env, before activation. JSON is YAML.
func (f *flow) descriptor(app, env, script string, vars map[string]string) []byte {
	f.t.Helper()
	art := filepath.Join(f.dir, "app.txt")
	if err := os.WriteFile(art, []byte("hello\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
	d := map[string]any{
		"apiVersion": "manent/v1", "application": app, "environment": env, "version": "1.0.0",
		"artifact": map[string]any{"url": "file://" + art},
	}
	if script != "" {
		d["steps"] = []any{map[string]any{
			"name": "work", "before": "activation", "plugin": "script", "max_retries": 0,
			"with": map[string]any{"command": []string{"sh", "-c", script}, "env": vars},
		}}
	}
	b, err := json.Marshal(d)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *flow) submit(desc []byte) string {
	f.t.Helper()
	res, err := f.client.Submit(context.Background(), desc, false)
	if err != nil {
		f.t.Fatalf("submit: %v", err)
	}
	return res.ID
}

func (f *flow) waitFinal(id string, timeout time.Duration) *manent.Deployment {
	f.t.Helper()
	var d *manent.Deployment
	enginetest.Eventually(f.t, timeout, func() bool {
		got, err := f.client.Deployment(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		d = got
		return d.State.Final()
	}, "deploy %s to end", id)
	return d
}

func (f *flow) waitLog(id, text string) {
	f.t.Helper()
	enginetest.Eventually(f.t, 30*time.Second, func() bool {
		lines, err := f.srv.Store.Logs(context.Background(), id, 0, 0)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, l := range lines {
			if strings.Contains(l.Text, text) {
				return true
			}
		}
		return false
	}, "log of %s to contain %q", id, text)
}

// gatedScript waits for $GATE after printing "waiting for the gate". The
// engine writes a step's log lines in batches, at the latest with the next
// line written after a quiet 250 ms: a line printed after a pause shows at
// once, so the scripts pause before the lines the tests wait for.
const gatedScript = `sleep 0.3; echo waiting for the gate; while [ ! -f "$GATE" ]; do sleep 0.02; done; echo through the gate`

// sseFrame is one parsed Server-Sent Event; Comment holds a comment line.
type sseFrame struct {
	ID, Event, Data, Comment string
}

type sseStream struct {
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
}

// openStream GETs url as an event stream (with Last-Event-ID when lastID
// is not empty) and checks the answer's status and headers.
func openStream(t testing.TB, url, token, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	s := &sseStream{resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next event or comment; io.EOF when the server ended
// the stream.
func (s *sseStream) next() (sseFrame, error) { return readFrame(s.br) }

func readFrame(br *bufio.Reader) (sseFrame, error) {
	var f sseFrame
	seen := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && seen {
				return f, io.ErrUnexpectedEOF
			}
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen && (f.Event != "" || f.Data != "" || f.Comment != "") {
				return f, nil
			}
			seen = false
			continue
		}
		seen = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			f.Comment = value
		case "id":
			f.ID = value
		case "event":
			f.Event = value
		case "data":
			f.Data += value
		}
	}
}

// until reads events until stop returns true for one of them, returning
// every event read (comments left out).
func (s *sseStream) until(t testing.TB, stop func(sseFrame) bool) []sseFrame {
	t.Helper()
	var out []sseFrame
	for {
		f, err := s.next()
		if err != nil {
			t.Fatalf("stream ended before the expected event: %v (read %d events)", err, len(out))
		}
		if f.Comment != "" && f.Event == "" {
			continue
		}
		out = append(out, f)
		if stop(f) {
			return out
		}
	}
}

// rest reads events until the server ends the stream.
func (s *sseStream) rest(t testing.TB) []sseFrame {
	t.Helper()
	out, err := s.restErr()
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return out
}

// restErr is rest returning how the stream ended: nil when the server
// ended it, else the error with the events read before it.
func (s *sseStream) restErr() ([]sseFrame, error) {
	var out []sseFrame
	for {
		f, err := s.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if f.Comment != "" && f.Event == "" {
			continue
		}
		out = append(out, f)
	}
}

// restResuming reads a finished deploy's stream from lastID to its done
// event as the CLI and the web page do: a stream the server cuts — its
// reader fell behind by more than the write timeout, as a test's can on a
// loaded machine — is opened again from the last id received, at most 20
// times.
func restResuming(t testing.TB, url, token, lastID string) []sseFrame {
	t.Helper()
	var out []sseFrame
	for cuts := 0; ; cuts++ {
		s := openStream(t, url, token, lastID)
		got, err := s.restErr()
		s.close()
		out = append(out, got...)
		if len(out) > 0 && out[len(out)-1].Event == "done" {
			return out
		}
		if cuts == 20 {
			t.Fatalf("the stream was cut 20 times before done (last: %v, %d events read)", err, len(out))
		}
		if len(got) > 0 {
			lastID = got[len(got)-1].ID
		}
		t.Logf("the stream was cut after %d events (%v): resuming from id %s", len(got), err, lastID)
	}
}

func isLog(text string) func(sseFrame) bool {
	return func(f sseFrame) bool { return f.Event == "log" && strings.Contains(f.Data, text) }
}

// checkHistory asserts that frames are the deploy's full stored history:
// every event once, in order, with the stored data, the last one `done`.
func checkHistory(t testing.TB, st *store.Store, id string, frames []sseFrame) {
	t.Helper()
	want, err := st.Events(context.Background(), id, 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != len(want) {
		t.Errorf("got %d events, want the %d stored", len(frames), len(want))
	}
	for i, f := range frames {
		var got store.Event
		if err := json.Unmarshal([]byte(f.Data), &got); err != nil {
			t.Fatalf("event %d: data %q: %v", i, f.Data, err)
		}
		if f.ID != strconv.FormatInt(got.Seq, 10) || f.Event != got.Type {
			t.Errorf("event %d: id %q event %q, data says seq %d type %s", i, f.ID, f.Event, got.Seq, got.Type)
		}
		if i >= len(want) {
			continue
		}
		w := want[i]
		if got.Seq != w.Seq || got.Type != w.Type || got.DeploymentID != w.DeploymentID || !got.Time.Equal(w.Time) || !jsonEqual(got.Data, w.Data) {
			t.Errorf("event %d:\n got %+v %s\nwant %+v %s", i, got, got.Data, w, w.Data)
		}
	}
	if n := len(frames); n == 0 || frames[n-1].Event != "done" {
		t.Errorf("the stream did not end with done")
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

func eventsURL(srv *servertest.Server, id string) string {
	return srv.URL + "/api/v1/deployments/" + id + "/events"
}

// A client connects mid-deploy, drops the connection, and reconnects with
// Last-Event-ID: the two connections together carry the whole history,
// once, in order — history first, then live events.
func TestEventsResumeAfterDrop(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFlow(t, servertest.WithDatabase(db))
		g1, g2 := f.gate("g1"), f.gate("g2")
		id := f.submit(f.descriptor("billing", "prod",
			`sleep 0.3; echo waiting for the gate; while [ ! -f "$G1" ]; do sleep 0.02; done
for i in 1 2 3 4 5; do echo first $i; done; sleep 0.3; echo first done
while [ ! -f "$G2" ]; do sleep 0.02; done
for i in 1 2 3 4 5; do echo second $i; done`,
			map[string]string{"G1": g1, "G2": g2}))
		f.waitLog(id, "waiting for the gate")

		c1 := openStream(t, eventsURL(f.srv, id), f.srv.Token, "")
		got := c1.until(t, isLog("waiting for the gate")) // history
		f.open(g1)
		got = append(got, c1.until(t, isLog("first done"))...) // live
		c1.close()                                             // dropped mid-deploy: the step waits for g2

		last := got[len(got)-1].ID
		c2 := openStream(t, eventsURL(f.srv, id), f.srv.Token, last)
		f.open(g2)
		got = append(got, c2.rest(t)...)
		if d := f.waitFinal(id, 30*time.Second); d.State != manent.StateSuccess {
			t.Fatalf("deploy ended %s: %s", d.State, d.Error)
		}
		checkHistory(t, f.srv.Store, id, got)

		// Resuming after the end, by query parameter, gives nothing and ends.
		c3 := openStream(t, eventsURL(f.srv, id)+"?last_event_id="+got[len(got)-1].ID, f.srv.Token, "")
		if rest := c3.rest(t); len(rest) != 0 {
			t.Errorf("resuming after done gave %d events", len(rest))
		}
	})
}

// A client that stops reading never delays the deploy: its buffers fill,
// it is cut off, and it resumes by id with nothing lost.
func TestSlowSubscriberIsCutOff(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		server.SetStreamTiming(t, 0, 0, 300*time.Millisecond, 16)
		f := newFlow(t, servertest.WithDatabase(db))
		gate := f.gate("gate")
		id := f.submit(f.descriptor("billing", "prod", gatedScript+"\necho one; echo two", map[string]string{"GATE": gate}))
		f.waitLog(id, "waiting for the gate")

		// A client that sends its request and never reads, with a small
		// receive window.
		u := strings.TrimPrefix(f.srv.URL, "http://")
		conn, err := (&net.Dialer{Control: smallReceiveBuffer}).Dial("tcp", u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cutBefore := server.StreamsCut()
		fmt.Fprintf(conn, "GET /api/v1/deployments/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", id, u, f.srv.Token)

		// The deploy's step writes a lot at once: 600 lines of 32 kB, more
		// than the socket buffers hold. Publishing them does not wait for
		// the stalled client.
		line := strings.Repeat("x", 32<<10)
		var lines []store.LogEntry
		for i := range 600 {
			lines = append(lines, store.LogEntry{Time: time.Now(), Text: fmt.Sprint(i, " ", line)})
		}
		if err := f.srv.Store.AppendLog(context.Background(), id, "work", lines); err != nil {
			t.Fatal(err)
		}
		enginetest.Eventually(t, 30*time.Second, func() bool { return server.StreamsCut() > cutBefore },
			"the stalled client to be cut off")

		start := time.Now()
		f.open(gate)
		d := f.waitFinal(id, 30*time.Second)
		if d.State != manent.StateSuccess {
			t.Fatalf("deploy ended %s: %s", d.State, d.Error)
		}
		t.Logf("the rest of the deploy took %s", time.Since(start).Round(time.Millisecond))

		// What the stalled client got: a stream cut off before done.
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		var got []sseFrame
		for {
			fr, err := readFrame(br)
			if err != nil {
				if err == io.EOF {
					t.Fatalf("the stalled stream ended cleanly after %d events: it was not cut off", len(got))
				}
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("the stalled stream is still open: it was not cut off")
				}
				break // cut: the chunked body ends in the middle
			}
			if fr.Event != "" {
				got = append(got, fr)
			}
		}
		if len(got) == 0 {
			t.Fatal("the stalled client got nothing at all")
		}
		if got[len(got)-1].Event == "done" {
			t.Fatal("the stalled client got the whole stream: it was not cut off")
		}
		// It resumes by id and misses nothing. Its ~19 MB replay goes
		// through the same 300 ms write timeout: a reader this loaded
		// machine leaves waiting longer is cut too, and resumes again.
		got = append(got, restResuming(t, eventsURL(f.srv, id), f.srv.Token, got[len(got)-1].ID)...)
		checkHistory(t, f.srv.Store, id, got)
	})
}

// Events another process writes (several workers on one database) reach
// the streams through the poll.
func TestEventsFromAnotherProcess(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		server.SetStreamTiming(t, 0, 50*time.Millisecond, 0, 0)
		f := newFlow(t, servertest.WithDatabase(db))
		gate := f.gate("gate")
		id := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
		f.waitLog(id, "waiting for the gate")

		c := openStream(t, eventsURL(f.srv, id), f.srv.Token, "")
		got := c.until(t, isLog("waiting for the gate"))

		other, err := store.Open(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		// Heavy lines first (16 KiB of control characters, ~100 kB each as
		// stored): the poll reads them about 1 MiB at a time, over several
		// polls, and every one arrives, in order (checkHistory).
		var heavy []store.LogEntry
		for range 24 {
			heavy = append(heavy, store.LogEntry{Time: time.Now(), Text: strings.Repeat("\x01", 16<<10)})
		}
		if err := other.AppendLog(context.Background(), id, "elsewhere", heavy); err != nil {
			t.Fatal(err)
		}
		if err := other.AppendLog(context.Background(), id, "elsewhere", []store.LogEntry{{Time: time.Now(), Text: "written by another worker"}}); err != nil {
			t.Fatal(err)
		}
		got = append(got, c.until(t, isLog("written by another worker"))...)
		f.open(gate)
		got = append(got, c.rest(t)...)
		checkHistory(t, f.srv.Store, id, got)
	})
}

func TestLogsFollow(t *testing.T) {
	t.Parallel()
	f := newFlow(t)
	gate := f.gate("gate")
	id := f.submit(f.descriptor("billing", "prod", gatedScript+"\necho one; echo two; echo three", map[string]string{"GATE": gate}))
	f.waitLog(id, "waiting for the gate")

	c := openStream(t, f.srv.URL+"/api/v1/deployments/"+id+"/logs?follow=true", f.srv.Token, "")
	got := c.until(t, isLog("waiting for the gate"))
	f.open(gate)
	got = append(got, c.rest(t)...)

	lines, err := f.srv.Store.Logs(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, fr := range got {
		if i == len(got)-1 {
			if fr.Event != "done" {
				t.Errorf("last event %q, want done", fr.Event)
			}
			continue
		}
		if fr.Event != "log" {
			t.Errorf("event %d is %q: the log stream carries log lines only", i, fr.Event)
		}
		var e api.Event
		var l api.EventLogData
		if json.Unmarshal([]byte(fr.Data), &e) != nil || json.Unmarshal(e.Data, &l) != nil {
			t.Fatalf("bad data %q", fr.Data)
		}
		texts = append(texts, l.Text)
	}
	var want []string
	for _, l := range lines {
		want = append(want, l.Text)
	}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("streamed log:\n%s\nstored log:\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
}

func TestHeartbeat(t *testing.T) {
	server.SetStreamTiming(t, 30*time.Millisecond, 0, 0, 0)
	f := newFlow(t)
	gate := f.gate("gate")
	id := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
	f.waitLog(id, "waiting for the gate")
	c := openStream(t, eventsURL(f.srv, id), f.srv.Token, "")
	for {
		fr, err := c.next()
		if err != nil {
			t.Fatalf("no heartbeat before %v", err)
		}
		if fr.Comment == "heartbeat" {
			break
		}
	}
	f.open(gate)
	f.waitFinal(id, 30*time.Second)
}

// The global stream starts with the current state of what runs or waits,
// then carries state, step and done events of every deploy — no log lines.
func TestGlobalEvents(t *testing.T) {
	t.Parallel()
	f := newFlow(t)
	gate := f.gate("gate")
	waiting := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
	f.waitLog(waiting, "waiting for the gate")

	c := openStream(t, f.srv.URL+"/api/v1/events", f.srv.Token, "")
	first := c.until(t, func(sseFrame) bool { return true })[0]
	if first.Event != "state" || !strings.HasPrefix(first.ID, waiting+":") || !strings.Contains(first.Data, `"PENDING"`) {
		t.Errorf("first event %+v, want the state of %s", first, waiting)
	}

	quick := f.submit(f.descriptor("web", "staging", "echo hi", nil))
	got := c.until(t, func(fr sseFrame) bool { return fr.Event == "done" && strings.HasPrefix(fr.ID, quick+":") })
	last := int64(0)
	for _, fr := range got {
		if fr.Event == "log" {
			t.Errorf("the global stream carried a log line: %+v", fr)
		}
		dep, seq, _ := strings.Cut(fr.ID, ":")
		n, _ := strconv.ParseInt(seq, 10, 64)
		if dep == quick {
			if n <= last {
				t.Errorf("seq %d after %d", n, last)
			}
			last = n
		}
	}
	f.open(gate)
	c.until(t, func(fr sseFrame) bool { return fr.Event == "done" && strings.HasPrefix(fr.ID, waiting+":") })

	// ?types=state: state changes and the end, no step events.
	only := openStream(t, f.srv.URL+"/api/v1/events?types=state", f.srv.Token, "")
	again := f.submit(f.descriptor("web", "staging", "echo hi", nil))
	for _, fr := range only.until(t, func(fr sseFrame) bool { return fr.Event == "done" && strings.HasPrefix(fr.ID, again+":") }) {
		if fr.Event != "state" && fr.Event != "done" {
			t.Errorf("?types=state carried %+v", fr)
		}
	}
}

// Every stream route authenticates and checks the deploy exists; errors
// are problem+json.
func TestStreamRoutesRefuse(t *testing.T) {
	t.Parallel()
	f := newFlow(t)
	id := f.submit(f.descriptor("billing", "prod", "", nil))
	f.waitFinal(id, 30*time.Second)
	tests := []struct {
		name   string
		path   string
		token  string
		header string
		want   int
	}{
		{"events without token", "/api/v1/deployments/" + id + "/events", "", "", 401},
		{"events with a bad token", "/api/v1/deployments/" + id + "/events", "nope", "", 401},
		{"events of an unknown deploy", "/api/v1/deployments/dpl_nope/events", f.srv.Token, "", 404},
		{"events with a bad Last-Event-ID", "/api/v1/deployments/" + id + "/events", f.srv.Token, "x", 422},
		{"events with an unknown type", "/api/v1/deployments/" + id + "/events?types=bogus", f.srv.Token, "", 422},
		{"events after an id never sent", "/api/v1/deployments/" + id + "/events", f.srv.Token, "999999", 422},
		{"log stream without token", "/api/v1/deployments/" + id + "/logs?follow=true", "", "", 401},
		{"log stream of an unknown deploy", "/api/v1/deployments/dpl_nope/logs?follow=true", f.srv.Token, "", 404},
		{"global stream without token", "/api/v1/events", "", "", 401},
		{"global stream with an unknown type", "/api/v1/events?types=bogus", f.srv.Token, "", 422},
		{"global stream with a deploy-only type", "/api/v1/events?types=state,log", f.srv.Token, "", 422},
		{"activity without token", "/api/v1/activity", "", "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, f.srv.URL+tt.path, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			if tt.header != "" {
				req.Header.Set("Last-Event-ID", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.want, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != api.ProblemContentType {
				t.Errorf("Content-Type %q, want %s", ct, api.ProblemContentType)
			}
		})
	}
}

// Activity shows what runs and what waits, grouped by environment, with the
// queue position and the deploy ahead; status gives the same reason.
func TestActivity(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFlow(t, servertest.WithDatabase(db))
		ctx := context.Background()
		gate := f.gate("gate")
		running := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
		f.waitLog(running, "waiting for the gate")
		queued := f.submit(f.descriptor("billing", "prod", "", nil))
		other := f.submit(f.descriptor("web", "staging", gatedScript, map[string]string{"GATE": gate}))
		f.waitLog(other, "waiting for the gate")

		act, err := f.client.Activity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var envs []string
		for _, g := range act.Environments {
			envs = append(envs, g.Environment)
		}
		if strings.Join(envs, ",") != "prod,staging" {
			t.Fatalf("environments %v, want prod,staging", envs)
		}
		prod := act.Environments[0].Items
		if len(prod) != 2 || prod[0].ID != running || prod[1].ID != queued {
			t.Fatalf("prod activity %+v, want %s then %s", prod, running, queued)
		}
		wantReason := fmt.Sprintf("queued: 2nd in billing/prod, behind %s (PENDING)", running)
		tests := []struct {
			name string
			got  any
			want any
		}{
			{"running state", prod[0].State, manent.StatePending},
			{"running step", prod[0].Step, "work"},
			{"running reason", prod[0].Reason, ""},
			{"queued state", prod[1].State, manent.StateEnqueued},
			{"queued position", prod[1].QueuePosition, 2},
			{"queued ahead", prod[1].Ahead, running},
			{"queued reason", prod[1].Reason, wantReason},
			{"staging", act.Environments[1].Items[0].ID, other},
		}
		for _, tt := range tests {
			if tt.got != tt.want {
				t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
			}
		}
		d, err := f.client.Deployment(ctx, queued)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != wantReason {
			t.Errorf("status reason %q, want %q", d.Reason, wantReason)
		}

		f.open(gate)
		for _, id := range []string{running, queued, other} {
			if d := f.waitFinal(id, 30*time.Second); d.State != manent.StateSuccess {
				t.Errorf("%s ended %s: %s", id, d.State, d.Error)
			}
		}
		act, err = f.client.Activity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(act.Environments) != 0 {
			t.Errorf("activity after the end: %+v", act.Environments)
		}
	})
}

// TestLogsAfter: ?after=N returns the lines after line N; anything but a
// number of 0 or more is a 422 naming the parameter, not silently the
// whole log.
func TestLogsAfter(t *testing.T) {
	t.Parallel()
	f := newFlow(t)
	gate := f.gate("gate")
	id := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
	f.waitLog(id, "waiting for the gate")
	t.Cleanup(func() { f.open(gate) })
	all, err := f.srv.Store.Logs(context.Background(), id, 0, 0)
	if err != nil || len(all) < 2 {
		t.Fatalf("logs: %v %v, want at least 2 lines", all, err)
	}
	base := f.srv.URL + "/api/v1/deployments/" + id + "/logs"
	status, body, _ := do(t, "GET", fmt.Sprintf("%s?after=%d", base, all[0].Seq), f.srv.Token, "")
	var res api.LogsResult
	if status != 200 || json.Unmarshal(body, &res) != nil || len(res.Lines) == 0 || res.Lines[0].Seq != all[1].Seq {
		t.Fatalf("after=%d: %d %s, want the lines from seq %d", all[0].Seq, status, body, all[1].Seq)
	}
	for _, bad := range []string{"abc", "-1", "1.5", "99999999999999999999"} {
		status, body, _ := do(t, "GET", base+"?after="+bad, f.srv.Token, "")
		if status != 422 || !strings.Contains(problem(t, body).Detail, "after must be") {
			t.Errorf("after=%s: %d %s, want 422 naming after", bad, status, body)
		}
	}
}

// QA: the activity of 10,000 waiting deploys was one 4.8 MB answer, which
// the web page asked for whole to show 50. ?limit= cuts each environment
// to that many from ?from= (counted from 0, in the activity's order), and
// total says how many there are; a bad value is a 422 naming it.
func TestActivityPaged(t *testing.T) {
	t.Parallel()
	f := newFlow(t)
	ctx := context.Background()
	gate := f.gate("gate")
	t.Cleanup(func() { f.open(gate) })
	running := f.submit(f.descriptor("billing", "prod", gatedScript, map[string]string{"GATE": gate}))
	f.waitLog(running, "waiting for the gate")
	var queued []string
	for range 4 {
		queued = append(queued, f.submit(f.descriptor("billing", "prod", "", nil)))
	}
	f.submit(f.descriptor("web", "staging", "", nil))
	got, err := f.client.ActivityQuery(ctx, url.Values{"limit": {"2"}, "from": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	var prod *api.ActivityGroup
	for i := range got.Environments {
		if got.Environments[i].Environment == "prod" {
			prod = &got.Environments[i]
		}
	}
	if prod == nil {
		t.Fatalf("activity %+v: no prod", got)
	}
	var ids []string
	for _, it := range prod.Items {
		ids = append(ids, it.ID)
	}
	if strings.Join(ids, ",") != strings.Join(queued[:2], ",") || prod.Total != 5 {
		t.Errorf("prod page from 1, limit 2: %v of %d, want %v of 5", ids, prod.Total, queued[:2])
	}
	if prod.Items[0].QueuePosition != 2 || !strings.Contains(prod.Items[0].Reason, "2nd in billing/prod") {
		t.Errorf("first item of the page: position %d, %q; want its place in the whole queue", prod.Items[0].QueuePosition, prod.Items[0].Reason)
	}
	all, err := f.client.Activity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range all.Environments {
		if g.Total != len(g.Items) {
			t.Errorf("unpaged %s: total %d, %d items", g.Environment, g.Total, len(g.Items))
		}
	}
	for _, q := range []url.Values{{"limit": {"0"}}, {"limit": {"x"}}, {"limit": {"100001"}}, {"from": {"-1"}}, {"from": {"1e3"}}} {
		_, err := f.client.ActivityQuery(ctx, q)
		var me *manent.Error
		if !errors.As(err, &me) || me.Code != manent.EInvalid {
			t.Errorf("activity ?%s: %v, want a 422", q.Encode(), err)
		}
	}
}

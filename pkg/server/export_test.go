package server

import (
	"testing"
	"time"
)

// SetStreamTiming shortens the event streams' heartbeat, poll, write
// timeout and subscriber buffer for the rest of t (zero keeps a value).
// Tests using it must not run in parallel.
func SetStreamTiming(t testing.TB, heartbeat, poll, writeTimeout time.Duration, buffer int) {
	t.Helper()
	cur := currentStreamTiming()
	if heartbeat > 0 {
		cur.Heartbeat = heartbeat
	}
	if poll > 0 {
		cur.Poll = poll
	}
	if writeTimeout > 0 {
		cur.WriteTimeout = writeTimeout
	}
	if buffer > 0 {
		cur.Buffer = buffer
	}
	prev := streamTimingOverride.Swap(&cur)
	t.Cleanup(func() { streamTimingOverride.Store(prev) })
}

// StreamsCut is how many streams were closed, process-wide, because their
// client did not keep up.
func StreamsCut() int64 { return streamsCut.Load() }

// SetStreamRecheck makes open event streams check their credential again
// every d for the rest of t. Tests using it must not run in parallel.
func SetStreamRecheck(t testing.TB, d time.Duration) {
	t.Helper()
	cur := currentStreamTiming()
	cur.Recheck = d
	prev := streamTimingOverride.Swap(&cur)
	t.Cleanup(func() { streamTimingOverride.Store(prev) })
}

// StreamRechecks is how many re-checks of open streams' credentials ran,
// process-wide.
func StreamRechecks() int64 { return streamRechecks.Load() }

// Route is a route as registered (router.go), for the tests that walk
// every route.
type Route = route

// Routes returns every route s serves, in the order registered.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routeList...) }

// StreamReadWaiting is the comment of a stream whose read of the database
// failed and is tried again.
const StreamReadWaiting = streamReadWaiting

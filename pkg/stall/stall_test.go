package stall_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/stall"
)

// Bytes read restart the timer; a read that returns nothing does not.
func TestReaderRestartsTheTimerOnProgress(t *testing.T) {
	fired := make(chan struct{}, 1)
	timer := time.AfterFunc(time.Hour, func() { fired <- struct{}{} })
	defer timer.Stop()
	r := &stall.Reader{R: strings.NewReader("abc"), Timer: timer, Idle: time.Hour}
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "abc" {
		t.Fatalf("read %q, %v", b, err)
	}
	// Restarted for an hour by the bytes read: a short Idle now shows that
	// an empty read (EOF) restarts nothing.
	r.Idle = time.Millisecond
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read at EOF: %d, %v", n, err)
	}
	select {
	case <-fired:
		t.Fatal("the timer fired: it was not restarted for an hour by the bytes read")
	default:
	}
	r.R = strings.NewReader("d")
	if _, err := r.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the timer restarted for 1ms did not fire")
	}
}

package plugin

import (
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// streams are the pipes of a command's standard streams that are not files.
//
// exec.Cmd copies such streams with goroutines of its own, and cmd.Wait
// waits for them after the process exits: a command that leaves a child
// holding its stdout (`sleep 300 &`) keeps Wait from returning until
// WaitDelay, which then fails the step although the command succeeded. So
// Run gives the command OS pipes copied by goroutines of its own: Wait
// returns when the leader exits, the leftovers of its group are killed,
// which closes the pipes, and then the copies end (streams.wait).
type streams struct {
	child []*os.File // the command's ends, closed in this process once it started
	ours  []*os.File // this process's ends, closed when the copies end
	copy  []func()
	done  sync.WaitGroup
	// running counts the output copies not ended, waiting those of them
	// waiting for the command's next bytes, entered the reads they began,
	// read the bytes they got: the copy of a slow writer (the step's log,
	// written to the database) makes no progress without waiting, and is
	// not cut.
	running, waiting, entered, read atomic.Int64
}

// drainMax bounds how long wait lets the copies run after the command
// ended while a process that left its group keeps writing to its output.
const drainMax = time.Minute

// attachStreams replaces cmd's Stdin, Stdout and Stderr that are neither nil
// nor files with pipes (one for Stdout and Stderr when they are the same
// writer, as exec does, so their lines keep their order).
func attachStreams(cmd *exec.Cmd) (*streams, error) {
	s := &streams{}
	if r := cmd.Stdin; r != nil {
		if _, ok := r.(*os.File); !ok {
			pr, pw, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			cmd.Stdin = pr
			s.child = append(s.child, pr)
			s.ours = append(s.ours, pw)
			s.copy = append(s.copy, func() {
				_, _ = io.Copy(pw, r)
				_ = pw.Close()
			})
		}
	}
	out := func(w io.Writer) (*os.File, error) {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		s.child = append(s.child, pw)
		s.ours = append(s.ours, pr)
		s.running.Add(1)
		s.copy = append(s.copy, func() {
			defer s.running.Add(-1)
			_, _ = io.Copy(w, &countingReader{r: pr, s: s})
			// A writer that failed: the command gets EPIPE, as with exec's
			// own copies, rather than a full pipe.
			_ = pr.Close()
		})
		return pw, nil
	}
	stdout, stderr := cmd.Stdout, cmd.Stderr
	if _, ok := stdout.(*os.File); stdout != nil && !ok {
		pw, err := out(stdout)
		if err != nil {
			s.close()
			return nil, err
		}
		cmd.Stdout = pw
		if sameWriter(stdout, stderr) {
			cmd.Stderr = pw
		}
	}
	if _, ok := stderr.(*os.File); stderr != nil && !ok && !sameWriter(stdout, stderr) {
		pw, err := out(stderr)
		if err != nil {
			s.close()
			return nil, err
		}
		cmd.Stderr = pw
	}
	return s, nil
}

// sameWriter says whether a and b are the same writer (false for writers
// that cannot be compared).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// started closes the command's ends here and starts the copies.
func (s *streams) started() {
	for _, f := range s.child {
		_ = f.Close()
	}
	s.child = nil
	for _, c := range s.copy {
		s.done.Go(c)
	}
}

// countingReader is one output copy's reader: it counts the copy as
// waiting while it reads, and the bytes it gets.
type countingReader struct {
	r io.Reader
	s *streams
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.s.entered.Add(1)
	c.s.waiting.Add(1)
	n, err := c.r.Read(p)
	c.s.waiting.Add(-1)
	c.s.read.Add(int64(n))
	return n, err
}

// wait waits for the copies to end: once they have read what the pipes
// hold, when no process holds the command's ends any more — however long
// their writers take (a step's log goes to the database, slow under load;
// what the command wrote before it ended is all kept). A process that left
// the step's process group (setsid, a daemon) may still hold them: once
// the copies have waited d for a byte, after drainMax, or once done is
// closed (nil: never), wait closes this process's ends, which ends the
// copies, and returns false.
func (s *streams) wait(d time.Duration, done <-chan struct{}) bool {
	ended := make(chan struct{})
	go func() {
		s.done.Wait()
		close(ended)
	}()
	t := time.NewTicker(d)
	defer t.Stop()
	limit := time.NewTimer(drainMax)
	defer limit.Stop()
	last, lastEntered := s.read.Load(), s.entered.Load()
wait:
	for {
		select {
		case <-ended:
			s.close()
			return true
		case <-t.C:
			// Cut only copies that waited for the command's output the
			// whole period — in the same read, with nothing read since
			// the last tick: none that is writing what it read, or has
			// just come back to read more.
			n, e := s.read.Load(), s.entered.Load()
			if n == last && e == lastEntered && s.waiting.Load() == s.running.Load() {
				break wait
			}
			last, lastEntered = n, e
		case <-limit.C:
			break wait
		case <-done:
			select {
			case <-ended:
				// Ended as well: nothing was cut.
				s.close()
				return true
			default:
			}
			break wait
		}
	}
	s.close()
	<-ended
	return false
}

// close closes every end still open.
func (s *streams) close() {
	for _, f := range s.child {
		_ = f.Close()
	}
	for _, f := range s.ours {
		_ = f.Close()
	}
	s.child, s.ours = nil, nil
}

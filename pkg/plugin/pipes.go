package plugin

import (
	"io"
	"os"
	"os/exec"
	"sync"
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
}

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
		s.copy = append(s.copy, func() {
			_, _ = io.Copy(w, pr)
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

// wait waits for the copies to end: at once when no process holds the
// command's ends any more. A process that left the step's process group
// (setsid, a daemon) may still hold them: after d, wait closes this
// process's ends, which ends the copies, and returns false.
func (s *streams) wait(d time.Duration) bool {
	ended := make(chan struct{})
	go func() {
		s.done.Wait()
		close(ended)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ended:
		s.close()
		return true
	case <-t.C:
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

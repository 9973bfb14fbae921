package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	ossignal "os/signal"
	"sync"
	"syscall"
	"time"
)

// The lifeline stops a worker's step processes when the worker dies.
//
// A step's command runs in its own process group, which the worker kills
// when the step ends, is cancelled or times out. A worker that is killed
// (SIGKILL, the OOM killer, a crash) cannot: its groups would run on. On
// SQLite the restarted server stops them (Sweep) before it resumes their
// steps; on PostgreSQL another worker, perhaps on another machine, takes
// the deploys over and runs the step again — while the first attempt might
// still be running.
//
// So each worker starts, once, a lifeline: a copy of its own executable in
// lifeline mode (an environment variable this package's init reads before
// anything else runs), in a process group of its own, that ignores SIGINT,
// SIGTERM and SIGHUP. The worker writes to the lifeline's stdin, a pipe,
// each process group it starts and each that ends. The lifeline holds the
// only other end: when the worker dies, however it dies, the kernel closes
// the pipe, and the lifeline stops every group still registered — SIGTERM,
// then SIGKILL after the grace period, matched by the leader's start time
// as Sweep does — and exits. It is done in milliseconds, well within
// workers.dead_after, so a step taken over elsewhere runs after its first
// attempt's processes are gone. Only a kill of the lifeline together with
// the worker (a container or cgroup stopped as a whole, which ends the
// steps too) escapes it; if the lifeline alone dies, the worker starts
// another and registers its running groups again.
//
// A worker that does not die but goes silent — paused (SIGSTOP, a frozen
// process), or cut off from the database — is taken over all the same
// once its heartbeat is older than workers.dead_after, and its steps'
// processes, which nothing pauses, would run on beside the new attempt.
// So on PostgreSQL the worker also gives its lifeline a lease (Lease)
// after each heartbeat that lands: when the lease ends with no newer one,
// the lifeline stops every registered group, as if the worker had died,
// and goes on reading. The worker stops itself too when it can (the
// engine's cut-off); a paused one cannot, which is why this is the
// lifeline's job.

const (
	lifelineEnv      = "MANENT_PROCS_LIFELINE"
	lifelineGraceEnv = "MANENT_PROCS_LIFELINE_GRACE"
)

func init() {
	if os.Getenv(lifelineEnv) != "1" {
		return
	}
	grace, err := time.ParseDuration(os.Getenv(lifelineGraceEnv))
	if err != nil || grace <= 0 {
		grace = DefaultGrace
	}
	os.Exit(runLifeline(os.Stdin, os.Stderr, grace))
}

// lifelineMsg is one line the worker writes to its lifeline.
type lifelineMsg struct {
	// Op is "add" or "del" (Rec's group started or ended), or "lease":
	// stop every registered group, with Grace between SIGTERM and SIGKILL,
	// unless another lease comes within Within.
	Op     string        `json:"op"`
	Rec    procRecord    `json:"rec,omitzero"`
	Within time.Duration `json:"within,omitempty"`
	Grace  time.Duration `json:"grace,omitempty"`
}

// runLifeline is the lifeline process: it reads the worker's messages
// until the pipe closes, then stops the groups still registered. A lease
// that ends first stops them too, and it reads on.
func runLifeline(in io.Reader, log io.Writer, grace time.Duration) int {
	ossignal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	msgs := make(chan lifelineMsg)
	go func() {
		defer close(msgs)
		dec := json.NewDecoder(in)
		for {
			var m lifelineMsg
			if err := dec.Decode(&m); err != nil {
				return // the worker is gone (or closed the pipe): nothing more comes
			}
			msgs <- m
		}
	}()
	groups := map[int]procRecord{}
	var wg sync.WaitGroup
	// stopAll stops the registered groups in the background: the worker's
	// messages are read meanwhile, so its writes never wait on a stop.
	stopAll := func(why string, grace time.Duration) {
		for _, rec := range groups {
			if len(liveTargets(rec)) == 0 {
				continue
			}
			fmt.Fprintf(log, "manent lifeline: %s; stopping step %s of deploy %s (process group %d)\n", why, rec.Step, rec.Deploy, rec.PGID)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := stopGroup(context.Background(), rec, grace); err != nil {
					fmt.Fprintf(log, "manent lifeline: step %s of deploy %s: %v\n", rec.Step, rec.Deploy, err)
				}
			}()
		}
		clear(groups)
	}
	lease := time.NewTimer(time.Hour)
	lease.Stop()
	leaseGrace := grace
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				stopAll("the worker is gone", grace)
				wg.Wait()
				return 0
			}
			switch m.Op {
			case "add":
				groups[m.Rec.PGID] = m.Rec
			case "del":
				delete(groups, m.Rec.PGID)
			case "lease":
				lease.Reset(m.Within)
				leaseGrace = m.Grace
			}
		case <-lease.C:
			stopAll("the worker's heartbeat has not reached the database for too long (paused or cut off), so another worker may take its deploys over", leaseGrace)
		}
	}
}

// lifeline is a worker's handle on its lifeline process.
type lifeline struct {
	cmd    *exec.Cmd
	w      *os.File // the pipe to its stdin
	exited chan struct{}
}

// StartLifeline starts p's lifeline (see above). Once it runs, every
// process group p starts is registered with it until it ends. The
// lifeline writes what it does to the worker's stderr; log (nil: none)
// gets the worker's own messages about it. Close stops it.
func (p *Procs) StartLifeline(log *slog.Logger) error {
	if p == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line != nil || p.closed {
		return nil
	}
	l, err := p.startLifelineLocked()
	if err != nil {
		return err
	}
	p.line = l
	go p.keepLifeline(l, log)
	return nil
}

// startLifelineLocked starts a lifeline process and registers the groups
// running now.
func (p *Procs) startLifelineLocked() (*lifeline, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the step lifeline: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the step lifeline: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{lifelineEnv + "=1", lifelineGraceEnv + "=" + p.grace.String()}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, os.Stderr, os.Stderr
	// Its own group: a Ctrl-C meant for the worker's terminal group does
	// not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close() // the lifeline's end: the worker keeps only w
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the step lifeline: %w", err)
	}
	l := &lifeline{cmd: cmd, w: w, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(l.exited)
	}()
	for _, rec := range p.running {
		l.send(lifelineMsg{Op: "add", Rec: rec})
	}
	if !p.lease.IsZero() {
		l.send(lifelineMsg{Op: "lease", Within: max(time.Until(p.lease), 0), Grace: p.leaseGrace})
	}
	return l, nil
}

// keepLifeline starts another lifeline when l exits while p is open.
func (p *Procs) keepLifeline(l *lifeline, log *slog.Logger) {
	for {
		<-l.exited
		p.mu.Lock()
		if p.closed || p.line != l {
			p.mu.Unlock()
			return
		}
		l.w.Close()
		next, err := p.startLifelineLocked()
		if err != nil {
			p.line = nil
			p.mu.Unlock()
			log.Error("the step lifeline exited and could not be started again: if this worker dies, its steps' processes run on until it restarts", "error", err)
			return
		}
		p.line = next
		p.mu.Unlock()
		log.Warn("the step lifeline exited; started it again", "pid", next.cmd.Process.Pid)
		// Pacing, not synchronisation: not at once again if it keeps dying.
		select {
		case <-time.After(time.Second):
		case <-p.closing:
			return
		}
		l = next
	}
}

// sendTimeout bounds one write to the lifeline: one that stopped reading
// (stopped, stuck) must not hold up the worker's steps.
const sendTimeout = time.Second

// send writes one message. A lifeline that is gone is replaced by
// keepLifeline, which registers the running groups again; one that does
// not read is killed, and so replaced too.
func (l *lifeline) send(m lifelineMsg) {
	if l == nil {
		return
	}
	b, _ := json.Marshal(m)
	_ = l.w.SetWriteDeadline(time.Now().Add(sendTimeout))
	if _, err := l.w.Write(append(b, '\n')); errors.Is(err, os.ErrDeadlineExceeded) {
		_ = l.cmd.Process.Kill()
	}
}

// Lease tells the lifeline to stop every running group — SIGTERM, then
// SIGKILL after grace (0: at once) — unless Lease is called again within
// within: the worker renews it after each heartbeat that lands, so a
// worker paused or cut off from the database past within has its steps'
// processes stopped before another worker takes its deploys over. A
// lifeline started again later gets what is left of the lease.
func (p *Procs) Lease(within, grace time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lease, p.leaseGrace = time.Now().Add(within), grace
	p.line.send(lifelineMsg{Op: "lease", Within: max(within, 0), Grace: grace})
}

// Close stops p's lifeline and waits for it to exit. The groups still
// registered (none after a clean shutdown, which kills them) are stopped
// by it as if the worker had died.
func (p *Procs) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if !p.closed {
		close(p.closing)
	}
	p.closed = true
	l := p.line
	p.line = nil
	p.mu.Unlock()
	if l == nil {
		return
	}
	l.w.Close()
	select {
	case <-l.exited:
	case <-time.After(p.grace + goneTimeout):
		_ = l.cmd.Process.Kill()
	}
}

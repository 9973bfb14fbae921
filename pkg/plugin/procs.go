package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultGrace is how long a step's processes get between SIGTERM and
// SIGKILL.
const DefaultGrace = 5 * time.Second

// goneTimeout bounds the wait for killed processes to disappear.
const goneTimeout = 30 * time.Second

// pollEvery is how often the process table is read while waiting for a
// process group to disappear.
const pollEvery = 20 * time.Millisecond

// Procs runs the commands of steps (SPEC §11.2): each in its own process
// group, which is killed as a whole — SIGTERM, then SIGKILL after the grace
// period — when the step is cancelled, times out or the worker shuts down,
// and whose remaining processes are killed when the command returns: a
// step's processes do not outlive it.
//
// While a step's command runs, its process group is recorded in a file
// under the directory given to NewProcs, with the leader's start time so
// that a reused process id is never taken for it. A recovered step (the
// worker was killed) first makes sure the group recorded for it is gone —
// terminated, and no process of it left — before it runs its command again;
// Sweep does the same for every recorded group when the worker starts.
//
// A nil *Procs runs commands in their own process group without recording
// them.
type Procs struct {
	dir   string
	grace time.Duration

	mu      sync.Mutex
	running map[int]procRecord // by process group
	line    *lifeline          // lifeline.go; nil when not started
	closed  bool
	closing chan struct{} // closed by Close
	// lease is when the lifeline's lease ends (zero: none), and leaseGrace
	// the grace period it stops the groups with then (Lease).
	lease      time.Time
	leaseGrace time.Duration
}

// NewProcs records running process groups in dir (one directory per
// worker; "" records nothing). grace is the time between SIGTERM and
// SIGKILL (0: DefaultGrace).
func NewProcs(dir string, grace time.Duration) *Procs {
	if grace <= 0 {
		grace = DefaultGrace
	}
	return &Procs{dir: dir, grace: grace, running: map[int]procRecord{}, closing: make(chan struct{})}
}

// procRecord is the file that says a step's command is running.
type procRecord struct {
	Deploy string `json:"deploy"`
	Step   string `json:"step"`
	Wave   string `json:"wave,omitempty"`
	// PGID is the process group (the leader's pid); 0 while the command
	// is being started.
	PGID int `json:"pgid"`
	// Start is the leader's start time (clock ticks since boot, from
	// /proc/<pid>/stat) and Boot the kernel's boot id: together they tell
	// the group from a later one that reuses its id.
	Start     uint64    `json:"start,omitempty"`
	Boot      string    `json:"boot,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

func (p *Procs) grace0() time.Duration {
	if p == nil {
		return DefaultGrace
	}
	return p.grace
}

// Run runs cmd — made with exec.Command, not CommandContext — for the step
// pc and waits for it, like cmd.Run. The command runs in its own process
// group; when ctx is done the group gets SIGTERM, then SIGKILL after the
// grace period. Before it starts, the processes of an earlier attempt of
// the same step that are still running are stopped (see Procs). The result
// is the leader's: Run returns when the leader exits, not when the last
// process holding the command's output does (streams).
func (p *Procs) Run(ctx context.Context, pc Context, cmd *exec.Cmd) error {
	return p.run(ctx, pc, cmd, nil)
}

// ErrOutputHeld is what RunBounded returns when the command ended
// successfully but a process that left its process group (setsid, a
// daemon) still held its output when ctx ended: what it wrote may not all
// have been read.
var ErrOutputHeld = errors.New("the command ended, but a process it left running outside its process group (setsid, a daemon) still held its output")

// RunBounded is Run for a command whose caller waits for it and whose
// output is kept in memory (an external plugin's validate, which a
// submission waits for): once ctx is done it also stops reading the
// command's output, which a process that left the command's process group
// may hold open long after the command ended, and returns at once
// (ErrOutputHeld if the command itself had succeeded). Run reads that
// output up to a minute after the command: a step's log, written to the
// database, may take that long.
func (p *Procs) RunBounded(ctx context.Context, pc Context, cmd *exec.Cmd) error {
	return p.run(ctx, pc, cmd, ctx.Done())
}

// run is Run; the copies of the output are cut when done is (nil: never).
func (p *Procs) run(ctx context.Context, pc Context, cmd *exec.Cmd, done <-chan struct{}) error {
	grace := p.grace0()
	path := p.recordPath(pc)
	if path != "" {
		if err := p.settle(ctx, path, pc.Log); err != nil {
			return err
		}
		// An intent record first: a worker killed between the start of the
		// command and the record of its group leaves the step's variables
		// to find it by.
		if err := writeRecord(path, procRecord{Deploy: pc.DeployID, Step: pc.Step, Wave: pc.Wave, StartedAt: time.Now().UTC()}); err != nil {
			return fmt.Errorf("record the step's process group: %w", err)
		}
	}
	setGroup(cmd)
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = grace
	}
	// The last moment to learn that the worker was paused past its lease
	// since the engine's own check (then another worker may run this
	// step), or that it is shutting down (Close).
	if err := p.mayStart(); err != nil {
		if path != "" {
			_ = os.Remove(path)
		}
		return err
	}
	streams, err := attachStreams(cmd)
	if err == nil {
		err = cmd.Start()
		if err != nil {
			streams.close()
		}
	}
	if err != nil {
		if path != "" {
			_ = os.Remove(path)
		}
		return err
	}
	streams.started()
	pgid := cmd.Process.Pid
	rec := procRecord{Deploy: pc.DeployID, Step: pc.Step, Wave: pc.Wave, PGID: pgid, StartedAt: time.Now().UTC()}
	rec.Start, rec.Boot = startTime(pgid), bootID()
	if path != "" {
		if err := writeRecord(path, rec); err != nil {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			_ = cmd.Wait()
			streams.wait(grace, nil)
			return fmt.Errorf("record the step's process group: %w", err)
		}
	}
	if err := p.track(rec, true); err != nil {
		// Closed since mayStart: nothing would stop this group at the
		// shutdown under way.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_ = cmd.Wait()
		streams.wait(grace, nil)
		if path != "" && stopGroup(context.Background(), rec, 0) == nil {
			_ = os.Remove(path)
		}
		return err
	}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-stop:
			return
		case <-ctx.Done():
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-stop:
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	err = cmd.Wait()
	close(stop)
	<-watched
	// What the leader left behind in its group goes with it, and with it
	// the last writers of the command's output.
	gone := stopGroup(context.Background(), rec, 0) == nil
	ended := time.Now()
	drained := streams.wait(grace, done)
	if !drained && err == nil && done != nil && ctx.Err() != nil {
		err = ErrOutputHeld
	}
	if !drained && pc.Log != nil {
		fmt.Fprintf(pc.Log, "manent: a process that left the step's process group still held the command's output %s after the command ended: stopped reading it\n",
			time.Since(ended).Round(10*time.Millisecond))
	}
	_ = p.track(rec, false)
	if path != "" && gone {
		_ = os.Remove(path)
	}
	return err
}

// BootID is the kernel's boot id ("" where it is not known): with a
// process id or a host name it tells this boot from an earlier one.
func BootID() string { return bootID() }

// ErrLeaseLapsed is what Run returns, without starting the command, once
// the lease given with Lease has lapsed.
var ErrLeaseLapsed = errors.New("not started: this worker's lease lapsed (it was paused or cut off from the database past its cut-off), so another worker may run this step")

// ErrClosed is what Run returns, without starting the command, once
// Close was called: the worker is shutting down, its lifeline is gone and
// the groups it kills at shutdown are already killed, so a command started
// now would outlive it. Not permanent: the step runs again where its
// deploy resumes.
var ErrClosed = errors.New("not started: this worker is shutting down; the step runs again when its deploy resumes")

// mayStart returns ErrClosed once p is closed, and ErrLeaseLapsed when a
// lease was given and has lapsed.
func (p *Procs) mayStart() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if !p.lease.IsZero() && !time.Now().Before(p.lease) {
		return ErrLeaseLapsed
	}
	return nil
}

// settle stops what an earlier attempt of the step left running.
func (p *Procs) settle(ctx context.Context, path string, log io.Writer) error {
	rec, err := readRecord(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		// An unreadable record names no group; the sweep at start-up and
		// the earlier attempt's own end have done what they could.
		_ = os.Remove(path)
		return nil
	}
	if len(liveTargets(rec)) > 0 {
		if log != nil {
			fmt.Fprintf(log, "manent: the previous attempt of step %s is still running (process group %d): stopping it first\n", rec.Step, rec.PGID)
		}
		if err := stopGroup(ctx, rec, p.grace0()); err != nil {
			return fmt.Errorf("the previous attempt of step %s: %w", rec.Step, err)
		}
	}
	_ = os.Remove(path)
	return nil
}

// Sweep stops every process group recorded in p's directory — run when the
// worker starts, before it resumes its deploys: whatever its previous life
// started is orphaned. It returns the steps whose processes it stopped.
func (p *Procs) Sweep(ctx context.Context) ([]string, error) {
	if p == nil || p.dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p.dir, err)
	}
	var (
		mu      sync.Mutex
		stopped []string
		errs    []error
		wg      sync.WaitGroup
	)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(p.dir, e.Name())
		rec, err := readRecord(path)
		if err != nil {
			_ = os.Remove(path)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			live := len(liveTargets(rec)) > 0
			err := stopGroup(ctx, rec, p.grace)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("deploy %s step %s: %w", rec.Deploy, rec.Step, err))
				return
			}
			if live {
				stopped = append(stopped, rec.Deploy+" "+rec.Step)
			}
			_ = os.Remove(path)
		}()
	}
	wg.Wait()
	return stopped, errors.Join(errs...)
}

// Kill sends SIGKILL to the process group of every command still running
// (a worker shutting down after its grace period).
func (p *Procs) Kill() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for pgid := range p.running {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// track registers the group of rec as running (on) or ended, here and
// with the lifeline. Once p is closed it registers no group (ErrClosed):
// neither Kill nor a lifeline would stop it.
func (p *Procs) track(rec procRecord, on bool) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		if p.closed {
			return ErrClosed
		}
		p.running[rec.PGID] = rec
		p.line.send(lifelineMsg{Op: "add", Rec: rec})
	} else {
		delete(p.running, rec.PGID)
		p.line.send(lifelineMsg{Op: "del", Rec: rec})
	}
	return nil
}

// recordPath is the record file of the step pc ("" when nothing is
// recorded: no directory, or an action outside a deploy such as validate).
func (p *Procs) recordPath(pc Context) string {
	if p == nil || p.dir == "" || pc.DeployID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(pc.DeployID + "\x00" + pc.Step + "\x00" + pc.Wave))
	return filepath.Join(p.dir, hex.EncodeToString(sum[:16])+".json")
}

func writeRecord(path string, rec procRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readRecord(path string) (procRecord, error) {
	var rec procRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", path, err)
	}
	return rec, nil
}

// stopGroup terminates what is left of rec's process group — SIGTERM, then
// SIGKILL after grace (at once when grace is 0) — and waits until no
// process of it remains, or ctx is done, or goneTimeout passes.
func stopGroup(ctx context.Context, rec procRecord, grace time.Duration) error {
	targets := liveTargets(rec)
	if len(targets) == 0 {
		return nil
	}
	sig := syscall.SIGTERM
	if grace <= 0 {
		sig = syscall.SIGKILL
	}
	signal(targets, sig)
	if sig == syscall.SIGTERM {
		if waitGone(ctx, rec, grace) {
			return nil
		}
		signal(liveTargets(rec), syscall.SIGKILL)
	}
	if waitGone(ctx, rec, goneTimeout) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("process group %d still has processes %s after SIGKILL", rec.PGID, goneTimeout)
}

func signal(targets []int, sig syscall.Signal) {
	for _, t := range targets {
		_ = syscall.Kill(t, sig)
	}
}

// waitGone polls until rec's group has no process left (true) or d passes
// or ctx is done (false).
func waitGone(ctx context.Context, rec procRecord, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if len(liveTargets(rec)) == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return len(liveTargets(rec)) == 0
		case <-tick.C:
		}
	}
}

// setGroup makes cmd the leader of a new process group.
func setGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
}

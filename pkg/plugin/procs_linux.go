package plugin

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// procStat is what /proc/<pid>/stat says of a process.
type procStat struct {
	pid   int
	state byte
	pgrp  int
	start uint64
}

// readStat parses /proc/<pid>/stat: fields after the command name (which
// may hold spaces and parentheses) start with the state (field 3); the
// process group is field 5 and the start time field 22.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || len(f[0]) == 0 {
		return procStat{}, false
	}
	return procStat{pid: pid, state: f[0][0], pgrp: pgrp, start: start}, true
}

// readProcs lists the processes of the system.
func readProcs() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procStat, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if s, ok := readStat(pid); ok {
			out = append(out, s)
		}
	}
	return out
}

func (s procStat) dead() bool { return s.state == 'Z' || s.state == 'X' }

// startTime is pid's start time in clock ticks since boot (0: unknown).
func startTime(pid int) uint64 {
	s, _ := readStat(pid)
	return s.start
}

var bootID = sync.OnceValue(func() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
})

// liveTargets says what to signal to reach the live processes of rec's
// process group: -pgid when its leader is still the one recorded, else the
// pids of the group's processes that started after the recorded leader
// (a process id is not reused while a group of that id has members, so
// they are the leader's descendants). A leader reused by another process
// (same pid, another start time) means the group is long gone. A record
// without a group (the worker died while starting the command) is matched
// by the step's MANENT_DEPLOY_ID and MANENT_STEP. nil: nothing left.
func liveTargets(rec procRecord) []int {
	if rec.Boot != "" && rec.Boot != bootID() {
		return nil
	}
	procs := readProcs()
	if rec.PGID == 0 {
		return byEnviron(rec, procs)
	}
	var members []int
	leader := false
	for _, s := range procs {
		if s.pid == rec.PGID {
			if rec.Start != 0 && s.start != rec.Start {
				return nil
			}
			leader = true
			if !s.dead() && s.pgrp != rec.PGID {
				// The leader left its group (setsid): still ours.
				members = append(members, s.pid)
			}
		}
		if s.pgrp != rec.PGID || s.dead() || (rec.Start != 0 && s.start < rec.Start) {
			continue
		}
		members = append(members, s.pid)
	}
	if len(members) == 0 {
		return nil
	}
	if leader {
		return append(members, -rec.PGID)
	}
	return members
}

// byEnviron finds the processes started for rec's step — their environment
// names its deploy and step — and the members of the groups they lead.
func byEnviron(rec procRecord, procs []procStat) []int {
	want := [][]byte{[]byte("MANENT_DEPLOY_ID=" + rec.Deploy), []byte("MANENT_STEP=" + rec.Step)}
	leaders := map[int]bool{}
	var out []int
	for _, s := range procs {
		if s.dead() {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/environ")
		if err != nil {
			continue
		}
		vars := bytes.Split(b, []byte{0})
		found := 0
		for _, w := range want {
			for _, v := range vars {
				if bytes.Equal(v, w) {
					found++
					break
				}
			}
		}
		if found == len(want) {
			out = append(out, s.pid)
			if s.pgrp == s.pid {
				leaders[s.pid] = true
			}
		}
	}
	for _, s := range procs {
		if leaders[s.pgrp] && s.pid != s.pgrp && !s.dead() {
			out = append(out, s.pid)
		}
	}
	return out
}

package load

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Process is a server process whose CPU time a run reads from /proc: what a request
// costs the server itself, whatever share of the machine the load generator takes.
type Process struct {
	Name string // dirgate, redis, bare; "client" is the load generator itself
	PID  int    // 0 reads this process (/proc/self)
}

// ProcessCPU is the CPU time one process used during a run's measured part.
type ProcessCPU struct {
	Name string        `json:"name"`
	CPU  time.Duration `json:"cpuNs"`
	// PerRequest is CPU divided by the run's requests, in microseconds.
	PerRequest float64 `json:"perRequestUs"`
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 on Linux
// whatever the kernel's own tick (it is part of the ABI).
const userHZ = 100

// readCPU returns the user plus system time of every thread of pid, living and
// exited, from /proc/<pid>/stat (fields 14 and 15). A resolution of 10 ms is ample
// over runs of seconds.
func readCPU(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("load: cpu time: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces and ")": the
	// fields that follow start after its last ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("load: cpu time: %s is not a stat line", path)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("load: cpu time: %s has %d fields", path, len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("load: cpu time: %s: field %q", path, s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuSnapshot reads every process at once.
func cpuSnapshot(procs []Process) ([]time.Duration, error) {
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		d, err := readCPU(p.PID)
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d): %w", p.Name, p.PID, err)
		}
		out[i] = d
	}
	return out, nil
}

// ProcessCPUTime is the user plus system time pid has used so far (0: this
// process), at /proc's resolution of 10 ms.
func ProcessCPUTime(pid int) (time.Duration, error) { return readCPU(pid) }

// Memory is a process's resident memory, from /proc/<pid>/status.
type Memory struct {
	RSS  int64 `json:"rssBytes"`  // VmRSS: resident now
	Peak int64 `json:"peakBytes"` // VmHWM: the most it has been resident
}

// ResetPeak makes pid's peak resident memory (VmHWM) its resident memory now, so
// that the next ReadMemory's Peak is the most it held from this call on (Linux's
// /proc/<pid>/clear_refs, value 5; the caller must own pid).
func ResetPeak(pid int) error {
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("load: reset peak memory: %w", err)
	}
	return nil
}

// ReadMemory reads pid's resident memory (0: this process).
func ReadMemory(pid int) (Memory, error) {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Memory{}, fmt.Errorf("load: memory: %w", err)
	}
	var m Memory
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(k) {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.Peak
		default:
			continue
		}
		f := bytes.Fields(v) // "1234 kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			return Memory{}, fmt.Errorf("load: memory: %s: %q", path, line)
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("load: memory: %s: %q", path, line)
		}
		*dst = n << 10
	}
	if m.RSS == 0 {
		return Memory{}, fmt.Errorf("load: memory: %s has no VmRSS", path)
	}
	return m, nil
}

// Package procstat reads memory figures of a process from Linux's
// /proc/PID/status, for benchmarks that report peak memory.
package procstat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Self names the calling process.
const Self = 0

// Bytes returns a "kB" field of /proc/PID/status (for example VmHWM, the
// peak resident set, or VmRSS) in bytes; false when the file or field
// cannot be read (another system, a process gone).
func Bytes(pid int, field string) (uint64, bool) {
	path := "/proc/self/status"
	if pid != Self {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// WatchPeak polls the peak resident set (VmHWM) of process pid until done
// is closed and returns the highest value seen. The rusage of a child
// cannot serve: Go starts children with CLONE_VM, and the kernel counts the
// parent's resident set as the child's until exec.
func WatchPeak(pid int, done <-chan struct{}) uint64 {
	var peak uint64
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if hwm, ok := Bytes(pid, "VmHWM"); ok {
			peak = max(peak, hwm)
		}
		select {
		case <-done:
			return peak
		case <-t.C:
		}
	}
}

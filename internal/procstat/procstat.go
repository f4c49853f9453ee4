// Package procstat reads memory figures of a process from Linux's
// /proc/PID/status, for benchmarks that report peak memory.
package procstat

import (
	"os"
	"strconv"
	"strings"
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

package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/iceberg-maintainer/maintainer/internal/offheap"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
)

// cgroupMemoryFiles hold a container's memory limit (cgroup v2, then v1).
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// tuneRuntime sizes the garbage collector for compaction, which allocates
// tens of times the bytes it rewrites while keeping little alive. In a
// container with a memory limit it sets a soft limit of 80% of it (unless
// GOMEMLIMIT is set); whenever a soft limit is in force, it lets the heap
// grow further between collections (GOGC=400 unless GOGC is set), because
// the limit, not GOGC, then bounds memory. It returns the limit in force.
func tuneRuntime(files []string) int64 {
	limit := debug.SetMemoryLimit(-1)
	if os.Getenv("GOMEMLIMIT") == "" {
		if c := containerMemoryLimit(files); c > 0 {
			limit = c / 10 * 8
			debug.SetMemoryLimit(limit)
		}
	}
	if limit < math.MaxInt64 && os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	return limit
}

// containerMemoryLimit reads the first cgroup limit file that holds a real
// limit; 0 means none ("max", or v1's huge "unlimited" value).
func containerMemoryLimit(files []string) int64 {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			continue
		}
		return n
	}
	return 0
}

// offheapEnv turns the off-heap writer buffers off ("off"; "on" is the
// default), should an operator ever suspect them: compaction's writers then
// use the Go heap, at the cost of a higher peak memory.
const offheapEnv = "MAINTAINER_OFFHEAP_BUFFERS"

// writeBuffers is the allocator of compaction's writers as the environment
// (getenv) asks: off-heap buffers by default (writerAllocator under limit),
// nil (the Go heap) with MAINTAINER_OFFHEAP_BUFFERS=off.
func writeBuffers(getenv func(string) string, limit int64) (compact.WriterAllocator, error) {
	switch v := getenv(offheapEnv); strings.ToLower(strings.TrimSpace(v)) {
	case "", "on":
		return writerAllocator(limit).ScopeFunc, nil
	case "off":
		return nil, nil
	default:
		return nil, fmt.Errorf("environment variable %s=%q: want on or off", offheapEnv, v)
	}
}

// writerAllocator keeps the large buffers of compaction's Parquet writers
// (a row group of pages each) off the Go heap, where they would double the
// heap goal. Under a soft memory limit, the limit is lowered by what they
// map, so that heap and mappings together stay within it.
func writerAllocator(limit int64) *offheap.Allocator {
	if limit == math.MaxInt64 {
		return offheap.New()
	}
	var (
		mu   sync.Mutex
		step = int64(-1)
		a    *offheap.Allocator
	)
	a = offheap.New(offheap.OnChange(func(int64) {
		mu.Lock()
		defer mu.Unlock()
		// Read now, under mu: calls for concurrent changes may come in
		// any order, and the last one must leave the current figure.
		mapped := a.Mapped()
		// In steps of 8 MiB: each change re-paces the collector.
		if s := mapped >> 23; s != step {
			step = s
			debug.SetMemoryLimit(max(limit-mapped, limit/4))
		}
	}))
	return a
}

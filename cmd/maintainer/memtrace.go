//go:build memtrace

package main

// A diagnostic build (go build -tags memtrace): with MAINTAINER_MEMTRACE=DIR
// it samples the runtime's memory every 100 ms into DIR/samples.tsv (heap
// objects, live heap, heap goal, resident set) and writes DIR/heap-peak.pprof, a
// heap profile, at each new maximum of the live heap. Not in the shipped
// binary.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/procstat"
)

func init() {
	dir := os.Getenv("MAINTAINER_MEMTRACE")
	if dir == "" {
		return
	}
	runtime.MemProfileRate = 64 << 10
	go memtrace(dir)
}

func memtrace(dir string) {
	out, err := os.Create(filepath.Join(dir, "samples.tsv"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "memtrace:", err)
		return
	}
	fmt.Fprintln(out, "ms\theap_objects_mib\theap_live_mib\theap_goal_mib\trss_mib")
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	start := time.Now()
	var peak uint64
	for range time.Tick(100 * time.Millisecond) {
		metrics.Read(s)
		live := s[2].Value.Uint64()
		rss, _ := procstat.Bytes(procstat.Self, "VmRSS")
		fmt.Fprintf(out, "%d\t%.1f\t%.1f\t%.1f\t%.1f\n", time.Since(start).Milliseconds(),
			mib(s[0].Value.Uint64()), mib(live), mib(s[1].Value.Uint64()), mib(rss))
		if live > peak+peak/20 {
			peak = live
			var b bytes.Buffer
			err := pprof.Lookup("heap").WriteTo(&b, 0)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "heap-peak.pprof"), b.Bytes(), 0o644)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "memtrace: heap profile:", err)
			}
		}
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/procstat"
)

// BenchmarkFleet measures a pass over many small tables of one SQLite
// catalog: for each count of FLEET_TABLES (default "30,300"), it generates
// that many tables (6 appends of 50 rows each: more files than
// compact.min_input_files, so plan plans a compaction group per table) and
// runs the real binary, one process per command so that its peak RSS is
// the command's, for `plan`, `run --task orphans --force` and `status`. It reports wall time
// and CPU per table and the peak RSS of each command, so the growth with
// the number of tables shows (a pass that grows faster than its tables, or
// memory that grows with them, is a defect).
//
//	FLEET_TABLES=30,300,1000 go test -run '^$' -bench Fleet -benchtime 1x -timeout 0 ./cmd/maintainer/
//
// FLEET_DIR keeps the generated warehouses there (FLEET_DIR/<n>; reused
// when present, so a second run measures without generating again).
func BenchmarkFleet(b *testing.B) {
	counts := []int{30, 300}
	if s := os.Getenv("FLEET_TABLES"); s != "" {
		counts = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("FLEET_TABLES=%q: want a comma-separated list of table counts", s)
			}
			counts = append(counts, n)
		}
	}
	root := os.Getenv("FLEET_DIR")
	if root == "" {
		root = b.TempDir()
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("tables=%d", n), func(b *testing.B) {
			dir := filepath.Join(root, strconv.Itoa(n))
			cfg := fleetWarehouse(b, dir, n)
			for _, c := range []struct {
				name string
				args []string
			}{
				{"plan", []string{"plan"}},
				{"orphans", []string{"run", "--task", "orphans", "--force"}},
				{"status", []string{"status"}},
			} {
				b.Run(c.name, func(b *testing.B) {
					var m fleetMeasure
					for b.Loop() {
						m = fleetRun(b, dir, append(c.args, "--config", cfg, "--output", "json")...)
					}
					b.ReportMetric(float64(m.wall.Milliseconds())/float64(n), "ms/table")
					b.ReportMetric(m.cpu.Seconds()/float64(n)*1000, "cpu-ms/table")
					b.ReportMetric(float64(m.peakRSS)/(1<<20), "peak-MiB")
					b.Logf("%d tables, %s: wall %s (%.1f ms/table), cpu %.2f s, peak RSS %.0f MiB", n, c.name,
						m.wall.Round(time.Millisecond), float64(m.wall.Milliseconds())/float64(n), m.cpu.Seconds(), float64(m.peakRSS)/(1<<20))
				})
			}
		})
	}
}

// fleetWarehouse makes (or reuses) dir with n small tables and returns the
// path of its config.
func fleetWarehouse(b *testing.B, dir string, n int) string {
	b.Helper()
	cfg := filepath.Join(dir, "maintainer.yaml")
	if _, err := os.Stat(cfg); err == nil {
		return cfg
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	cat, err := gen.OpenSQLiteCatalog(ctx, genCatalog, filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	start := time.Now()
	for i := range n {
		if _, err := gen.Create(ctx, cat, gen.Options{
			Namespace: genNamespace, Table: fmt.Sprintf("t%04d", i), Appends: 6, RowsPerAppend: 50, Partitions: 1, Seed: int64(i),
		}); err != nil {
			b.Fatalf("generate table %d: %v", i, err)
		}
	}
	b.Logf("generated %d tables in %s", n, time.Since(start).Round(time.Second))
	text := strings.ReplaceAll(string(config.DefaultYAML()), "${DEMO_DIR}", filepath.ToSlash(dir))
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	return cfg
}

type fleetMeasure struct {
	wall, cpu time.Duration
	peakRSS   uint64
}

// fleetRun runs the binary in dir; its output is discarded (exit 0 wanted).
// It starts from no trigger state, so that every task is due as on a first
// pass (plan then plans orphan removal too, rather than showing it rate
// limited by the previous command's run).
func fleetRun(b *testing.B, dir string, args ...string) fleetMeasure {
	b.Helper()
	if err := os.Remove(filepath.Join(dir, "state.json")); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	cmd := exec.Command(binPath, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	peak := make(chan uint64, 1)
	go func() { peak <- procstat.WatchPeak(cmd.Process.Pid, done) }()
	err := cmd.Wait()
	wall := time.Since(start)
	close(done)
	m := fleetMeasure{wall: wall, peakRSS: <-peak}
	if err != nil {
		b.Fatalf("maintainer %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return m
}

package orphans

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/procstat"
)

// Benchmarks of orphan planning on a generated table of single-file appends
// (one snapshot each) with planted old orphans.
//
//	ORPHANS_BENCH=appends,orphans   table size (default 200,2000)
//	ORPHANS_BENCH_DIR=dir           keep the warehouse in dir and reuse it
//	                                (gen's TestMeasure with GEN_MEASURE_DIR
//	                                writes the same layout)
//
// For example, the table (5,000 snapshots, 20,000 orphans):
//
//	ORPHANS_BENCH=5000,20000 ORPHANS_BENCH_DIR=/tmp/orphbench/t5000 \
//	  go test -run '^$' -bench 'PlanOrphans' -benchtime 3x -timeout 0 ./maintenance/orphans/
//
// Reported: listed files per second, candidates, the peak live heap during
// one plan (sampled every millisecond), the process's peak RSS, and
// allocations per plan.
func BenchmarkPlanOrphans(b *testing.B) {
	bt := benchTable(b)
	cfg := DefaultConfig()
	store := objstore.IOStore{FS: bt.fs(b)}
	var plan *Plan
	measure(b, func() {
		var err error
		if plan, err = PlanTable(context.Background(), bt.tbl, store, cfg, bt.now, nil); err != nil {
			b.Fatal(err)
		}
	})
	if len(plan.Candidates) < bt.orphans {
		b.Fatalf("%d candidates, %d orphans planted", len(plan.Candidates), bt.orphans)
	}
	b.ReportMetric(float64(plan.ListedFiles)*float64(b.N)/b.Elapsed().Seconds(), "files/s")
	b.ReportMetric(float64(len(plan.Candidates)), "candidates")
	b.ReportMetric(float64(plan.Snapshots), "snapshots")
}

// BenchmarkRecheck measures Execute's re-check of every candidate against
// freshly loaded metadata (it deletes nothing here).
func BenchmarkRecheck(b *testing.B) {
	bt, plan, cfg := benchPlan(b)
	var kept int
	measure(b, func() {
		toDelete, _, err := recheck(context.Background(), bt.cat, bt.tbl, plan, plan.config(cfg), &Result{})
		if err != nil {
			b.Fatal(err)
		}
		kept = len(toDelete)
	})
	if kept != len(plan.Candidates) {
		b.Fatalf("re-check kept %d of %d candidates", kept, len(plan.Candidates))
	}
	b.ReportMetric(float64(kept), "candidates")
}

// BenchmarkRecheckCatchUp measures the catch-up Execute makes before each
// delete batch when nothing was committed since the re-check: one
// LoadTable, no metadata read.
func BenchmarkRecheckCatchUp(b *testing.B) {
	bt, plan, cfg := benchPlan(b)
	_, tr, err := recheck(context.Background(), bt.cat, bt.tbl, plan, plan.config(cfg), &Result{})
	if err != nil {
		b.Fatal(err)
	}
	measure(b, func() {
		if err := tr.catchUp(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
}

// benchPlan plans orphan removal on the benchmark table with the default
// config.
func benchPlan(b *testing.B) (*benchFixture, *Plan, Config) {
	bt := benchTable(b)
	cfg := DefaultConfig()
	plan, err := PlanTable(context.Background(), bt.tbl, objstore.IOStore{FS: bt.fs(b)}, cfg, bt.now, nil)
	if err != nil {
		b.Fatal(err)
	}
	return bt, plan, cfg
}

// BenchmarkPlanOrphansIcebergGo is the baseline: iceberg-go v0.7.0's own
// Table.PlanOrphanFiles on the same table.
func BenchmarkPlanOrphansIcebergGo(b *testing.B) {
	bt := benchTable(b)
	var n int
	measure(b, func() {
		p, err := bt.tbl.PlanOrphanFiles(context.Background(), table.WithFilesOlderThan(72*time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		n = len(p.Files())
	})
	b.ReportMetric(float64(n), "candidates")
}

type benchFixture struct {
	cat     *sqlcat.Catalog
	tbl     *table.Table
	now     time.Time
	orphans int
}

func (bt *benchFixture) fs(b *testing.B) iceio.IO {
	fs, err := bt.tbl.FS(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return fs
}

var benchOnce sync.Map // dir -> *benchFixture

// benchTable opens (or generates) the warehouse and plants the orphans.
func benchTable(b *testing.B) *benchFixture {
	b.Helper()
	appends, orphans := 200, 2000
	if spec := os.Getenv("ORPHANS_BENCH"); spec != "" {
		parts := strings.Split(spec, ",")
		var err error
		if appends, err = strconv.Atoi(parts[0]); err != nil {
			b.Fatalf("ORPHANS_BENCH=%s: %v", spec, err)
		}
		if len(parts) > 1 {
			if orphans, err = strconv.Atoi(parts[1]); err != nil {
				b.Fatalf("ORPHANS_BENCH=%s: %v", spec, err)
			}
		}
	}
	dir := os.Getenv("ORPHANS_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("orphans-bench-%d-%d", appends, os.Getpid()))
		benchDirs = append(benchDirs, dir)
	}
	if v, ok := benchOnce.Load(dir); ok {
		return v.(*benchFixture)
	}
	ctx := context.Background()
	opt := gen.Options{Appends: appends, RowsPerAppend: 10, Partitions: 30, Seed: 1}
	var bt benchFixture
	var err error
	if _, serr := os.Stat(filepath.Join(dir, "catalog.db")); serr == nil {
		if bt.cat, err = gen.OpenSQLiteCatalog(ctx, "bench", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")); err != nil {
			b.Fatal(err)
		}
		if bt.tbl, err = bt.cat.LoadTable(ctx, opt.Identifier()); err != nil {
			b.Fatal(err)
		}
	} else {
		b.Logf("generating %d appends in %s", appends, dir)
		if bt.cat, bt.tbl, err = gen.CreateWarehouseForBenchmark(ctx, dir, opt); err != nil {
			b.Fatal(err)
		}
	}
	if got := len(bt.tbl.Metadata().Snapshots()); got != appends {
		b.Logf("the table in %s has %d snapshots (ORPHANS_BENCH says %d)", dir, got, appends)
	}
	bt.now = time.Now()
	tableDir := localPath(b, bt.tbl.Location())
	for i := range orphans {
		p := filepath.Join(tableDir, "data", fmt.Sprintf("event_time_day=2024-01-%02d", 1+i%30), fmt.Sprintf("bench-orphan-%05d.parquet", i))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("orphan"), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Chtimes(p, bt.now.Add(-old), bt.now.Add(-old)); err != nil {
			b.Fatal(err)
		}
	}
	bt.orphans = orphans
	benchOnce.Store(dir, &bt)
	return &bt
}

// measure runs fn b.N times and reports the peak live heap (sampled) and
// the process's peak RSS over the runs.
func measure(b *testing.B, fn func()) {
	runtime.GC()
	resetPeakRSS()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		fn()
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	close(stop)
	<-done
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	if rss := peakRSS(); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
	}
}

// cpuTime is the process's user+system CPU time so far: the benchmarks
// share the machine, so wall time alone says little.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the kernel's VmHWM for this process (Linux).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func peakRSS() uint64 {
	n, _ := procstat.Bytes(procstat.Self, "VmHWM")
	return n
}

var benchDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

package expire

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// BenchmarkExpire expires all but the newest 10 snapshots of a generated
// table of single-file appends, as the anchor did with the
// iceberg-go CLI (expire-snapshots --older-than 1s --retain-last 10). The
// "maintainer" case runs load + PlanTable + Execute, the "iceberg-go" case
// Transaction.ExpireSnapshots + Commit (which deletes in its post-commit
// hook). Every iteration starts from a pristine copy of the table, restored
// outside the timer.
//
// EXPIRE_BENCH_APPENDS sets the number of appends (default 200; the issue's
// table has 5000). EXPIRE_BENCH_DIR keeps the generated table between runs
// (generating 5000 appends took 26 minutes on a busy 2-CPU machine):
//
//	EXPIRE_BENCH_APPENDS=5000 EXPIRE_BENCH_DIR=/tmp/expire-bench \
//	  go test -run '^$' -bench BenchmarkExpire -benchmem -benchtime 3x -timeout 2h ./maintenance/expire/
func BenchmarkExpire(b *testing.B) {
	appends := 200
	if v := os.Getenv("EXPIRE_BENCH_APPENDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 20 {
			b.Fatalf("EXPIRE_BENCH_APPENDS=%q: want a number of at least 20", v)
		}
		appends = n
	}
	const retain = 10
	w := benchWarehouse(b, appends)
	ctx := context.Background()

	run := func(b *testing.B, expire func(cat TableLoader, ident table.Identifier) int) {
		b.ReportAllocs()
		var expired int
		var peak uint64
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			w.restore(b)
			cat, err := gen.OpenSQLiteCatalog(ctx, "bench", w.db, w.wh)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			stop := samplePeakHeap(&peak)
			cpu0 := cpuTime()
			b.StartTimer()
			expired += expire(cat, w.ident)
			b.StopTimer()
			cpu += cpuTime() - cpu0
			stop()
			cat.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(expired)/b.Elapsed().Seconds(), "snapshots/s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		// CPU time is steadier than wall time on a shared machine.
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}

	b.Run("maintainer", func(b *testing.B) {
		run(b, func(cat TableLoader, ident table.Identifier) int {
			tbl, err := cat.LoadTable(ctx, ident)
			if err != nil {
				b.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.RetainLast, cfg.MaxSnapshotAge = retain, time.Second
			plan, err := PlanTable(ctx, tbl, cfg, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			res, err := Execute(ctx, cat, tbl, plan, cfg, Options{Deleter: &localDeleter{}})
			if err != nil || res.SnapshotsExpired() != appends-retain || len(res.DeleteFailures) > 0 {
				b.Fatalf("%v: expired %d, %d failures", err, res.SnapshotsExpired(), len(res.DeleteFailures))
			}
			return res.SnapshotsExpired()
		})
	})
	b.Run("iceberg-go", func(b *testing.B) {
		run(b, func(cat TableLoader, ident table.Identifier) int {
			tbl, err := cat.LoadTable(ctx, ident)
			if err != nil {
				b.Fatal(err)
			}
			txn := tbl.NewTransaction()
			if err := txn.ExpireSnapshots(table.WithOlderThan(time.Second), table.WithRetainLast(retain)); err != nil {
				b.Fatal(err)
			}
			after, err := txn.Commit(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return len(tbl.Metadata().Snapshots()) - len(after.Metadata().Snapshots())
		})
	})
}

type benchTable struct {
	dir, work, pristine, db, wh string
	ident                       table.Identifier
}

var benchOnce sync.Map // appends -> *benchTable

// benchWarehouse generates (or finds, under EXPIRE_BENCH_DIR) the table and
// a pristine copy of it. Locations inside are absolute, so the copy is
// always restored to the same folder.
func benchWarehouse(b *testing.B, appends int) *benchTable {
	if v, ok := benchOnce.Load(appends); ok {
		return v.(*benchTable)
	}
	root := os.Getenv("EXPIRE_BENCH_DIR")
	if root == "" {
		root = b.TempDir()
	}
	dir := filepath.Join(root, "appends-"+strconv.Itoa(appends)+"-v2")
	w := &benchTable{dir: dir, work: filepath.Join(dir, "work"), pristine: filepath.Join(dir, "pristine")}
	w.db, w.wh = filepath.Join(w.work, "catalog.db"), filepath.Join(w.work, "warehouse")
	// Old metadata files go as the table is written: each holds every
	// snapshot so far, and keeping 5,000 of them takes 10 GB. Expiry reads
	// only the current one, so the work measured is the same.
	opt := gen.Options{Appends: appends, RowsPerAppend: 10, Partitions: 30, Seed: 1, Properties: map[string]string{
		table.MetadataDeleteAfterCommitEnabledKey: "true", table.MetadataPreviousVersionsMaxKey: "20",
	}}
	w.ident = opt.Identifier()
	if _, err := os.Stat(filepath.Join(w.pristine, "done")); err != nil {
		start := time.Now()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		cat, _, err := gen.CreateWarehouseForBenchmark(context.Background(), w.work, opt)
		if err != nil {
			b.Fatal(err)
		}
		cat.Close()
		if err := os.CopyFS(w.pristine, os.DirFS(w.work)); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.pristine, "done"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Logf("generated %d appends in %v", appends, time.Since(start).Round(time.Second))
		time.Sleep(1100 * time.Millisecond) // older than the 1s cut-off

	}
	benchOnce.Store(appends, w)
	return w
}

func (w *benchTable) restore(b *testing.B) {
	if err := os.RemoveAll(w.work); err != nil {
		b.Fatal(err)
	}
	if err := os.CopyFS(w.work, os.DirFS(w.pristine)); err != nil {
		b.Fatal(err)
	}
}

// samplePeakHeap records the largest HeapAlloc seen until stop is called.
func samplePeakHeap(peak *uint64) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for !done.Load() {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > *peak {
				*peak = ms.HeapAlloc
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return func() { done.Store(true); wg.Wait() }
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

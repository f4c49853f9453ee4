package compact

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/offheap"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// BenchmarkRewriteGroups measures the heavy part of compaction: reading the
// planned groups with deletes applied, writing them out and verifying the
// row counts, MaxConcurrentGroups at a time. Outputs are discarded so every
// iteration rewrites the same input. Size it with BENCH_APPENDS (default 100
// files of BENCH_ROWS=2000 rows over BENCH_PARTS=10 days); the full-size, side-by-side
// comparison with iceberg-go's CLI is `go run ./internal/bench/compactbench`.
// BENCH_TABLE=folder rewrites a table compactbench generated (its
// table.orig) instead. BENCH_DIRECT=0 sends every group through iceberg-go's scan and writer
// instead of the direct path; BENCH_COPY=0 keeps the direct path in Arrow
// mode instead of copying leaf by leaf; BENCH_OFFHEAP=0 keeps the writers'
// buffers on the Go heap instead of the binary's offheap allocator.
//
//	go test -run '^$' -bench RewriteGroups -benchmem ./maintenance/compact/
func BenchmarkRewriteGroups(b *testing.B) {
	appends := envInt("BENCH_APPENDS", 100)
	rows := envInt("BENCH_ROWS", 2000)
	// BENCH_PER_COMMIT appends to a snapshot generate large tables quickly.
	opt := gen.Options{Appends: appends, RowsPerAppend: rows, Partitions: envInt("BENCH_PARTS", 10), Seed: 7, FilesPerCommit: envInt("BENCH_PER_COMMIT", 1)}
	var f *fixture
	if dir := os.Getenv("BENCH_TABLE"); dir != "" {
		// A table compactbench generated (its folder's table.orig): the
		// rewrites only read it, so the same files are profiled as timed.
		f = benchTable(b, dir)
	} else {
		cat, tbl, dir := testenv.GeneratedTable(b, opt)
		f = &fixture{cat: cat, tbl: tbl, opt: opt, dir: dir}
	}
	// BENCH_PROPS=k=v,k=v sets table properties first (the writer reads
	// write.parquet.* from them), to measure their effect.
	if raw := os.Getenv("BENCH_PROPS"); raw != "" {
		props := map[string]string{}
		for _, kv := range strings.Split(raw, ",") {
			k, v, _ := strings.Cut(kv, "=")
			props[k] = v
		}
		setProps(b, f, props)
	}
	cfg := testConfig()
	cfg.TargetFileSize = 128 << 20
	cfg.MaxConcurrentGroups = envInt("BENCH_GROUPS", 2)
	plan, err := PlanTable(context.Background(), f.tbl, cfg, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	fs, err := f.tbl.FS(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(plan.InputBytes())
	b.ReportAllocs()
	peak := watchHeap()
	defer func() { b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MiB") }()
	// BENCH_CPUPROF=file profiles the rewrites only, not the table's generation.
	if path := os.Getenv("BENCH_CPUPROF"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	alloc := WriterAllocator(offheap.New().ScopeFunc)
	if os.Getenv("BENCH_OFFHEAP") == "0" {
		alloc = nil
	}
	paths := defaultPaths()
	switch {
	case os.Getenv("BENCH_DIRECT") == "0":
		paths = []rewritePath{scanPath}
	case os.Getenv("BENCH_COPY") == "0":
		paths = []rewritePath{arrowPath(0), scanPath}
	}
	c0 := cpuNow()
	defer func() { b.ReportMetric((cpuNow()-c0).Seconds()/float64(b.N), "cpu-s/op") }()
	b.ResetTimer()
	for range b.N {
		opts := Options{ArrowBatchRows: envInt("BENCH_BATCH", 16384), WriteBufferBatches: envInt("BENCH_BUFFER", 4), Allocator: alloc}
		e := &executor{fs: fs, plan: plan, cfg: cfg, opts: opts, res: &Result{}, log: discardLogger(),
			paths: buildPaths(&pathEnv{tbl: f.tbl, fs: fs, sizes: plan.fileSizes(), opts: opts}, paths)}
		sem := make(chan struct{}, cfg.MaxConcurrentGroups)
		var wg sync.WaitGroup
		for i := range plan.Groups {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				out := e.rewriteGroup(context.Background(), &plan.Groups[i])
				if out.err != nil {
					b.Error(out.err)
				}
				e.removeFiles(out.files)
			}()
		}
		wg.Wait()
	}
}

// benchTable opens the table demo.events of a compactbench table folder.
func benchTable(b *testing.B, dir string) *fixture {
	ctx := context.Background()
	cat, err := gen.OpenSQLiteCatalog(ctx, "default", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cat.Close() })
	tbl, err := cat.LoadTable(ctx, table.Identifier{"demo", "events"})
	if err != nil {
		b.Fatal(err)
	}
	return &fixture{cat: cat, tbl: tbl, dir: dir}
}

// watchHeap samples the live heap every few milliseconds; the returned
// func stops sampling and gives the largest value seen.
func watchHeap() func() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				metrics.Read(sample)
				if v := sample[0].Value.Uint64(); v > peak.Load() {
					peak.Store(v)
					// BENCH_HEAPPROF=file keeps a heap profile taken at the peak.
					if path := os.Getenv("BENCH_HEAPPROF"); path != "" && v > 64<<20 {
						if f, err := os.Create(path); err == nil {
							runtime.GC()
							_ = pprof.WriteHeapProfile(f)
							f.Close()
						}
					}
				}
			}
		}
	}()
	return func() uint64 { close(done); return peak.Load() }
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// cpuNow is the process's user and system CPU time so far.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

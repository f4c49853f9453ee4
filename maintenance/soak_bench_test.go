package maintenance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/procstat"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

// soakSample is one memory sample of BenchmarkServeSoak, taken after a GC.
type soakSample struct {
	runs       int
	appends    int64
	rewritten  float64 // rewritten_bytes_total
	elapsed    time.Duration
	heapInuse  uint64
	heapAlloc  uint64
	heapObj    uint64
	sys        uint64
	rss        uint64 // VmRSS
	goroutines int
	fds        int
}

// BenchmarkServeSoak runs the `serve` loop (Scheduler over a Runner with
// memlock, an in-memory trigger store and metrics) over SOAK_TABLES generated
// tables of one SQLite catalog while a writer keeps appending to them, until
// SOAK_RUNS task runs succeeded. Every 100 runs it pauses the writer, waits
// for the scheduler to go idle and samples the heap after GC, goroutines and
// open fds, to show whether anything is retained between runs. At the end every table must hold
// exactly the rows appended to it (row count and gen checksum against a
// reference table built from the same appends).
//
//	SOAK_RUNS=1000 SOAK_TABLES=30 go test -run '^$' -bench ServeSoak -benchtime 1x -timeout 0 ./maintenance/
//
// Optional: SOAK_DIR (a new directory for the catalog and warehouse;
// default a temp dir), SOAK_WRITE_PAUSE_MS (pause between two writer commits, default 10),
// SOAK_MANUAL_EVERY (a manual "http" request every N writer commits,
// default 20), SOAK_MIN_FILE_SIZE (compaction min_file_size in bytes,
// default 64 KiB; 0 = derived from the target, which makes every compaction
// rewrite the whole table), SOAK_LOG (slog level, default error),
// SOAK_PROFILE_DIR (heap profiles at the first sample and at the end, for
// `go tool pprof -base`; goroutine dumps of samples with more goroutines
// than the first).
func BenchmarkServeSoak(b *testing.B) {
	runsWanted := soakEnvInt(b, "SOAK_RUNS", 0)
	if runsWanted <= 0 {
		b.Skip("set SOAK_RUNS (e.g. SOAK_RUNS=1000 SOAK_TABLES=30) to run the serve soak")
	}
	nTables := soakEnvInt(b, "SOAK_TABLES", 30)
	writePause := time.Duration(soakEnvInt(b, "SOAK_WRITE_PAUSE_MS", 10)) * time.Millisecond
	manualEvery := soakEnvInt(b, "SOAK_MANUAL_EVERY", 20)
	profDir := os.Getenv("SOAK_PROFILE_DIR")
	dir := os.Getenv("SOAK_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	const (
		initialAppends = 4
		rowsPerAppend  = 200
		sampleEvery    = 100
	)

	ctx := context.Background()
	cat, err := gen.OpenSQLiteCatalog(ctx, "soak", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()

	// Same Seed for every table: append i has the same rows in every table,
	// so one reference table gives every table's expected checksum.
	opts := make([]gen.Options, nTables)
	names := make([]string, nTables)
	appended := make([]int, nTables) // appends done so far (indexes 0..n-1); only the writer touches it
	for i := range opts {
		opts[i] = gen.Options{Namespace: "soak", Table: fmt.Sprintf("t%03d", i), Appends: initialAppends,
			RowsPerAppend: rowsPerAppend, Partitions: 1, Seed: 11, Workers: 1}
		names[i] = strings.Join(opts[i].Identifier(), ".")
		if _, err := gen.Create(ctx, cat, opts[i]); err != nil {
			b.Fatal(err)
		}
		appended[i] = initialAppends
	}

	ex := expire.DefaultConfig()
	ex.RetainLast, ex.MaxSnapshotAge = 3, time.Millisecond
	or := orphans.DefaultConfig()
	or.Enabled = false
	cp := compact.DefaultConfig()
	cp.MinInputFiles = 2
	// With the default sizes (512 MiB target, files under 384 MiB are
	// candidates) every compaction of these tiny one-partition tables
	// rewrites the whole table, so the work of a run grows with the table
	// and swamps any retention. A small MinFileSize leaves the compacted
	// files alone: each run rewrites only the latest appends.
	cp.MinFileSize = int64(soakEnvInt(b, "SOAK_MIN_FILE_SIZE", 64<<10))
	pol := Policy{Compact: cp, Expire: ex, Orphans: or, Triggers: map[string]trigger.Config{
		TaskCompact: {CommitCount: 3},
		TaskExpire:  {CommitCount: 3},
	}}
	for _, err := range []error{cp.Validate(), ex.Validate(), or.Validate()} {
		if err != nil {
			b.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	// Errors (failed tasks, failed polls) go to stderr; SOAK_LOG=warn
	// (commit conflicts with the writer), info or debug shows more.
	level := slog.LevelError
	if v := os.Getenv("SOAK_LOG"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			b.Fatalf("SOAK_LOG=%q: %v", v, err)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	r := NewRunner(Deps{
		Catalog:  cat,
		Policy:   func(string, iceberg.Properties) (Policy, error) { return pol, nil },
		Selected: func(string) bool { return true },
		Locker:   memlock.New(),
		LockTTL:  30 * time.Second,
		State:    trigger.NewMemStore(),
		Metrics:  NewMetrics(reg, metrics.NewTables(true, 100)),
		Logger:   log,
	})
	sc := DefaultSchedulerConfig()
	sc.PollInterval, sc.MaxConcurrentTables, sc.HealthInterval = 50*time.Millisecond, 2, 5*time.Second
	sched, err := NewScheduler(sc, SchedulerDeps{Runner: r, Metrics: r.metrics, Logger: log})
	if err != nil {
		b.Fatal(err)
	}

	runtime.GC()
	goroutinesStart, fdsStart := runtime.NumGoroutine(), soakFDs()
	b.ResetTimer()
	start := time.Now()

	runCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	schedDone := make(chan error, 1)
	go func() { schedDone <- sched.Run(runCtx) }()

	// The writer: one commit at a time, round-robin, each on a fresh load.
	// gate pauses it while a sample is taken.
	writeCtx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	var (
		commits, manual, manualDup, writeErrs atomic.Int64
		writerDone                            = make(chan struct{})
		gate                                  sync.Mutex
		writerMu                              sync.Mutex
		writerErr                             error
	)
	setWriteErr := func(err error) {
		writeErrs.Add(1)
		writerMu.Lock()
		writerErr = err
		writerMu.Unlock()
	}
	lastWriteErr := func() error {
		writerMu.Lock()
		defer writerMu.Unlock()
		return writerErr
	}
	step := func(i int) bool {
		gate.Lock()
		defer gate.Unlock()
		if writeCtx.Err() != nil {
			return false
		}
		tbl, err := cat.LoadTable(writeCtx, opts[i].Identifier())
		if err == nil {
			_, err = gen.Append(writeCtx, tbl, opts[i], 1, appended[i])
		}
		if err != nil {
			if writeCtx.Err() == nil {
				setWriteErr(fmt.Errorf("append %d to %s: %w", appended[i], names[i], err))
			} // else the commit may or may not have happened: settled below
			return false
		}
		appended[i]++
		c := commits.Add(1)
		if manualEvery > 0 && c%int64(manualEvery) == 0 {
			j := (i + nTables/2) % nTables
			res, err := sched.Enqueue(writeCtx, TableRequest{Table: names[j], Tasks: []string{TaskCompact, TaskExpire},
				Reason: "soak manual request", Source: "http"})
			switch {
			case err == nil:
				manual.Add(1)
				if res.Duplicate {
					manualDup.Add(1)
				}
			case errors.Is(err, ErrUnknownTable), errors.Is(err, ErrStopping):
			default:
				setWriteErr(fmt.Errorf("enqueue %s: %w", names[j], err))
			}
		}
		return true
	}
	go func() {
		defer close(writerDone)
		for n := 0; step(n % nTables); n++ {
			select {
			case <-writeCtx.Done():
				return
			case <-time.After(writePause):
			}
		}
	}()

	// sample measures what is retained between runs: with the writer paused
	// (by the caller) it waits until the scheduler is idle (nothing queued
	// or running over several polls), collects garbage and reads the heap.
	var (
		samples []soakSample
		paused  time.Duration
	)
	sample := func() soakSample {
		t0 := time.Now()
		for idle, deadline := 0, time.Now().Add(2*time.Minute); idle < 4; {
			st := sched.Status()
			if len(st.Queue) == 0 && len(st.Running) == 0 {
				idle++
			} else {
				idle = 0
			}
			if time.Now().After(deadline) {
				b.Fatalf("scheduler not idle 2 minutes after the writer paused: %d queued, %d running",
					len(st.Queue), len(st.Running))
			}
			time.Sleep(sc.PollInterval)
		}
		// A poll may be measuring tables' health right now: keep the
		// lowest of a few readings spread over more than a poll interval.
		var ms runtime.MemStats
		ngo := 0
		for k := range 8 {
			if k > 0 {
				time.Sleep(sc.PollInterval / 2)
			}
			runtime.GC()
			runtime.GC() // what finalizers of the first cycle freed
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if k == 0 || m.HeapAlloc < ms.HeapAlloc {
				ms, ngo = m, runtime.NumGoroutine()
			}
		}
		s := soakSample{runs: int(soakRuns(b, reg)[ResultSuccess]), appends: commits.Load(),
			rewritten: soakCounter(b, reg, "rewritten_bytes_total"), elapsed: time.Since(start),
			heapInuse: ms.HeapInuse, heapAlloc: ms.HeapAlloc, heapObj: ms.HeapObjects, sys: ms.Sys,
			rss: soakProcStatus("VmRSS"), goroutines: ngo, fds: soakFDs()}
		if profDir != "" && len(samples) > 0 && s.goroutines > samples[0].goroutines {
			if f, err := os.Create(filepath.Join(profDir, fmt.Sprintf("goroutines-%d.txt", s.runs))); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(f, 1)
				f.Close()
			}
		}
		samples = append(samples, s)
		paused += time.Since(t0)
		fmt.Fprintf(os.Stderr, "soak: runs %5d  appends %5d  heap_inuse %6.1f MiB  heap_alloc %6.1f MiB  rss %6.1f MiB  goroutines %3d  fds %3d  (%s)\n",
			s.runs, s.appends, mib(s.heapInuse), mib(s.heapAlloc), mib(s.rss), s.goroutines, s.fds,
			s.elapsed.Round(time.Second))
		return s
	}
	writeProfile := func(name string) {
		if profDir == "" {
			return
		}
		f, err := os.Create(filepath.Join(profDir, name))
		if err != nil {
			b.Error(err)
			return
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil { // right after sample's GC
			b.Error(err)
		}
	}

	// Wait for the runs, sampling every 100.
	next, lastRuns, lastProgress := sampleEvery, 0, time.Now()
	for {
		time.Sleep(20 * time.Millisecond)
		res := soakRuns(b, reg)
		runs := int(res[ResultSuccess])
		if runs > lastRuns {
			lastRuns, lastProgress = runs, time.Now()
		}
		if runs >= runsWanted {
			break
		}
		if runs >= next {
			gate.Lock()
			sample()
			if next == sampleEvery {
				writeProfile("heap-first.pb.gz")
			}
			gate.Unlock()
			for next <= runs {
				next += sampleEvery
			}
		}
		if time.Since(lastProgress) > 3*time.Minute {
			b.Fatalf("no successful run for 3 minutes (at %d runs; results %v; writer: %v)", runs, res, lastWriteErr())
		}
		select {
		case <-writerDone:
			b.Fatalf("writer stopped: %v", lastWriteErr())
		default:
		}
	}
	elapsed := time.Since(start) - paused
	runsAtStop := lastRuns
	// Stop writing between two commits, let the scheduler finish what is
	// due, take the last sample while it still runs (idle), then stop it.
	gate.Lock()
	stopWriter()
	gate.Unlock()
	<-writerDone
	final := sample()
	writeProfile("heap-end.pb.gz")
	b.StopTimer()

	// Run must return (every lease released).
	stopSched()
	select {
	case err := <-schedDone:
		if err != nil {
			b.Errorf("Run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		b.Fatal("Run did not return within 2 minutes of cancellation")
	}
	res := soakRuns(b, reg)
	st := sched.Status()
	if len(st.Running) != 0 || len(st.Queue) != 0 || !st.Stopping {
		b.Errorf("status after Run returned: %d running, %d queued, stopping=%v", len(st.Running), len(st.Queue), st.Stopping)
	}
	for _, rr := range st.Recent {
		if rr.Status == StatusFailed {
			b.Logf("recent failure: %s %s: %s", rr.Table, rr.Task, rr.Error)
		}
	}
	// Let stopped goroutines (lease extenders, writer workers, timers) exit.
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	goroutinesEnd, fdsEnd := runtime.NumGoroutine(), soakFDs()
	if goroutinesEnd > goroutinesStart+2 {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		b.Errorf("goroutines: %d at start, %d at the end:\n%s", goroutinesStart, goroutinesEnd, buf.String())
	}

	// No row lost or duplicated across all those compactions.
	// The writer stopped between commits, so appended is exact.
	want := soakReference(b, dir, opts[0], appended)
	var rowsTotal int64
	for i := range opts {
		tbl, err := cat.LoadTable(ctx, opts[i].Identifier())
		if err != nil {
			b.Fatal(err)
		}
		rows, sum, err := gen.Checksum(ctx, tbl)
		if err != nil {
			b.Fatal(err)
		}
		rowsTotal += rows
		w := want[appended[i]]
		if rows != int64(appended[i]*rowsPerAppend) || sum != w {
			b.Errorf("%s: %d rows, checksum %x; want %d rows (%d appends), checksum %x",
				names[i], rows, sum, appended[i]*rowsPerAppend, appended[i], w)
		}
	}

	first := final
	if len(samples) > 1 {
		first = samples[0]
	}
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "%6s %7s %8s %9s %9s %9s %8s %8s %5s %4s %10s\n", "runs", "appends", "elapsed", "inuseMiB",
		"allocMiB", "objects", "sysMiB", "rssMiB", "gorou", "fds", "rwKiB/run")
	prev := soakSample{}
	for _, s := range samples {
		// Compaction input per successful run since the previous sample.
		perRun := 0.0
		if d := s.runs - prev.runs; d > 0 {
			perRun = (s.rewritten - prev.rewritten) / 1024 / float64(d)
		}
		fmt.Fprintf(&tbl, "%6d %7d %8s %9.1f %9.1f %9d %8.1f %8.1f %5d %4d %10.1f\n", s.runs, s.appends,
			s.elapsed.Round(100*time.Millisecond), mib(s.heapInuse), mib(s.heapAlloc), s.heapObj, mib(s.sys),
			mib(s.rss), s.goroutines, s.fds, perRun)
		prev = s
	}
	// Benchmark logs are cut at 10 lines without -v: the table goes to
	// stderr too.
	fmt.Fprintf(os.Stderr, "soak samples (idle scheduler, writer paused, after GC):\n%s", tbl.String())
	b.Logf("serve soak: %d tables, %d successful task runs (%d when the writer stopped) in %s excluding sampling pauses; "+
		"%d writer commits, %d manual requests (%d merged); runs_total by result %v; %d rows checked (count and checksum)",
		nTables, final.runs, runsAtStop, elapsed.Round(time.Millisecond), commits.Load(), manual.Load(), manualDup.Load(),
		res, rowsTotal)
	if writeErrs.Load() > 0 {
		b.Errorf("writer: %d errors (last: %v)", writeErrs.Load(), lastWriteErr())
	}
	if f := res[ResultFailure]; f > 0 {
		b.Logf("%v failed task runs (see recent failures above)", f)
	}

	b.ReportMetric(float64(final.runs), "runs")
	b.ReportMetric(float64(runsAtStop)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(res[ResultFailure], "failed-runs")
	b.ReportMetric(float64(commits.Load()), "appends")
	b.ReportMetric(mib(first.heapInuse), "heap-first100-MiB")
	b.ReportMetric(mib(final.heapInuse), "heap-end-MiB")
	b.ReportMetric(mib(final.heapInuse)-mib(first.heapInuse), "heap-growth-MiB")
	b.ReportMetric(mib(soakProcStatus("VmHWM")), "peak-rss-MiB")
	b.ReportMetric(float64(goroutinesStart), "goroutines-start")
	b.ReportMetric(float64(goroutinesEnd), "goroutines-end")
	b.ReportMetric(float64(fdsStart), "fds-start")
	b.ReportMetric(float64(fdsEnd), "fds-end")
}

// soakReference returns, for every append count in counts, the checksum of
// a table made of appends 0..n-1 of opt: one reference table in a catalog of
// its own, appended to up to the largest count.
func soakReference(b *testing.B, dir string, opt gen.Options, counts []int) map[int]uint64 {
	b.Helper()
	ctx := context.Background()
	cat, err := gen.OpenSQLiteCatalog(ctx, "ref", filepath.Join(dir, "ref.db"), filepath.Join(dir, "ref-warehouse"))
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	opt.Namespace, opt.Table, opt.Appends = "ref", fmt.Sprintf("ref%d", time.Now().UnixNano()), 0
	tbl, err := gen.Create(ctx, cat, opt)
	if err != nil {
		b.Fatal(err)
	}
	want := slices.Compact(slices.Sorted(slices.Values(counts)))
	out := map[int]uint64{}
	done := 0
	for _, n := range want {
		if tbl, err = gen.Append(ctx, tbl, opt, n-done, done); err != nil {
			b.Fatal(err)
		}
		done = n
		if _, out[n], err = gen.Checksum(ctx, tbl); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// soakRuns sums runs_total by result.
func soakRuns(b *testing.B, g prometheus.Gatherer) map[string]float64 {
	b.Helper()
	mfs, err := g.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != metrics.Namespace+"_runs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == metrics.LabelResult {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// soakCounter sums every series of a counter of this package's namespace.
func soakCounter(b *testing.B, g prometheus.Gatherer, name string) float64 {
	b.Helper()
	mfs, err := g.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == metrics.Namespace+"_"+name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func soakEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// soakFDs counts the open file descriptors of the process (-1 without /proc).
func soakFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// soakProcStatus returns a "kB" field of /proc/self/status in bytes.
func soakProcStatus(field string) uint64 {
	n, _ := procstat.Bytes(procstat.Self, field)
	return n
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

package compact

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

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/procstat"
)

// BenchmarkPartitionRSS measures what one `maintainer run --task compact`
// costs on a table whose one partition holds BENCH_FILES (a comma list,
// default 10000,20000,40000,80000) files of ~21 KB: wall time, CPU seconds and
// the peak resident set of the binary, each run a process of its own.
// BENCH_BINARIES names the binaries (name=path,name=path); several are run
// in alternating order round after round (BENCH_ROUNDS, default 3), so that
// a busy spell of a shared machine falls on each alike. The tables are
// generated once into BENCH_DIR (kept for later runs); before every run
// the catalog is restored, which points at the table's original metadata
// (the metadata names the files where they were generated, so a run writes
// beside them: the files a run added are removed after it). After each run
// the table's record total must be unchanged.
// BENCH_GROUPS sets max_concurrent_groups (default 2), BENCH_COMPACT more
// keys of the compact block (partial_progress=true,max_file_group_input_files=10000).
// A partition of at most groupBytesPerTarget targets' worth (10,000 and
// 20,000 files here) is one group, a larger one max_concurrent_groups groups
// written at once, each writer holding a row group of pages until it is
// written: BENCH_GROUPS=1 compares the sizes at one writer.
//
//	go test -c -o /tmp/compact.test ./maintenance/compact/
//	BENCH_DIR=/tmp/rss BENCH_BINARIES=before=/tmp/before,after=/tmp/after \
//	  /tmp/compact.test -test.run '^$' -test.bench PartitionRSS -test.benchtime 1x
func BenchmarkPartitionRSS(b *testing.B) {
	dir, bins := os.Getenv("BENCH_DIR"), os.Getenv("BENCH_BINARIES")
	if dir == "" || bins == "" {
		b.Skip("set BENCH_DIR and BENCH_BINARIES")
	}
	var names, paths []string
	for _, nb := range strings.Split(bins, ",") {
		n, p, _ := strings.Cut(nb, "=")
		names, paths = append(names, n), append(paths, p)
	}
	sizes := []int{10000, 20000, 40000, 80000}
	if v := os.Getenv("BENCH_FILES"); v != "" {
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(s)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	rounds := envInt("BENCH_ROUNDS", 3)
	groups := envInt("BENCH_GROUPS", 2)
	// BENCH_COMPACT=key=value,... adds keys to the compact block.
	var extra string
	if v := os.Getenv("BENCH_COMPACT"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			extra += fmt.Sprintf("    %s: %s\n", k, val)
		}
	}
	for _, n := range sizes {
		orig := filepath.Join(dir, fmt.Sprintf("p%d.orig", n))
		if _, err := os.Stat(orig); err != nil {
			if err := onePartitionTable(orig, n); err != nil {
				b.Fatal(err)
			}
		}
		pristine, err := filesUnder(orig)
		if err != nil {
			b.Fatal(err)
		}
		for round := range rounds {
			for i := range names {
				k := (i + round) % len(names)
				m, err := runMaintainer(orig, filepath.Join(dir, fmt.Sprintf("p%d", n)), paths[k], groups, extra)
				if rerr := removeAdded(orig, pristine); err == nil {
					err = rerr
				}
				if err != nil {
					b.Fatalf("%s on %d files: %v", names[k], n, err)
				}
				fmt.Printf("files=%d round=%d binary=%s wall_s=%.1f cpu_s=%.1f peak_rss_mib=%.0f rows=%d unchanged\n",
					n, round+1, names[k], m.wall.Seconds(), m.cpu.Seconds(), float64(m.rss)/(1<<20), m.rows)
			}
		}
	}
}

type rssRun struct {
	wall, cpu time.Duration
	rss       uint64
	rows      int64
}

// runMaintainer restores the table of orig into work and compacts it with
// the maintainer binary bin.
func runMaintainer(orig, work, bin string, groups int, extra string) (rssRun, error) {
	if err := os.RemoveAll(work); err != nil {
		return rssRun{}, err
	}
	// Data and metadata files are never written in place: links do. The
	// catalog database is.
	if out, err := exec.Command("cp", "-al", orig, work).CombinedOutput(); err != nil {
		return rssRun{}, fmt.Errorf("restore: %v: %s", err, out)
	}
	db := filepath.Join(work, "catalog.db")
	if err := os.Remove(db); err != nil {
		return rssRun{}, err
	}
	if out, err := exec.Command("cp", filepath.Join(orig, "catalog.db"), db).CombinedOutput(); err != nil {
		return rssRun{}, fmt.Errorf("restore catalog: %v: %s", err, out)
	}
	cfg := fmt.Sprintf(`catalog:
  name: default
  type: sql
  uri: "file:%[1]s/catalog.db"
  warehouse: "file://%[1]s/warehouse"
  properties:
    sql.driver: sqliteshim
    sql.dialect: sqlite
lock:
  backend: local
defaults:
  compact:
    enabled: true
    target_file_size: 128MiB
    max_concurrent_groups: %[2]d
%[3]s`, work, groups, extra)
	cfgPath := filepath.Join(work, "maintainer.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return rssRun{}, err
	}
	before, err := totalRecords(work)
	if err != nil {
		return rssRun{}, err
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath, "--task", "compact", "--force", "--log-level", "warn")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return rssRun{}, err
	}
	done := make(chan struct{})
	peak := make(chan uint64, 1)
	go func() { peak <- procstat.WatchPeak(cmd.Process.Pid, done) }()
	err = cmd.Wait()
	m := rssRun{wall: time.Since(start)}
	close(done)
	m.rss = <-peak
	if err != nil {
		return m, fmt.Errorf("%w: %s", err, out.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	after, err := totalRecords(work)
	if err != nil {
		return m, err
	}
	if after != before {
		return m, fmt.Errorf("records %d before, %d after: %s", before, after, out.String())
	}
	m.rows = after
	return m, nil
}

func totalRecords(dir string) (int64, error) {
	ctx := context.Background()
	cat, err := gen.OpenSQLiteCatalog(ctx, "default", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err != nil {
		return 0, err
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{gen.DefaultNamespace, gen.DefaultTable})
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(tbl.CurrentSnapshot().Summary.Properties["total-records"], 10, 64)
}

// onePartitionTable writes, into dir, a table of one day partition holding
// n files of ~21 KB: a few hundred generated appends, whose files are then
// linked under new names and added in commits of up to 5,000 files (n
// single-file commits would take hours to generate).
func onePartitionTable(dir string, n int) error {
	ctx := context.Background()
	distinct := min(n, 200)
	opt := gen.Options{Appends: distinct, RowsPerAppend: 150, Partitions: 1, Seed: 1}
	cat, err := gen.OpenSQLiteCatalog(ctx, "default", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err != nil {
		return err
	}
	defer cat.Close()
	tbl, err := gen.Create(ctx, cat, opt)
	if err != nil {
		return err
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return err
	}
	spec := tbl.Spec()
	var batch []iceberg.DataFile
	for i := distinct; i < n; i++ {
		src := tasks[i%distinct].File
		srcPath := strings.TrimPrefix(src.FilePath(), "file://")
		dst := strings.TrimSuffix(srcPath, ".parquet") + fmt.Sprintf("-copy%d.parquet", i)
		if err := os.Link(srcPath, dst); err != nil {
			return err
		}
		bld, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, "file://"+dst, iceberg.ParquetFile,
			src.Partition(), map[int]string{spec.Field(0).FieldID: "date"}, nil, src.Count(), src.FileSizeBytes())
		if err != nil {
			return err
		}
		bld.ColumnSizes(src.ColumnSizes()).ValueCounts(src.ValueCounts()).NullValueCounts(src.NullValueCounts()).
			LowerBoundValues(src.LowerBoundValues()).UpperBoundValues(src.UpperBoundValues()).SplitOffsets(src.SplitOffsets())
		batch = append(batch, bld.Build())
		if len(batch) == 5000 || i == n-1 {
			txn := tbl.NewTransaction()
			if err := txn.AddDataFiles(ctx, batch, nil); err != nil {
				return err
			}
			if tbl, err = txn.Commit(ctx); err != nil {
				return err
			}
			batch = nil
		}
	}
	return nil
}

func filesUnder(dir string) (map[string]bool, error) {
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out[p] = true
		}
		return err
	})
	return out, err
}

// removeAdded removes the files under dir that are not in pristine.
func removeAdded(dir string, pristine map[string]bool) error {
	now, err := filesUnder(dir)
	if err != nil {
		return err
	}
	for p := range now {
		if !pristine[p] {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Command compactbench measures compaction throughput, CPU time and peak
// memory of the maintainer side by side with iceberg-go's own CLI
// (`iceberg compact run`) on two identical generated tables of single-file
// appends (issue 2's benchmark). Both tools run as separate processes, so
// their peak RSS is their own; each result is checked row for row.
//
//	go run ./internal/bench/compactbench                      # 1,000 appends over 10 days
//	go run ./internal/bench/compactbench -appends 200 -rows 1000   # quick
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/procstat"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compactbench:", err)
		os.Exit(1)
	}
}

type measure struct {
	tool       string
	wall, cpu  time.Duration
	maxRSS     int64 // bytes
	filesAfter int
	rowsOK     bool
}

func run() error {
	appends := flag.Int("appends", 1000, "single-file appends")
	rows := flag.Int("rows", 2000, "rows per append")
	parts := flag.Int("partitions", 10, "day partitions")
	target := flag.String("target", "128MiB", "target file size")
	dir := flag.String("dir", "", "work folder (default: a temporary one, removed after)")
	groups := flag.Int("max-concurrent-groups", 2, "maintainer max_concurrent_groups")
	skipCLI := flag.Bool("skip-cli", false, "measure the maintainer only")
	rounds := flag.Int("rounds", 3, "rounds of both tools, alternating which goes first; medians are reported")
	mEnv := flag.String("maintainer-env", "", "extra environment of the maintainer process, e.g. GOMEMLIMIT=350MiB")
	flag.Parse()
	ctx := context.Background()

	targetBytes, err := config.ParseSize(*target)
	if err != nil {
		return err
	}
	work := *dir
	if work == "" {
		if work, err = os.MkdirTemp("", "compactbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	bin := filepath.Join(work, "bin")
	maintainer, cli := filepath.Join(bin, "maintainer"), filepath.Join(bin, "iceberg")
	if err := build(ctx, "", maintainer, "./cmd/maintainer"); err != nil {
		return err
	}
	if !*skipCLI {
		modDir, err := goOut(ctx, "list", "-m", "-f", "{{.Dir}}", "github.com/apache/iceberg-go")
		if err != nil {
			return err
		}
		if err := build(ctx, modDir, cli, "./cmd/iceberg"); err != nil {
			return err
		}
	}

	opt := gen.Options{Appends: *appends, RowsPerAppend: *rows, Partitions: *parts, Seed: 1}
	tables := map[string]string{"maintainer": filepath.Join(work, "a")}
	if !*skipCLI {
		tables["iceberg-go CLI"] = filepath.Join(work, "b")
	}
	var want tableStats
	for _, d := range tables {
		start := time.Now()
		generated, err := prepare(ctx, d, opt)
		if err != nil {
			return err
		}
		if want, err = measureTable(ctx, d); err != nil {
			return err
		}
		if generated {
			fmt.Fprintf(os.Stderr, "generated %s: %d files, %.1f MB, %d rows in %s\n", d, *appends,
				float64(want.bytes)/1e6, want.rows, time.Since(start).Round(time.Second))
		}
	}

	var env []string
	if *mEnv != "" {
		env = strings.Fields(*mEnv)
	}
	runs := map[string]func() (measure, error){
		"maintainer": func() (measure, error) {
			a := tables["maintainer"]
			cfgPath := filepath.Join(a, "maintainer.yaml")
			const block = "  compact:\n    enabled: true\n"
			cfg := strings.ReplaceAll(string(config.DefaultYAML()), "${DEMO_DIR}", a)
			if !strings.Contains(cfg, block) {
				return measure{}, fmt.Errorf("the embedded default config has no %q block to extend", block)
			}
			cfg = strings.Replace(cfg, block, block+fmt.Sprintf("    target_file_size: %d\n    max_concurrent_groups: %d\n", targetBytes, *groups), 1)
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
				return measure{}, err
			}
			return measureRun(ctx, "maintainer", env, maintainer, "run", "--config", cfgPath, "--task", "compact", "--log-level", "warn")
		},
		// iceberg-go's CLI on an identical table.
		"iceberg-go CLI": func() (measure, error) {
			b := tables["iceberg-go CLI"]
			return measureRun(ctx, "iceberg-go CLI", nil, cli, "--catalog", "sql", "--catalog-name", "default",
				"--uri", "file:"+filepath.Join(b, "catalog.db"), "--warehouse", gen.FileURI(filepath.Join(b, "warehouse")),
				"--sql-driver", "sqliteshim", "--sql-dialect", "sqlite",
				"compact", "run", "demo.events", "--target-file-size", fmt.Sprint(targetBytes))
		},
	}
	order := []string{"maintainer", "iceberg-go CLI"}
	if *skipCLI {
		order = order[:1]
	}
	// Rounds alternate which tool goes first, so that a slow spell of a
	// shared machine does not always fall on the same one.
	results := map[string][]measure{}
	for round := range *rounds {
		for i := range order {
			tool := order[(i+round)%len(order)]
			if round > 0 {
				if _, err := prepare(ctx, tables[tool], opt); err != nil {
					return err
				}
			}
			m, err := runs[tool]()
			if err != nil {
				return err
			}
			// Check every result row for row.
			st, err := measureTable(ctx, tables[tool])
			if err != nil {
				return err
			}
			m.rowsOK = st.rows == want.rows && st.sum == want.sum
			m.filesAfter = st.files
			results[tool] = append(results[tool], m)
			if !m.rowsOK {
				return fmt.Errorf("%s changed the rows", tool)
			}
		}
	}

	if *mEnv != "" {
		fmt.Printf("maintainer environment: %s\n", *mEnv)
	}
	fmt.Printf("input: %d single-file appends, %d day partitions, %.1f MB of zstd Parquet, %d rows; target %s; %d rounds\n",
		*appends, *parts, float64(want.bytes)/1e6, want.rows, *target, *rounds)
	fmt.Printf("%-16s %5s %8s %8s %8s %10s %11s %s\n", "tool", "round", "wall s", "MB/s", "CPU s", "peak MiB", "files after", "rows")
	for _, tool := range order {
		for i, r := range results[tool] {
			fmt.Printf("%-16s %5d %8.2f %8.1f %8.2f %10.0f %11d unchanged\n", tool, i+1, r.wall.Seconds(),
				float64(want.bytes)/1e6/r.wall.Seconds(), r.cpu.Seconds(), float64(r.maxRSS)/(1<<20), r.filesAfter)
		}
	}
	fmt.Println("medians:")
	med := map[string]measure{}
	for _, tool := range order {
		m := median(results[tool])
		med[tool] = m
		fmt.Printf("%-16s %5s %8.2f %8.1f %8.2f %10.0f\n", tool, "", m.wall.Seconds(),
			float64(want.bytes)/1e6/m.wall.Seconds(), m.cpu.Seconds(), float64(m.maxRSS)/(1<<20))
	}
	if len(order) == 2 {
		fmt.Printf("throughput ratio maintainer / CLI (medians): %.2f; per round:", med[order[1]].wall.Seconds()/med[order[0]].wall.Seconds())
		for i := range results[order[0]] {
			fmt.Printf(" %.2f", results[order[1]][i].wall.Seconds()/results[order[0]][i].wall.Seconds())
		}
		fmt.Println()
	}
	return nil
}

// prepare restores table folder d from its pristine copy d.orig, or
// generates it and keeps such a copy, for later rounds and runs. It reports
// whether it generated the table.
func prepare(ctx context.Context, d string, opt gen.Options) (bool, error) {
	if _, err := os.Stat(d + ".orig"); err == nil {
		if err := os.RemoveAll(d); err != nil {
			return false, err
		}
		if out, err := exec.CommandContext(ctx, "cp", "-a", d+".orig", d).CombinedOutput(); err != nil {
			return false, fmt.Errorf("restore %s: %w: %s", d, err, out)
		}
		return false, nil
	}
	cat, err := gen.OpenSQLiteCatalog(ctx, "default", filepath.Join(d, "catalog.db"), filepath.Join(d, "warehouse"))
	if err != nil {
		return false, err
	}
	_, err = gen.Create(ctx, cat, opt)
	cat.Close()
	if err != nil {
		return false, err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", d, d+".orig").CombinedOutput(); err != nil {
		return false, fmt.Errorf("keep a copy of %s: %w: %s", d, err, out)
	}
	return true, nil
}

type tableStats struct {
	bytes, rows int64
	files       int
	sum         uint64
}

// measureTable returns the data files and bytes, the rows and the row
// checksum of the generated table in folder d.
func measureTable(ctx context.Context, d string) (tableStats, error) {
	cat, err := gen.OpenSQLiteCatalog(ctx, "default", filepath.Join(d, "catalog.db"), filepath.Join(d, "warehouse"))
	if err != nil {
		return tableStats{}, err
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{"demo", "events"})
	if err != nil {
		return tableStats{}, err
	}
	st := tableStats{bytes: dataBytes(ctx, tbl), files: dataFiles(ctx, tbl)}
	st.rows, st.sum, err = gen.Checksum(ctx, tbl)
	return st, err
}

// median returns the run of median wall time, with the median CPU time
// and peak memory of all runs.
func median(ms []measure) measure {
	mid := func(f func(measure) int64) int64 {
		v := make([]int64, len(ms))
		for i, m := range ms {
			v[i] = f(m)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return measure{
		wall:   time.Duration(mid(func(m measure) int64 { return int64(m.wall) })),
		cpu:    time.Duration(mid(func(m measure) int64 { return int64(m.cpu) })),
		maxRSS: mid(func(m measure) int64 { return m.maxRSS }),
	}
}

func measureRun(ctx context.Context, name string, env []string, path string, args ...string) (measure, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return measure{}, fmt.Errorf("%s: %w", name, err)
	}
	done := make(chan struct{})
	peak := make(chan int64, 1)
	go func() { peak <- int64(procstat.WatchPeak(cmd.Process.Pid, done)) }()
	err := cmd.Wait()
	wall := time.Since(start)
	close(done)
	hwm := <-peak
	if err != nil {
		return measure{}, fmt.Errorf("%s: %w\n%s", name, err, out.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return measure{tool: name, wall: wall, cpu: cpu, maxRSS: hwm}, nil
}

func build(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

func goOut(ctx context.Context, args ...string) (string, error) {
	b, err := exec.CommandContext(ctx, "go", args...).Output()
	return strings.TrimSpace(string(b)), err
}

func dataBytes(ctx context.Context, tbl *table.Table) (n int64) {
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return 0
	}
	for _, t := range tasks {
		n += t.File.FileSizeBytes()
	}
	return n
}

func dataFiles(ctx context.Context, tbl *table.Table) int {
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return -1
	}
	return len(tasks)
}

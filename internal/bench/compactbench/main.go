// Command compactbench measures compaction throughput, CPU time and peak
// memory of the maintainer side by side with iceberg-go's own CLI
// (`iceberg compact run`) and DuckDB (a `COPY ... TO` of each partition's
// files, through @duckdb/node-api) on identical generated tables. Every tool
// runs as a separate process, so its CPU time and peak RSS are its own;
// rounds interleave the tools, rotating which goes first, and every result
// is checked row for row.
//
//	go run ./internal/bench/compactbench                              # the 1,000-file table, 3 tools
//	go run ./internal/bench/compactbench -cases small10k,small40k,large
//	go run ./internal/bench/compactbench -cases all -dir /tmp/compactbench
//	go run ./internal/bench/compactbench -appends 200 -rows 1000       # a table of your own
//
// DuckDB needs node and npm: the bench installs @duckdb/node-api into the
// repository's .cache/duckdb-node on first use (-tools maintainer,cli
// leaves it out).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // the flag set printed the usage
		}
		fmt.Fprintln(os.Stderr, "compactbench:", err)
		os.Exit(1)
	}
}

// A benchCase is one generated table.
type benchCase struct {
	name string
	opt  gen.Options
	what string
}

// cases are the tables -cases names: the 1,000-file benchmark table (issue
// 2), one partition of 10,000 to 80,000 files of ~21 KB (issue 13), and
// one of 1,000 files of ~420 KB. The large tables commit 100 appends a
// snapshot: a commit each would take hours to generate.
var cases = []benchCase{
	{"table1000", gen.Options{Appends: 1000, RowsPerAppend: 2000, Partitions: 10}, "1,000 appends of ~220 KB over 10 days"},
	{"small10k", gen.Options{Appends: 10000, RowsPerAppend: 200, Partitions: 1, FilesPerCommit: 100}, "10,000 files of ~21 KB in one partition"},
	{"small20k", gen.Options{Appends: 20000, RowsPerAppend: 200, Partitions: 1, FilesPerCommit: 100}, "20,000 files of ~21 KB in one partition"},
	{"small40k", gen.Options{Appends: 40000, RowsPerAppend: 200, Partitions: 1, FilesPerCommit: 100}, "40,000 files of ~21 KB in one partition"},
	{"small80k", gen.Options{Appends: 80000, RowsPerAppend: 200, Partitions: 1, FilesPerCommit: 100}, "80,000 files of ~21 KB in one partition"},
	{"large", gen.Options{Appends: 1000, RowsPerAppend: 4000, Partitions: 1, FilesPerCommit: 100}, "1,000 files of ~420 KB in one partition"},
}

type measure struct {
	wall, cpu  time.Duration
	maxRSS     int64 // bytes
	filesAfter int
}

const (
	toolMaintainer = "maintainer"
	toolBefore     = "maintainer-before"
	toolCLI        = "iceberg-go CLI"
	toolDuckDB     = "DuckDB"
)

var toolNames = map[string]string{"maintainer": toolMaintainer, "cli": toolCLI, "duckdb": toolDuckDB}

func run(args []string) error {
	fs := flag.NewFlagSet("compactbench", flag.ContinueOnError)
	caseList := fs.String("cases", "table1000", "tables to measure, comma-separated: table1000, small10k, small20k, small40k, small80k, large, or all")
	appends := fs.Int("appends", 0, "a table of your own instead of -cases: single-file appends")
	rows := fs.Int("rows", 2000, "with -appends: rows per append")
	parts := fs.Int("partitions", 10, "with -appends: day partitions")
	perCommit := fs.Int("files-per-commit", 1, "with -appends: appends committed in one snapshot")
	target := fs.String("target", "128MiB", "target file size")
	dir := fs.String("dir", "", "work folder, keeping the generated tables for reruns (default: a temporary one, removed after)")
	groups := fs.Int("max-concurrent-groups", 2, "maintainer max_concurrent_groups")
	toolList := fs.String("tools", "maintainer,cli,duckdb", "tools to measure, comma-separated: maintainer, cli, duckdb")
	rounds := fs.Int("rounds", 3, "rounds of every tool, rotating which goes first; medians are reported (0: only generate the tables, with -dir)")
	mEnv := fs.String("maintainer-env", "", "extra environment of the maintainer process, e.g. GOMEMLIMIT=350MiB")
	before := fs.String("before-bin", "", "a maintainer binary built before a change, measured as one more tool (maintainer-before) on a table of its own")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 0 || *rounds == 0 && *dir == "" {
		return fmt.Errorf("-rounds %d: want 1 or more, or 0 with -dir to only generate the tables", *rounds)
	}
	ctx := context.Background()

	targetBytes, err := config.ParseSize(*target)
	if err != nil {
		return err
	}
	var selected []benchCase
	if *appends > 0 {
		selected = []benchCase{{name: "custom", opt: gen.Options{Appends: *appends, RowsPerAppend: *rows, Partitions: *parts, FilesPerCommit: *perCommit},
			what: fmt.Sprintf("%d appends of %d rows over %d partitions", *appends, *rows, *parts)}}
	} else {
		for _, name := range strings.Split(*caseList, ",") {
			i := slices.IndexFunc(cases, func(c benchCase) bool { return c.name == name })
			switch {
			case name == "all":
				selected = append(selected, cases...)
			case i < 0:
				return fmt.Errorf("-cases: no case %q", name)
			default:
				selected = append(selected, cases[i])
			}
		}
	}
	var tools []string
	for _, t := range strings.Split(*toolList, ",") {
		name, ok := toolNames[t]
		if !ok {
			return fmt.Errorf("-tools: no tool %q", t)
		}
		tools = append(tools, name)
	}
	if *before != "" {
		tools = append(tools, toolBefore)
	}

	work := *dir
	if work == "" {
		if work, err = os.MkdirTemp("", "compactbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	if work, err = filepath.Abs(work); err != nil {
		return err
	}
	b := &bench{ctx: ctx, target: targetBytes, groups: *groups, rounds: *rounds, tools: tools, before: *before}
	if *mEnv != "" {
		b.env = strings.Fields(*mEnv)
		fmt.Printf("maintainer environment: %s\n", *mEnv)
	}
	if b.rounds > 0 { // generating alone needs no tool
		if err := b.setup(filepath.Join(work, "bin")); err != nil {
			return err
		}
	}
	for _, c := range selected {
		c.opt.Seed = 1
		if err := b.runCase(filepath.Join(work, c.name), c); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

type bench struct {
	ctx                     context.Context
	target                  int64
	groups, rounds          int
	tools                   []string
	env                     []string // the maintainer's
	maintainer, cli, duckdb string   // binaries; duckdb is the node script
	before                  string   // the maintainer binary of -before-bin
}

func (b *bench) uses(tool string) bool { return slices.Contains(b.tools, tool) }

// setup builds the binaries and installs DuckDB's node package.
func (b *bench) setup(bin string) error {
	b.maintainer, b.cli = filepath.Join(bin, "maintainer"), filepath.Join(bin, "iceberg")
	if b.uses(toolMaintainer) {
		if err := build(b.ctx, "", b.maintainer, "./cmd/maintainer"); err != nil {
			return err
		}
	}
	if b.uses(toolCLI) {
		modDir, err := goOut(b.ctx, "list", "-m", "-f", "{{.Dir}}", "github.com/apache/iceberg-go")
		if err != nil {
			return err
		}
		if err := build(b.ctx, modDir, b.cli, "./cmd/iceberg"); err != nil {
			return err
		}
	}
	if b.uses(toolDuckDB) {
		root, err := goOut(b.ctx, "list", "-m", "-f", "{{.Dir}}")
		if err != nil {
			return err
		}
		if b.duckdb, err = installDuckDB(b.ctx, filepath.Join(root, ".cache", "duckdb-node")); err != nil {
			return err
		}
	}
	return nil
}

//go:embed duckdb.mjs
var duckdbScript []byte

// duckdbPackage is the version of @duckdb/node-api the figures are of.
const duckdbPackage = "@duckdb/node-api@1.5.6-r.1"

// installDuckDB installs @duckdb/node-api into folder dir (once) and writes
// the bench's script beside it; it returns the script's path.
func installDuckDB(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api", "package.json")); errors.Is(err, fs.ErrNotExist) {
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", dir, duckdbPackage)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("npm install %s into %s: %w\n%s", duckdbPackage, dir, err, out)
		}
	}
	script := filepath.Join(dir, "compact.mjs")
	return script, os.WriteFile(script, duckdbScript, 0o644)
}

func (b *bench) runCase(dir string, c benchCase) error {
	// Every tool rewrites the same table, restored from its pristine copy
	// before each run but the first; DuckDB reads the pristine copy and
	// commits nothing.
	d := filepath.Join(dir, "table")
	start := time.Now()
	generated, err := prepare(b.ctx, d, c.opt)
	if err != nil {
		return err
	}
	want, err := measureTable(b.ctx, d)
	if err != nil {
		return err
	}
	if generated {
		fmt.Fprintf(os.Stderr, "generated %s: %d files, %.1f MB, %d rows in %s\n", d, want.files,
			float64(want.bytes)/1e6, want.rows, time.Since(start).Round(time.Second))
	}
	if b.rounds == 0 {
		return nil
	}
	tables := map[string]string{toolMaintainer: d, toolBefore: d, toolCLI: d}
	var duckParts [][]string
	if b.uses(toolDuckDB) {
		// Listed before the maintainer compacts its table: the input files,
		// read from the pristine copy, which nothing changes.
		var err error
		if duckParts, err = partitionFiles(b.ctx, tables[toolMaintainer]); err != nil {
			return err
		}
	}
	runs := map[string]func(string) (measure, error){
		toolMaintainer: func(d string) (measure, error) { return b.runMaintainer(b.maintainer, d) },
		toolBefore:     func(d string) (measure, error) { return b.runMaintainer(b.before, d) },
		toolCLI:        b.runCLI,
		toolDuckDB:     func(string) (measure, error) { return b.runDuckDB(dir, duckParts, want) },
	}
	results := map[string][]measure{}
	fresh := true // the table has not been rewritten since it was prepared
	for round := range b.rounds {
		for i := range b.tools {
			tool := b.tools[(i+round)%len(b.tools)]
			d := tables[tool]
			if d != "" && !fresh {
				if _, err := prepare(b.ctx, d, c.opt); err != nil {
					return err
				}
			}
			fresh = fresh && d == ""
			m, err := runs[tool](d)
			if err != nil {
				return err
			}
			if d != "" {
				st, err := measureTable(b.ctx, d)
				if err != nil {
					return err
				}
				if st.rows != want.rows || st.sum != want.sum {
					return fmt.Errorf("%s changed the rows: %d rows, checksum %x; want %d, %x", tool, st.rows, st.sum, want.rows, want.sum)
				}
				m.filesAfter = st.files
			}
			results[tool] = append(results[tool], m)
		}
	}
	b.report(c, want, results)
	return nil
}

func (b *bench) report(c benchCase, want tableStats, results map[string][]measure) {
	mb := float64(want.bytes) / 1e6
	fmt.Printf("\n== %s: %s: %d files, %.1f MB of zstd Parquet (%.1f KB a file), %d rows; target %d MiB; max_concurrent_groups %d; %d rounds\n",
		c.name, c.what, want.files, mb, mb*1e3/float64(max(want.files, 1)), want.rows, b.target>>20, b.groups, b.rounds)
	fmt.Printf("%-18s %5s %8s %8s %8s %10s %11s %s\n", "tool", "round", "wall s", "MB/s", "CPU s", "peak MiB", "files after", "rows")
	for _, tool := range b.tools {
		for i, r := range results[tool] {
			fmt.Printf("%-18s %5d %8.2f %8.1f %8.2f %10.0f %11d unchanged\n", tool, i+1, r.wall.Seconds(),
				mb/r.wall.Seconds(), r.cpu.Seconds(), float64(r.maxRSS)/(1<<20), r.filesAfter)
		}
	}
	fmt.Println("medians:")
	med := map[string]measure{}
	for _, tool := range b.tools {
		m := median(results[tool])
		med[tool] = m
		fmt.Printf("%-18s %5s %8.2f %8.1f %8.2f %10.0f\n", tool, "", m.wall.Seconds(), mb/m.wall.Seconds(), m.cpu.Seconds(), float64(m.maxRSS)/(1<<20))
	}
	if !b.uses(toolMaintainer) {
		return
	}
	// Ratios of the same round: the tools ran one after the other, so a
	// slow spell of a shared machine weighs on both.
	for _, other := range b.tools {
		if other == toolMaintainer {
			continue
		}
		fmt.Printf("wall %s / maintainer (medians): %.2f; per round:", other, med[other].wall.Seconds()/med[toolMaintainer].wall.Seconds())
		for i := range results[toolMaintainer] {
			fmt.Printf(" %.2f", results[other][i].wall.Seconds()/results[toolMaintainer][i].wall.Seconds())
		}
		fmt.Println()
	}
}

func (b *bench) runMaintainer(bin, d string) (measure, error) {
	cfgPath := filepath.Join(d, "maintainer.yaml")
	const block = "  compact:\n    enabled: true\n"
	cfg := strings.ReplaceAll(string(config.DefaultYAML()), "${DEMO_DIR}", d)
	if !strings.Contains(cfg, block) {
		return measure{}, fmt.Errorf("the embedded default config has no %q block to extend", block)
	}
	cfg = strings.Replace(cfg, block, block+fmt.Sprintf("    target_file_size: %d\n    max_concurrent_groups: %d\n", b.target, b.groups), 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return measure{}, err
	}
	return measureRun(b.ctx, toolMaintainer, b.env, bin, "run", "--config", cfgPath, "--task", "compact", "--log-level", "warn")
}

// runCLI runs iceberg-go's CLI on the tool's copy of the table.
func (b *bench) runCLI(d string) (measure, error) {
	return measureRun(b.ctx, toolCLI, nil, b.cli, "--catalog", "sql", "--catalog-name", "default",
		"--uri", "file:"+filepath.Join(d, "catalog.db"), "--warehouse", gen.FileURI(filepath.Join(d, "warehouse")),
		"--sql-driver", "sqliteshim", "--sql-dialect", "sqlite",
		"compact", "run", "demo.events", "--target-file-size", fmt.Sprint(b.target))
}

// runDuckDB rewrites the files of each partition with DuckDB into a folder
// of its own under dir, checks the rows it wrote and removes them.
func (b *bench) runDuckDB(dir string, byPart [][]string, want tableStats) (measure, error) {
	out := filepath.Join(dir, "duckdb-out")
	if err := os.RemoveAll(out); err != nil {
		return measure{}, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return measure{}, err
	}
	type partition struct {
		Files []string `json:"files"`
		Out   string   `json:"out"`
	}
	var plan struct {
		Partitions []partition `json:"partitions"`
	}
	for i, files := range byPart {
		plan.Partitions = append(plan.Partitions, partition{Files: files, Out: filepath.Join(out, fmt.Sprint(i))})
	}
	raw, err := json.Marshal(plan)
	if err != nil {
		return measure{}, err
	}
	planPath := filepath.Join(dir, "duckdb-plan.json")
	if err := os.WriteFile(planPath, raw, 0o644); err != nil {
		return measure{}, err
	}
	var stdout strings.Builder
	m, err := measureRunOut(b.ctx, toolDuckDB, nil, &stdout, "node", b.duckdb, planPath)
	if err != nil {
		return m, err
	}
	var res struct{ Rows []int64 }
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		return m, fmt.Errorf("DuckDB's answer %q: %w", stdout.String(), err)
	}
	var rows int64
	for _, n := range res.Rows {
		rows += n
	}
	if rows != want.rows {
		return m, fmt.Errorf("DuckDB wrote %d rows of %d", rows, want.rows)
	}
	err = filepath.WalkDir(out, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			m.filesAfter++
		}
		return err
	})
	if err != nil {
		return m, err
	}
	return m, os.RemoveAll(out)
}

// partitionFiles lists the data files of the table in folder d, by
// partition, as paths into its pristine copy d.orig.
func partitionFiles(ctx context.Context, d string) ([][]string, error) {
	cat, err := gen.OpenSQLiteCatalog(ctx, "default", filepath.Join(d, "catalog.db"), filepath.Join(d, "warehouse"))
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{"demo", "events"})
	if err != nil {
		return nil, err
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	var out [][]string
	for _, t := range tasks {
		key := fmt.Sprint(t.File.Partition())
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, nil)
		}
		path := strings.TrimPrefix(t.File.FilePath(), "file://")
		rel, err := filepath.Rel(d, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("data file %s is not in the table's folder %s", path, d)
		}
		out[i] = append(out[i], filepath.Join(d+".orig", rel))
	}
	return out, nil
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
	if err := os.RemoveAll(d); err != nil {
		return false, err
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
	return measureRunOut(ctx, name, env, nil, path, args...)
}

// measureRunOut runs a tool's process and measures its wall time, CPU
// time (its own and its waited-for children's, as wait4 reports them) and
// peak RSS. Its standard output goes to stdout when not nil.
func measureRunOut(ctx context.Context, name string, env []string, stdout io.Writer, path string, args ...string) (measure, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdout != nil {
		cmd.Stdout = stdout
	}
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
	return measure{wall: wall, cpu: cpu, maxRSS: hwm}, nil
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

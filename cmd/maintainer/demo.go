package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/maintenance"
)

func newDemoCmd(ctx context.Context, g *globals) *cobra.Command {
	var dir string
	var appends, rows, partitions int
	cmd := &cobra.Command{
		Use:         "demo",
		Annotations: honours("output", "log-level"),
		Short:       "Build a local warehouse full of small files and maintain it (no config, no servers)",
		Args:        cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if appends < 1 || rows < 1 || partitions < 0 {
				return usageError{fmt.Errorf("--appends and --rows must be positive, --partitions not negative")}
			}
			return g.demo(ctx, dir, gen.Options{Appends: appends, RowsPerAppend: rows, Partitions: partitions, Seed: 42})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "folder for the warehouse (default: a new temporary folder)")
	cmd.Flags().IntVar(&appends, "appends", 300, "commits of the simulated streaming writer, one small file each")
	cmd.Flags().IntVar(&rows, "rows", 1000, "rows per commit")
	cmd.Flags().IntVar(&partitions, "partitions", 10, "day partitions the events fall in")
	return cmd
}

func (g *globals) demo(ctx context.Context, dir string, opt gen.Options) error {
	if g.output != "text" {
		return usageError{fmt.Errorf("demo is a report for people; it has no --output %s", g.output)}
	}
	w := g.stdout
	if dir == "" {
		d, err := os.MkdirTemp("", "maintainer-demo-")
		if err != nil {
			return fmt.Errorf("create demo folder: %w", err)
		}
		dir = d
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return usageError{fmt.Errorf("--dir %s is not empty; the demo builds a new warehouse", dir)}
	}
	dir, _ = filepath.Abs(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create demo folder: %w", err)
	}
	dbPath, whDir := filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")
	fmt.Fprintf(w, "maintainer demo: a local warehouse in %s\n(SQLite catalog, local files, in-process lock, trigger state in a file, no servers)\n\n", dir)

	// The demo's warehouse is the embedded default config's: write it out so
	// that the other commands can be pointed at it afterwards.
	cfgPath := filepath.Join(dir, "maintainer.yaml")
	cfgText := strings.ReplaceAll(string(config.DefaultYAML()), "${DEMO_DIR}", filepath.ToSlash(dir)) + demoOverride
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", cfgPath, err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return fmt.Errorf("load the demo's own config: %w", err)
	}
	cat, err := gen.OpenSQLiteCatalog(ctx, cfg.Catalog.Name, dbPath, whDir)
	if err != nil {
		return err
	}
	defer cat.Close()

	fmt.Fprintf(w, "1. A streaming writer commits %d times to demo.events, %d rows each, over %d day\n   partitions: one small file per commit, one snapshot per commit.\n",
		opt.Appends, opt.RowsPerAppend, opt.Partitions)
	start := time.Now()
	tbl, err := gen.Create(ctx, cat, opt)
	if err != nil {
		return fmt.Errorf("write the demo table: %w", err)
	}
	fmt.Fprintf(w, "   written in %s\n\n", time.Since(start).Round(100*time.Millisecond))
	if err := agePastExpiry(ctx, tbl); err != nil {
		return err
	}

	planted, err := plantOrphans(tbl.Location())
	if err != nil {
		return fmt.Errorf("plant the demo's orphan files: %w", err)
	}
	fmt.Fprintln(w, "   A crashed job also left files no snapshot references (orphans):")
	for _, p := range planted {
		fmt.Fprintf(w, "   - %s (%s)\n", p.rel, p.why)
	}
	fmt.Fprintln(w)

	svc, err := openServices(cfg, g.logger())
	if err != nil {
		return err
	}
	defer svc.close()
	runner := maintenance.NewRunner(maintenance.Deps{
		Catalog:  cat,
		Policy:   policyFunc(cfg, g.logger()),
		Selected: cfg.Managed,
		Locker:   svc.locker,
		LockKey:  svc.lockKey,
		LockTTL:  cfg.Lock.TTL,
		State:    svc.state,
		Logger:   g.logger(),
	})
	ident := tbl.Identifier()

	fmt.Fprintln(w, "2. Health before maintenance (maintainer status):")
	before := runner.Health(ctx, ident)
	writeHealth(w, before)
	rowsBefore, sumBefore, err := gen.Checksum(ctx, tbl)
	if err != nil {
		return fmt.Errorf("checksum before: %w", err)
	}
	fmt.Fprintf(w, "  live rows %d, content checksum %016x\n\n", rowsBefore, sumBefore)

	failed := false
	fmt.Fprintln(w, "3. The plan (maintainer plan): what each task would do, and why:")
	for _, o := range runner.RunTable(ctx, ident, maintenance.Request{DryRun: true}) {
		if err := g.printOutcome(o); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "4. The manifests first (maintainer run --task manifests): the writer left one manifest per")
	fmt.Fprintln(w, "   commit, and planning a scan reads every one. The rewrite merges the small ones into")
	fmt.Fprintln(w, "   manifests of about 8 MiB sorted by partition, writing metadata only: every entry keeps")
	fmt.Fprintln(w, "   its snapshot id and sequence numbers, and the replaced manifests stay for expiry:")
	planBefore, err := planningTime(ctx, tbl)
	if err != nil {
		return err
	}
	for _, o := range runner.RunTable(ctx, ident, maintenance.Request{Tasks: []string{maintenance.TaskManifests}}) {
		failed = failed || o.Status == maintenance.StatusFailed
		if err := g.printOutcome(o); err != nil {
			return err
		}
		if m := o.Manifests; m != nil && len(m.Commits) > 0 {
			if tbl, err = cat.LoadTable(ctx, ident); err != nil {
				return fmt.Errorf("re-load the demo table: %w", err)
			}
			planAfter, err := planningTime(ctx, tbl)
			if err != nil {
				return err
			}
			if err := agePastExpiry(ctx, tbl); err != nil {
				return err
			}
			fmt.Fprintf(w, "  planning a scan of every file: %s with %d manifests, %s with %d\n",
				planBefore.Round(10*time.Microsecond), m.ManifestsBefore, planAfter.Round(10*time.Microsecond), m.ManifestsAfter)
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "5. Maintenance (maintainer run), in order compact -> deletes -> manifests -> expire ->")
	fmt.Fprintln(w, "   orphans. Compaction reads each group with its deletes applied, counts its rows on both")
	fmt.Fprintln(w, "   sides and commits one snapshot; delete-file upkeep drops and merges the delete files left")
	fmt.Fprintln(w, "   (this table has none); the manifest rewrite has just run (its rate_limit holds it back);")
	fmt.Fprintln(w, "   expiry keeps the current snapshot (this demo's override: retain_last 1,")
	fmt.Fprintln(w, "   max_snapshot_age 1s) and deletes the files only expired snapshots referenced; orphan")
	fmt.Fprintln(w, "   removal deletes unreferenced files older than min_age (72h), and keeps young ones and")
	fmt.Fprintln(w, "   hidden staging folders:")
	for _, o := range runner.RunTable(ctx, ident, maintenance.Request{}) {
		failed = failed || o.Status == maintenance.StatusFailed
		if err := g.printOutcome(o); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "6. Health after maintenance:")
	after := runner.Health(ctx, ident)
	writeHealth(w, after)
	tbl, err = cat.LoadTable(ctx, ident)
	if err != nil {
		return fmt.Errorf("re-load the demo table: %w", err)
	}
	rowsAfter, sumAfter, err := gen.Checksum(ctx, tbl)
	if err != nil {
		return fmt.Errorf("checksum after: %w", err)
	}
	fmt.Fprintf(w, "  live rows %d, content checksum %016x\n\n", rowsAfter, sumAfter)

	if rowsAfter != rowsBefore || sumAfter != sumBefore {
		return fmt.Errorf("the rows changed: %d rows (checksum %016x) before, %d (%016x) after", rowsBefore, sumBefore, rowsAfter, sumAfter)
	}
	if failed {
		return errTasksFailed
	}
	fmt.Fprintf(w, "Result: %d data files became %d, %d snapshots became %d; every row is unchanged (same count,\nsame checksum).\n",
		before.DataFiles, after.DataFiles, before.Snapshots, after.Snapshots)
	for _, p := range planted {
		_, err := os.Stat(p.path)
		state := "removed"
		if err == nil {
			state = "kept"
		}
		fmt.Fprintf(w, "Orphan %s: %s (%s)\n", p.rel, state, p.why)
		if (state == "removed") != p.old {
			return fmt.Errorf("orphan %s was %s, which is wrong: %s", p.rel, state, p.why)
		}
	}
	fmt.Fprintf(w, "Explore it: maintainer status --config %s\n", cfgPath)
	return nil
}

// demoOverride makes the demo's young snapshots expire: in production the
// default max_snapshot_age is 5 days (or the table's history.expire.*); and
// its few hundred manifests rewritten, where production waits for 100.
const demoOverride = `tables:
  - match: "demo.events"
    manifests:
      min_manifests: 10
    expire:
      retain_last: 1
      max_snapshot_age: 1s
`

// agePastExpiry waits until tbl's current snapshot is older than the demo's
// max_snapshot_age (1s), so what expires does not depend on how fast this
// machine is.
func agePastExpiry(ctx context.Context, tbl *table.Table) error {
	s := tbl.CurrentSnapshot()
	if s == nil {
		return nil
	}
	if wait := time.Until(time.UnixMilli(s.TimestampMs).Add(1100 * time.Millisecond)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// planningTime is the fastest of three plans of a full scan of tbl: what a
// query engine spends reading manifests before it reads any data.
func planningTime(ctx context.Context, tbl *table.Table) (time.Duration, error) {
	best := time.Duration(0)
	for range 3 {
		start := time.Now()
		if _, err := tbl.Scan().PlanFiles(ctx); err != nil {
			return 0, fmt.Errorf("plan a scan of the demo table: %w", err)
		}
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}

type plantedFile struct {
	path, rel, why string
	old            bool // older than min_age: must be removed
}

// plantOrphans leaves what crashed writers leave: unreferenced files, some
// old, one young, one in a hidden staging folder.
func plantOrphans(location string) ([]plantedFile, error) {
	root := strings.TrimPrefix(location, "file://")
	old := time.Now().Add(-10 * 24 * time.Hour)
	files := []plantedFile{
		{rel: "data/event_time_day=2024-01-03/00000-crashed-writer.parquet", why: "10 days old: removed", old: true},
		{rel: "data/00001-failed-compaction.parquet", why: "10 days old: removed", old: true},
		{rel: "metadata/snap-123-1-abandoned.avro", why: "10 days old: removed", old: true},
		{rel: "data/event_time_day=2024-01-04/00002-in-flight.parquet", why: "1 hour old, younger than min_age 72h: kept"},
		{rel: "data/_temporary/0/part-00000.parquet", why: "10 days old, but in a hidden staging folder: kept"},
	}
	for i := range files {
		f := &files[i]
		f.path = filepath.Join(root, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f.path, []byte("not referenced by any snapshot\n"), 0o644); err != nil {
			return nil, err
		}
		mtime := time.Now().Add(-time.Hour)
		if f.old || strings.Contains(f.rel, "_temporary") {
			mtime = old
		}
		if err := os.Chtimes(f.path, mtime, mtime); err != nil {
			return nil, err
		}
	}
	return files, nil
}

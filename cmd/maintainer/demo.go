package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/maintenance"
)

func newDemoCmd(ctx context.Context, g *globals) *cobra.Command {
	var dir string
	var appends, rows, partitions int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Build a local warehouse full of small files and maintain it (no config, no servers)",
		Args:  cobra.NoArgs,
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
	fmt.Fprintf(w, "maintainer demo: a local warehouse in %s\n(SQLite catalog, local files, in-process, no servers)\n\n", dir)

	// The demo's warehouse is the embedded default config's: write it out so
	// that the other commands can be pointed at it afterwards.
	cfgPath := filepath.Join(dir, "maintainer.yaml")
	cfgText := strings.ReplaceAll(string(config.DefaultYAML()), "${DEMO_DIR}", filepath.ToSlash(dir))
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

	runner := maintenance.NewRunner(maintenance.Deps{
		Catalog:  cat,
		Policy:   policyFunc(cfg, g.logger()),
		Selected: cfg.Managed,
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

	fmt.Fprintln(w, "3. The plan (maintainer plan): which files are rewritten and why:")
	for _, o := range runner.RunTable(ctx, ident, maintenance.Request{DryRun: true}) {
		if err := g.printOutcome(o); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "4. Maintenance (maintainer run): each group is read with its deletes applied,")
	fmt.Fprintln(w, "   rewritten, its rows counted on both sides, and committed as one snapshot:")
	failed := false
	for _, o := range runner.RunTable(ctx, ident, maintenance.Request{}) {
		failed = failed || o.Status == maintenance.StatusFailed
		if err := g.printOutcome(o); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "5. Health after maintenance:")
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
	fmt.Fprintf(w, "Result: %d data files became %d; every row is unchanged (same count, same checksum).\n",
		before.DataFiles, after.DataFiles)
	fmt.Fprintf(w, "Explore it: maintainer status --config %s\n", cfgPath)
	return nil
}

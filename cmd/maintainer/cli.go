package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/catalogcall"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/sqlcatalog"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
	"github.com/iceberg-maintainer/maintainer/internal/units"
	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

// Set by the build (-ldflags "-X main.version=... -X main.commit=...").
var (
	version = "dev"
	commit  = "unknown"
)

// tableCommandFlags are the global flags of the commands that work on the
// catalog's tables once (run, plan, status): all of them.
var tableCommandFlags = []string{"config", "output", "table", "task", "log-level"}

// globals are the flags of the root command; each command says which of
// them it acts on (honours) and refuses the others.
type globals struct {
	configPath string
	output     string
	tables     []string
	tasks      []string
	logLevel   string
	started    bool // flags parsed and valid: a command is running
	stdout     io.Writer
	stderr     io.Writer
	// writeAlloc backs compaction's Parquet writers (nil: the Go heap).
	writeAlloc compact.WriterAllocator
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, writeAlloc compact.WriterAllocator) error {
	g := &globals{stdout: stdout, stderr: stderr, writeAlloc: writeAlloc}
	root := &cobra.Command{
		Use:           "maintainer",
		Short:         "Keeps Apache Iceberg tables healthy: compaction, snapshot expiry, orphan-file removal",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseInapplicable(cmd); err != nil {
				return err
			}
			if err := g.validateFlags(); err != nil {
				return err
			}
			g.started = true
			return nil
		},
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// A flag of another command (plan --parallel) is an unknown flag here:
	// name the command it was given to.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%s: %w", commandName(c), err)}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&g.configPath, "config", "", "YAML config file (default: the embedded default: SQLite catalog in ./warehouse)")
	pf.StringVar(&g.output, "output", "text", "output format: text or json")
	pf.StringArrayVar(&g.tables, "table", nil, "only tables matching this `glob` (* within a level, ** across levels); repeatable")
	pf.StringArrayVar(&g.tasks, "task", nil, "only this task ("+strings.Join(maintenance.TaskNames(), "|")+"); repeatable")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")

	root.AddCommand(
		newRunCmd(ctx, g), newPlanCmd(ctx, g), newStatusCmd(ctx, g), newServeCmd(ctx, g),
		newConfigCmd(g), newVersionCmd(g), newDemoCmd(ctx, g),
	)
	err := root.ExecuteContext(ctx)
	if err != nil && !g.started {
		// Cobra failed before any command ran: an unknown command or
		// flag, or wrong arguments.
		var ue usageError
		if !errors.As(err, &ue) {
			return usageError{err}
		}
	}
	return err
}

// annotationHonours is the command annotation listing the global flags the
// command acts on (see honours).
const annotationHonours = "maintainer/honours"

// honours is the Annotations of a command that acts on the given global
// flags; the others are refused, never silently ignored.
func honours(flags ...string) map[string]string {
	return map[string]string{annotationHonours: strings.Join(flags, " ")}
}

// refuseInapplicable fails with a usage error naming each global flag set on
// a command that does not act on it, and the commands that do. Commands
// without the annotation (cobra's help and completion) are not checked.
func refuseInapplicable(cmd *cobra.Command) error {
	list, ok := cmd.Annotations[annotationHonours]
	if !ok {
		return nil
	}
	honoured := strings.Fields(list)
	var errs []error
	cmd.Root().PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Changed || slices.Contains(honoured, f.Name) {
			return
		}
		errs = append(errs, fmt.Errorf("--%s does not apply to %s (it applies to: %s)",
			f.Name, commandName(cmd), strings.Join(commandsHonouring(cmd.Root(), f.Name), ", ")))
	})
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// commandName is the command's path without the binary: "config validate".
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// commandsHonouring lists the commands under root that act on flag.
func commandsHonouring(root *cobra.Command, flag string) []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if list, ok := c.Annotations[annotationHonours]; ok && slices.Contains(strings.Fields(list), flag) {
			out = append(out, commandName(c))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

func (g *globals) validateFlags() error {
	var errs []error
	if g.output != "text" && g.output != "json" {
		errs = append(errs, fmt.Errorf("--output must be text or json, got %q", g.output))
	}
	for _, t := range g.tasks {
		if _, ok := maintenance.LookupTask(t); !ok {
			errs = append(errs, fmt.Errorf("--task %q is not a task; tasks: %s", t, strings.Join(maintenance.TaskNames(), ", ")))
		}
	}
	for _, p := range g.tables {
		if err := config.ValidGlob(p); err != nil {
			errs = append(errs, fmt.Errorf("--table %q: %w", p, err))
		}
	}
	if _, err := parseLevel(g.logLevel); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func (g *globals) logger() *slog.Logger {
	l, _ := parseLevel(g.logLevel)
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: l}))
}

// loadConfig reads --config, or the embedded default.
func (g *globals) loadConfig() (*config.Config, error) {
	if g.configPath == "" {
		// The embedded default: a SQLite catalog and warehouse here.
		return config.Default("."), nil
	}
	cfg, err := config.Load(g.configPath)
	if err != nil {
		return nil, usageError{err}
	}
	return cfg, nil
}

// env is what the table commands share: config, catalog, runner, and the
// lock and trigger state backends.
type env struct {
	cfg    *config.Config
	cat    catalog.Catalog
	runner *maintenance.Runner
	// metrics are the runner's (nil unless the command records metrics);
	// the scheduler of serve records into them too.
	metrics *maintenance.Metrics
	svc     *services
	log     *slog.Logger
	// rows reads a SQL catalog's iceberg_tables directly; nil for other
	// catalogs.
	rows *sqlcatalog.Rows
}

// close releases the backends' connections.
func (e *env) close() {
	if e.svc != nil {
		e.svc.close()
	}
	if e.rows != nil {
		e.rows.Close()
	}
}

// setupOptions say what a command needs beyond the catalog.
type setupOptions struct {
	lock     bool                  // lease tables (run, serve)
	registry prometheus.Registerer // serve: record metrics there
}

// setup loads the config and opens the backends and the catalog; the
// context it returns carries the object-store settings (objectStore), for
// every use of the env.
func (g *globals) setup(ctx context.Context, opts setupOptions) (context.Context, *env, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	log := g.logger()
	ctx, s3, err := objectStore(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	svc, err := openServices(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	if opts.lock {
		// Never start work the lock backend cannot protect; check it
		// before touching the catalog.
		if err := svc.ping(ctx); err != nil {
			svc.close()
			return nil, nil, unavailableError{err}
		}
	}
	cat, err := openCatalog(ctx, cfg.Catalog, s3)
	if err != nil {
		svc.close()
		return nil, nil, unavailableError{err}
	}
	bounded, err := catalogcall.New(cat, cfg.Catalog.Requests, log)
	if err != nil {
		svc.close()
		return nil, nil, usageError{fmt.Errorf("%s: catalog: %w", cfg.Path, err)}
	}
	bounded.Endpoint = catalogEndpoint(cfg.Catalog)
	rows := catalogRows(cfg.Catalog, log)
	deps := maintenance.Deps{
		Catalog: bounded,
		// A pass's listing of the catalog's tables is never older than a
		// poll interval, the age of serve's table list.
		PassLength:   cfg.Scheduler.PollInterval,
		WriteAlloc:   g.writeAlloc,
		CatalogProps: cfg.Catalog.Properties(),
		S3:           s3,
		Policy:       policyFunc(cfg, log),
		Selected: func(ident string) bool {
			if !cfg.Managed(ident) {
				return false
			}
			if len(g.tables) == 0 {
				return true
			}
			return slices.ContainsFunc(g.tables, func(p string) bool { return config.MatchGlob(p, ident) })
		},
		State:  svc.state,
		Logger: log,
	}
	if rows != nil {
		deps.MetadataLocator = rows
		// Commits by compare-and-set on the dialects the tests run.
		if d := strings.ToLower(cfg.Catalog.Properties()["sql.dialect"]); d == "sqlite" || d == "postgres" {
			deps.Swapper = rows
		}
	}
	if l := glueLocator(ctx, cfg.Catalog, s3, log); l != nil {
		deps.MetadataLocator = l
	}
	if opts.registry != nil {
		deps.Metrics = maintenance.NewMetrics(opts.registry,
			metrics.NewTables(cfg.Metrics.TableLabelOn(), cfg.Metrics.MaxTables))
	}
	if opts.lock {
		deps.Locker, deps.LockKey = svc.locker, svc.lockKey
		deps.LockTTL, deps.LockWait = cfg.Lock.TTL, cfg.Scheduler.LockWait
		deps.Assist = svc.assist
	}
	runner := maintenance.NewRunner(deps)
	return ctx, &env{cfg: cfg, cat: cat, runner: runner, metrics: deps.Metrics, svc: svc, log: log, rows: rows}, nil
}

// catalogEndpoint names the catalog for errors: its type, name and URI
// without user, password or query (a DSN's password= may sit there).
func catalogEndpoint(c config.CatalogConfig) string {
	s := fmt.Sprintf("%s catalog %q", c.Type, c.Name)
	if u, err := url.Parse(c.URI); err == nil && u.Scheme != "" {
		u.User, u.RawQuery = nil, ""
		s += " at " + u.String()
	}
	return s
}

// catalogRows opens a direct reader of a SQL catalog's rows (nil for other
// catalogs, or when it cannot be opened: the commands work without it,
// with less precise errors).
func catalogRows(c config.CatalogConfig, log *slog.Logger) *sqlcatalog.Rows {
	if c.Type != config.CatalogSQL {
		return nil
	}
	props := catalogProps(c)
	rows, err := sqlcatalog.Open(props["sql.driver"], props["sql.dialect"], props["uri"], c.Name)
	if err != nil {
		log.Debug("SQL catalog rows not read directly", "err", err)
		return nil
	}
	rows.Timeout = c.Requests.RequestTimeout
	return rows
}

// policyFunc resolves a table's settings from the config and the table's
// properties; property values the config had to ignore are logged.
func policyFunc(cfg *config.Config, log *slog.Logger) func(string, iceberg.Properties) (maintenance.Policy, error) {
	return func(ident string, props iceberg.Properties) (maintenance.Policy, error) {
		r, err := cfg.ForTable(ident, props)
		for _, w := range r.Warnings {
			log.Warn(w, "table", ident)
		}
		if err != nil {
			return maintenance.Policy{}, err
		}
		return maintenance.Policy{Compact: r.Compact, Deletes: r.Deletes, Manifests: r.Manifests, Expire: r.Expire, Orphans: r.Orphans,
			Triggers: r.Triggers, Limits: r.Limits, Settings: r.Settings, Invalid: r.Invalid}, nil
	}
}

func openCatalog(ctx context.Context, c config.CatalogConfig, s3 objstore.S3) (catalog.Catalog, error) {
	// iceberg-go's S3 IO addresses the bucket as the maintainer's store.
	props := iceberg.Properties(s3.IcebergProps(catalogProps(c)))
	if c.Type == config.CatalogSQL && props["sql.dialect"] == "sqlite" {
		if path, ok := sqliteuri.File(c.Properties()["uri"]); ok {
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("open sql catalog %q: SQLite database %s: %w (pass --config FILE, or run `maintainer demo` to build one)", c.Name, path, err)
			}
		}
	}
	// Opening may already ask the catalog (a REST catalog's config), so it
	// is bounded like any request.
	lctx, cancel := context.WithTimeout(ctx, c.Requests.RequestTimeout)
	defer cancel()
	cat, err := loadCatalog(lctx, c, props, s3)
	if err != nil {
		if ctx.Err() == nil && lctx.Err() != nil {
			err = fmt.Errorf("no answer within %s (catalog.request_timeout): %w", units.FormatDuration(c.Requests.RequestTimeout), err)
		}
		// iceberg-go's REST errors for an HTTP status (401, 403, 503) do not
		// say which server answered; name it (without any userinfo).
		where := ""
		if u, perr := url.Parse(props["uri"]); c.Type == config.CatalogREST && perr == nil && u.Host != "" {
			where = " at " + u.Redacted()
		}
		return nil, fmt.Errorf("open %s catalog %q%s: %w", c.Type, c.Name, where, err)
	}
	return cat, nil
}

// catalogProps are the properties handed to iceberg-go's catalog.Load: the
// config's, with what the maintainer adds to a SQL catalog.
func catalogProps(c config.CatalogConfig) iceberg.Properties {
	props := iceberg.Properties(c.Properties())
	if c.Type != config.CatalogSQL {
		return props
	}
	// Never create a catalog by accident (a typo in the path, or no
	// config at all): the maintainer only maintains existing tables.
	if _, set := props["init_catalog_tables"]; !set {
		props["init_catalog_tables"] = "false"
	}
	if props["sql.dialect"] == "sqlite" {
		props["uri"] = sqliteuri.WithBusyTimeout(props["uri"], props["sql.driver"], sqliteuri.BusyTimeout)
	}
	return props
}

// tables lists the selected tables; a listing failure means the catalog is
// unreachable, before any work.
// An empty selection is explained (emptySelection).
func (e *env) tables(ctx context.Context, flagTables []string) ([]table.Identifier, error) {
	idents, err := e.runner.Tables(ctx)
	if err != nil {
		return nil, unavailableError{err}
	}
	if len(idents) == 0 {
		return nil, e.emptySelection(ctx, flagTables)
	}
	return idents, nil
}

// emptySelection says why no table was selected. A selection that names
// nothing the catalog has (--table or tables[].match matching none of its
// tables, or a SQL catalog without tables under the configured name while
// other names have some) is bad usage: exit 2, before any work. A catalog
// that has no tables at all is only warned about: nothing to maintain yet.
func (e *env) emptySelection(ctx context.Context, flagTables []string) error {
	all, err := e.runner.CatalogTables(ctx)
	if err != nil {
		return unavailableError{err}
	}
	name := e.cfg.Catalog.Name
	if len(all) == 0 {
		msg := fmt.Sprintf("%s catalog %q has no tables", e.cfg.Catalog.Type, name)
		if e.rows != nil {
			names, err := e.rows.CatalogNames(ctx)
			if err != nil {
				e.log.Warn("the catalog has no tables, and which catalog names have is unknown", "catalog", name, "err", err)
				return nil
			}
			if len(names) > 0 {
				return usageError{fmt.Errorf("%s; iceberg_tables holds tables for catalog name(s) %s (catalog.name must be one of them)",
					msg, quoteAll(names))}
			}
		}
		e.log.Warn("the catalog has no tables: nothing to maintain", "catalog", name, "type", e.cfg.Catalog.Type)
		return nil
	}
	managed := slices.DeleteFunc(slices.Clone(all), func(id table.Identifier) bool { return !e.cfg.Managed(strings.Join(id, ".")) })
	if len(managed) == 0 {
		var globs []string
		for _, t := range e.cfg.Tables {
			globs = append(globs, t.Match)
		}
		return usageError{fmt.Errorf("the config's tables[].match (%s) match none of the %d tables of catalog %q (%s)",
			quoteAll(globs), len(all), name, sample(all))}
	}
	return usageError{fmt.Errorf("--table %s matches none of the %d managed tables of catalog %q (%s)",
		quoteAll(flagTables), len(managed), name, sample(managed))}
}

// sample names the first few tables of a list.
func sample(ids []table.Identifier) string {
	const n = 5
	var names []string
	for _, id := range ids[:min(n, len(ids))] {
		names = append(names, strings.Join(id, "."))
	}
	s := strings.Join(names, ", ")
	if len(ids) > n {
		s += fmt.Sprintf(", and %d more", len(ids)-n)
	}
	return s
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// whereFlagUsage is the help of run's and plan's --where.
const whereFlagUsage = "scope compaction to the files that may hold rows matching this `filter` (compact.where syntax; " +
	"relative dates like \"dt = current_date - 1\" resolve in UTC when the table's run starts); ANDed with the config's compact.where"

// scopedRequest is req scoped by --where, which must parse and, with
// --task, come with compact among the tasks.
func (g *globals) scopedRequest(req maintenance.Request, where *whereFlag) (maintenance.Request, error) {
	var err error
	if req.Where, err = where.filter(); err != nil {
		return req, usageError{fmt.Errorf("--where: %w", err)}
	}
	if err := maintenance.CheckScope(g.tasks, req.Where); err != nil {
		return req, usageError{fmt.Errorf("--where: %w", err)}
	}
	return req, nil
}

func newRunCmd(ctx context.Context, g *globals) *cobra.Command {
	var force, dryRun bool
	var parallel int
	var where whereFlag
	cmd := &cobra.Command{
		Use:         "run",
		Short:       "One maintenance pass over the selected tables (for a CronJob)",
		Annotations: honours(tableCommandFlags...),
		Long: "Runs each due task on each selected table, under the table's lease. A task is due when its\n" +
			"trigger says so (--force: always); a due task whose plan finds nothing to do is not_due; a\n" +
			"table another maintainer is working on is busy. Exit codes: 0 all succeeded, were not due or\n" +
			"busy; 1 some task failed; 2 bad usage or configuration (a selection that matches no table\n" +
			"included), nothing ran; 3 the catalog, the lock backend or the object store was unreachable\n" +
			"before any work.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if parallel < 1 {
				return usageError{fmt.Errorf("--parallel must be at least 1, got %d", parallel)}
			}
			req, err := g.scopedRequest(maintenance.Request{Tasks: g.tasks, Force: force, DryRun: dryRun}, &where)
			if err != nil {
				return err
			}
			return g.runPass(ctx, req, parallel)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "run the enabled tasks whatever their triggers (thresholds, rate_limit, window) say")
	cmd.Flags().Var(&where, "where", whereFlagUsage)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "plan only: write nothing")
	cmd.Flags().IntVar(&parallel, "parallel", 1, "tables maintained at once, each under its own lease (output stays in table order)")
	return cmd
}

func newPlanCmd(ctx context.Context, g *globals) *cobra.Command {
	var force bool
	var where whereFlag
	cmd := &cobra.Command{
		Use:         "plan",
		Short:       "Show what run would do and why; writes nothing",
		Annotations: honours(tableCommandFlags...),
		Args:        cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			req, err := g.scopedRequest(maintenance.Request{Tasks: g.tasks, Force: force, DryRun: true}, &where)
			if err != nil {
				return err
			}
			return g.runPass(ctx, req, 1)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "show what run --force would do: the enabled tasks whatever their triggers say")
	cmd.Flags().Var(&where, "where", whereFlagUsage)
	return cmd
}

// runPass runs req on every selected table, up to parallel tables at once,
// printing each table's outcomes in table order as soon as it and the
// tables before it are done.
func (g *globals) runPass(ctx context.Context, req maintenance.Request, parallel int) error {
	ctx, e, err := g.setup(ctx, setupOptions{lock: !req.DryRun})
	if err != nil {
		return err
	}
	defer e.close()
	idents, err := e.tables(ctx, g.tables)
	if err != nil {
		return err
	}
	results := make([][]maintenance.Outcome, len(idents))
	done := make([]chan struct{}, len(idents))
	sem := make(chan struct{}, parallel)
	for i, ident := range idents {
		done[i] = make(chan struct{})
		go func() {
			defer close(done[i])
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() == nil {
				results[i] = e.runner.RunTable(ctx, ident, req)
			}
		}()
	}
	failed := false
	var printErr error
	var unreach unreachable
	for i := range idents {
		<-done[i]
		for _, o := range results[i] {
			failed = failed || o.Status == maintenance.StatusFailed
			unreach.add(o)
			if printErr == nil {
				printErr = g.printOutcome(o)
			}
		}
		// Printed: a pass holds the outcomes (candidate lists, groups)
		// of the tables not yet printed, not of every table.
		results[i] = nil
	}
	if printErr != nil {
		return printErr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	if err := unreach.err(); err != nil {
		return unavailableError{err}
	}
	if failed {
		return errTasksFailed
	}
	return nil
}

// textListLimit bounds the lines one list takes in text output.
const textListLimit = 20

func (g *globals) printOutcome(o maintenance.Outcome) error {
	if g.output == "json" {
		return json.NewEncoder(g.stdout).Encode(o)
	}
	w := g.stdout
	fmt.Fprintf(w, "%s  %s  %s", o.Table, o.Task, o.Status)
	if o.Reason != "" {
		fmt.Fprintf(w, ": %s", o.Reason)
	}
	fmt.Fprintln(w)
	if o.Trigger != "" {
		fmt.Fprintf(w, "  trigger: %s\n", o.Trigger)
	}
	if o.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", o.Error)
	}
	for _, s := range o.Settings {
		fmt.Fprintf(w, "  setting %s = %s (from %s)\n", s.Key, s.Value, s.Source)
	}
	if c := o.Compact; c != nil {
		if c.Where != "" {
			fmt.Fprintf(w, "  where %s\n", c.Where)
		}
		if o.Status == maintenance.StatusPlanned || o.Status == maintenance.StatusNotDue {
			src := c.TargetSource
			if s, ok := settingNamed(o.Settings, "compact.target_file_size"); ok && src != "default" {
				src = s.Source // which layer of the config, or which property
			}
			fmt.Fprintf(w, "  target file size %s (from %s)\n", maintenance.HumanBytes(c.TargetFileSize), src)
			if c.SortOrder != "" {
				fmt.Fprintf(w, "  each file sorted by %s\n", c.SortOrder)
			}
			for _, gr := range c.Groups {
				fmt.Fprintf(w, "  rewrite %s: %d files, %s -> ~%d file(s) (%s)\n", gr.Partition, gr.Files,
					maintenance.HumanBytes(gr.Bytes), gr.EstOutput, gr.Reason)
			}
			for _, p := range c.Partitions {
				if p.Skipped != "" {
					fmt.Fprintf(w, "  skip %s: %d files, %s: %s\n", p.Partition, p.Files, maintenance.HumanBytes(p.Bytes), p.Skipped)
				}
			}
			for _, d := range c.DeadDeletes {
				fmt.Fprintf(w, "  drop dead delete file %s\n", d)
			}
		}
		if len(c.Commits) > 0 {
			fmt.Fprintf(w, "  rows read %d, rows written %d, delete files dropped %d, commits %v\n",
				c.RowsRead, c.RowsWritten, c.DeleteFilesDropped, c.Commits)
		}
		for _, f := range c.GroupsFailed {
			fmt.Fprintf(w, "  failed group %s\n", f)
		}
	}
	if d := o.Deletes; d != nil && (o.Status == maintenance.StatusPlanned || o.Status == maintenance.StatusNotDue) {
		for _, gr := range d.Groups {
			fmt.Fprintf(w, "  merge %s: %d position-delete files, %s (%s)\n", gr.Partition, gr.Files, maintenance.HumanBytes(gr.Bytes), gr.Reason)
		}
		for _, x := range d.Dangling {
			fmt.Fprintf(w, "  drop %s %s: %s\n", x.Kind, x.Path, x.Reason)
		}
		for _, sk := range d.Skipped {
			fmt.Fprintf(w, "  skip %s: %d position-delete files: %s\n", sk.Partition, sk.Files, sk.Reason)
		}
	}
	if m := o.Manifests; m != nil && (o.Status == maintenance.StatusPlanned || o.Status == maintenance.StatusNotDue) {
		fmt.Fprintf(w, "  target manifest size %s (from %s); small below %s\n", maintenance.HumanBytes(m.TargetManifestSize),
			m.TargetSource, maintenance.HumanBytes(m.SmallBelow))
		for _, gr := range m.Groups {
			fmt.Fprintf(w, "  rewrite %d %s manifests of spec %d: %s, %d files -> ~%d manifest(s)\n", gr.Manifests, gr.Content,
				gr.SpecID, maintenance.HumanBytes(gr.Bytes), gr.Files, gr.EstManifestsOut)
		}
	}
	if r := o.Expire; r != nil && o.Status == maintenance.StatusPlanned {
		for i, e := range r.Expired {
			if i == textListLimit {
				fmt.Fprintf(w, "  ... and %d more snapshots (--output json lists all)\n", len(r.Expired)-i)
				break
			}
			fmt.Fprintf(w, "  expire snapshot %d (%s): %s\n", e.SnapshotID, e.Timestamp.UTC().Format("2006-01-02 15:04Z"), e.Reason)
		}
		for _, ref := range r.RemovedRefs {
			fmt.Fprintf(w, "  remove %s %s: %s\n", ref.Type, ref.Name, ref.Reason)
		}
		if len(r.RemovedSchemas) > 0 || len(r.RemovedSpecs) > 0 {
			fmt.Fprintf(w, "  remove unused schemas %v, partition specs %v (clean_expired_metadata)\n", r.RemovedSchemas, r.RemovedSpecs)
		}
		if r.FilesBlocked != "" {
			fmt.Fprintf(w, "  no file will be deleted: %s\n", r.FilesBlocked)
		}
	}
	if r := o.Orphans; r != nil {
		if o.Status == maintenance.StatusPlanned || o.Status == maintenance.StatusSucceeded {
			verb := "delete"
			if o.Status == maintenance.StatusSucceeded {
				verb = "deleted"
			}
			for i, c := range r.Candidates {
				if i == textListLimit {
					fmt.Fprintf(w, "  ... and %d more files (--output json lists all)\n", len(r.Candidates)-i)
					break
				}
				fmt.Fprintf(w, "  %s %s (%s, modified %s, %s old)\n", verb, c.Path, maintenance.HumanBytes(c.Size),
					c.Modified.UTC().Format("2006-01-02 15:04Z"), c.Age.Round(time.Minute))
			}
			// Kept files are many (young metadata, staging folders): count
			// them by reason; --output json lists each.
			kept := map[string]int{}
			for _, s := range r.Skipped {
				kept[s.Reason]++
			}
			for _, reason := range slices.Sorted(maps.Keys(kept)) {
				fmt.Fprintf(w, "  keep %d unreferenced file(s): %s\n", kept[reason], reason)
			}
		}
		for _, f := range r.Failed {
			fmt.Fprintf(w, "  failed to delete %s\n", f)
		}
		for _, u := range r.UnloadableTables {
			fmt.Fprintf(w, "  table %s does not load (%s); its metadata %s is outside this table, so it was ruled out\n",
				u.Table, u.Error, u.MetadataLocation)
		}
	}
	return nil
}

// settingNamed finds the setting of key among settings.
func settingNamed(settings []maintenance.Setting, key string) (maintenance.Setting, bool) {
	i := slices.IndexFunc(settings, func(s maintenance.Setting) bool { return s.Key == key })
	if i < 0 {
		return maintenance.Setting{}, false
	}
	return settings[i], true
}

func newStatusCmd(ctx context.Context, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "status",
		Short:       "Show table health: files, small files, deletes, snapshots; --task: only that task's last run",
		Annotations: honours(tableCommandFlags...),
		Args:        cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, e, err := g.setup(ctx, setupOptions{})
			if err != nil {
				return err
			}
			defer e.close()
			idents, err := e.tables(ctx, g.tables)
			if err != nil {
				return err
			}
			failed := false
			for _, ident := range idents {
				h := e.runner.Health(ctx, ident)
				if len(g.tasks) > 0 {
					h.Tasks = slices.DeleteFunc(h.Tasks, func(t maintenance.TaskState) bool { return !slices.Contains(g.tasks, t.Task) })
				}
				failed = failed || h.Error != ""
				if err := g.printHealth(h); err != nil {
					return err
				}
			}
			if failed {
				return errTasksFailed
			}
			return nil
		},
	}
}

func (g *globals) printHealth(h maintenance.Health) error {
	if g.output == "json" {
		return json.NewEncoder(g.stdout).Encode(h)
	}
	writeHealth(g.stdout, h)
	return nil
}

func writeHealth(w io.Writer, h maintenance.Health) {
	fmt.Fprintf(w, "%s\n", h.Table)
	if h.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", h.Error)
		return
	}
	fmt.Fprintf(w, "  data files          %d (%s, average %s)\n", h.DataFiles, maintenance.HumanBytes(h.DataBytes), maintenance.HumanBytes(h.AvgFileSize))
	fmt.Fprintf(w, "  small files         %d (below %s; %d in partitions compaction would merge)\n",
		h.SmallFiles, maintenance.HumanBytes(h.SmallFileThreshold), h.CompactableFiles)
	fmt.Fprintf(w, "  partitions          %d (%d need no compaction, %d left to compact", h.Partitions,
		h.Partitions-h.PartitionsToCompact-h.PartitionsOutOfScope, h.PartitionsToCompact)
	if h.PartitionsOutOfScope > 0 {
		fmt.Fprintf(w, ", %d outside compact.where", h.PartitionsOutOfScope)
	}
	fmt.Fprintln(w, ")")
	fmt.Fprintf(w, "  delete files        %d position, %d equality\n", h.PositionDeleteFiles, h.EqualityDeleteFiles)
	fmt.Fprintf(w, "  snapshots           %d", h.Snapshots)
	if h.OldestSnapshot != nil {
		fmt.Fprintf(w, " (oldest %s)", h.OldestSnapshot.Format("2006-01-02 15:04:05Z"))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  commits since last compaction %d", h.CommitsSinceCompaction)
	if h.LastCompaction != nil {
		fmt.Fprintf(w, " (last %s)", h.LastCompaction.Format("2006-01-02 15:04:05Z"))
	}
	fmt.Fprintln(w)
	for _, t := range h.Tasks {
		fmt.Fprintf(w, "  %-19s ", t.Task+" last run")
		if t.LastAttempt.IsZero() {
			fmt.Fprintln(w, "never (in this trigger state)")
		} else {
			fmt.Fprintf(w, "%s, %s", t.LastAttempt.UTC().Format("2006-01-02 15:04:05Z"), t.LastResult)
			if t.LastError != "" {
				fmt.Fprintf(w, ": %s", t.LastError)
			}
			fmt.Fprintln(w)
		}
		if t.Window != "" {
			fmt.Fprintf(w, "  %-19s %s\n", t.Task+" window", t.Window)
		}
	}
	for _, t := range h.Tasks {
		for _, s := range t.Settings {
			fmt.Fprintf(w, "  setting %s = %s (from %s)\n", s.Key, s.Value, s.Source)
		}
		if t.InvalidSettings != "" {
			fmt.Fprintf(w, "  %s settings refused: %s\n", t.Task, t.InvalidSettings)
		}
	}
}

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with the config file"}
	cmd.AddCommand(&cobra.Command{
		Use:         "validate",
		Short:       "Load and validate the config; print every problem",
		Annotations: honours("config", "output"),
		Args:        cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if g.configPath == "" {
				return usageError{errors.New("config validate needs --config FILE")}
			}
			cfg, err := g.loadConfig()
			if g.output == "json" {
				out := map[string]any{"config": g.configPath, "valid": err == nil}
				var ve *config.ValidationError
				if errors.As(err, &ve) {
					out["problems"] = ve.Problems
				} else if err != nil {
					out["error"] = err.Error()
				}
				if jerr := json.NewEncoder(g.stdout).Encode(out); jerr != nil {
					return jerr
				}
			}
			if err != nil {
				return err
			}
			if g.output == "text" {
				fmt.Fprintf(g.stdout, "%s: valid (%s catalog %q, %d table rule(s))\n", g.configPath, cfg.Catalog.Type, cfg.Catalog.Name, len(cfg.Tables))
			}
			return nil
		},
	})
	return cmd
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "version",
		Short:       "Print version, commit, Go and iceberg-go versions",
		Annotations: honours("output"),
		Args:        cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ice := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, d := range bi.Deps {
					if d.Path == "github.com/apache/iceberg-go" {
						ice = d.Version
					}
				}
			}
			if g.output == "json" {
				return json.NewEncoder(g.stdout).Encode(map[string]string{
					"version": version, "commit": commit, "go": runtime.Version(), "iceberg_go": ice,
				})
			}
			fmt.Fprintf(g.stdout, "maintainer %s (commit %s, %s, iceberg-go %s)\n", version, commit, runtime.Version(), ice)
			return nil
		},
	}
}

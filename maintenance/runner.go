// Package maintenance is the per-table reconciler: it finds the managed
// tables of a catalog, and for each one loads it fresh and runs the due
// tasks in the fixed order of Tasks (compact -> manifests -> expire ->
// orphans): plan,
// stop there on a dry run, execute, record. It knows nothing of config files or flags; it
// gets a policy per table.
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/metacommit"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/deletes"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/manifests"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// Outcome statuses, as JSON output and metrics show them.
const (
	StatusSucceeded = "succeeded"
	StatusNotDue    = "not_due"
	StatusBusy      = "busy"
	StatusFailed    = "failed"
	StatusPlanned   = "planned"
	StatusSkipped   = "skipped"
)

// ErrUnavailable marks a dependency (catalog, lock backend) that could not
// be reached before any work was done.
var ErrUnavailable = errors.New("dependency unavailable")

// Catalog is the part of an iceberg-go catalog the runner needs.
type Catalog interface {
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
	CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error)
	ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error]
	ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error)
}

// Policy is the effective maintenance settings of one table.
type Policy struct {
	Compact compact.Config
	Deletes deletes.Config
	Expire  expire.Config
	Orphans orphans.Config

	Manifests manifests.Config
	// Triggers by task; a task without one is due on every pass.
	Triggers map[string]trigger.Config
	// Limits by task; a task without them has DefaultTaskLimits.
	Limits map[string]TaskLimits
	// Settings by task: the values not at their built-in defaults and
	// where each came from, for plan and status.
	Settings map[string][]Setting
	// Invalid by task: why the table's maintainer.* properties for the
	// task cannot be honoured. Such a task fails on the table with this
	// error and does nothing; the task's other fields hold the settings
	// without the table's properties (its trigger still decides when the
	// failure is reported again).
	Invalid map[string]error
}

// Runner runs maintenance passes over the tables of one catalog.
type Runner struct {
	cat      Catalog
	props    map[string]string
	s3       objstore.S3
	policy   func(ident string, props iceberg.Properties) (Policy, error)
	selected func(ident string) bool
	locker   lock.Locker
	lockKey  func(table string) string
	lockOpts lock.Options
	state    trigger.Store
	metrics  *Metrics
	log      *slog.Logger
	now      func() time.Time
	// writeAlloc backs compaction's Parquet writers (nil: the Go heap).
	writeAlloc compact.WriterAllocator
	// metaLoc names a table's metadata file without loading it (nil: the
	// catalog does not say).
	metaLoc orphans.MetadataLocator
	// swap commits compaction rewrites by compare-and-set on the
	// catalog's pointer (nil: through the catalog).
	swap metacommit.Swapper
	// neighbours is the pass's listing of the catalog's tables for the
	// orphan task's shared-location check.
	neighbours *orphans.Listing
	// policies are the tables' policies from their last loads, for
	// HeldUntil.
	policies *lastLoads[Policy]
	// running are the tasks running now; progressEvery how often each
	// logs that it still runs.
	running       *runningTasks
	progressEvery time.Duration
	// assist is where a large shared compaction asks for help (nil: it
	// does not).
	assist *AssistBoard
	// sharing remembers, by table, whether compact.group_leases was on at
	// the table's last load (serve's poll loads it just before a run), so
	// a busy table that cannot be shared is skipped without another load.
	// A table not loaded for sharingMemory (dropped, or no longer
	// selected) is forgotten: it costs one load if it comes back.
	sharing *lastLoads[bool]
}

const sharingMemory = 24 * time.Hour

// Deps are the Runner's collaborators; Policy and Selected are required.
type Deps struct {
	Catalog Catalog
	// CatalogProps are the catalog's properties; the orphan pass builds its
	// S3 client from them (s3.endpoint, s3.region, credentials).
	CatalogProps map[string]string
	Policy       func(ident string, props iceberg.Properties) (Policy, error)
	Selected     func(ident string) bool // managed by config and chosen by --table
	// Locker leases a table for a run; nil runs unlocked (plan, dry runs
	// and tests). LockKey names a table's lease (lock.Key with the prefix
	// and catalog); LockTTL and LockWait as in lock.Options.
	Locker   lock.Locker
	LockKey  func(table string) string
	LockTTL  time.Duration
	LockWait time.Duration
	// State keeps trigger state; nil keeps it in memory.
	State   trigger.Store
	Metrics *Metrics // nil records nothing
	Logger  *slog.Logger
	Now     func() time.Time
	// WriteAlloc backs compaction's Parquet writers; nil: the Go heap.
	WriteAlloc compact.WriterAllocator
	// MetadataLocator says where a table's metadata file is from the
	// catalog's own records (the SQL catalog's iceberg_tables), without
	// reading it: load errors name the file, orphan removal can rule out a
	// table that does not load, and a compaction retry after a conflict
	// waits for the other writer's next commit. nil: the catalog does not
	// say.
	MetadataLocator orphans.MetadataLocator
	// Swapper moves a table's pointer in the catalog's own records from
	// one metadata file to the next by compare-and-set (the SQL catalog's
	// iceberg_tables row): a compaction commit then lands on the metadata
	// it was built on, without the catalog parsing the table again, and a
	// lost attempt removes its metadata file (internal/metacommit). nil:
	// every commit goes through the catalog.
	Swapper metacommit.Swapper
	// PassLength bounds how long the listing of the catalog's tables (the
	// orphan task's shared-location check) is shared by the tables of a
	// pass: it is made on first need and made again once older. The
	// command line sets the poll interval, serve's pass, for every
	// command. 0: one listing for the Runner's life.
	PassLength time.Duration
	// ProgressInterval is how often a running task logs that it still
	// runs; 0: DefaultProgressInterval.
	ProgressInterval time.Duration
	// Assist is where a compaction on partition leases with groups in at
	// least compact.assist_min_partitions partitions asks the other
	// replicas for help; nil: it does not ask.
	Assist *AssistBoard
	// S3 are the S3 settings start-up built from CatalogProps; the stores
	// of S3 tables start from them (objstore.NewStore), without reading the
	// AWS environment again. Zero: built from CatalogProps for each task.
	S3 objstore.S3
}

func NewRunner(d Deps) *Runner {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.State == nil {
		d.State = trigger.NewMemStore()
	}
	if d.LockKey == nil {
		d.LockKey = func(t string) string { return lock.Key("iceberg-maintainer", "default", t) }
	}
	if d.LockTTL <= 0 {
		d.LockTTL = time.Minute
	}
	if d.ProgressInterval <= 0 {
		d.ProgressInterval = DefaultProgressInterval
	}
	r := &Runner{cat: d.Catalog, props: d.CatalogProps, s3: d.S3, policy: d.Policy, selected: d.Selected,
		locker: d.Locker, lockKey: d.LockKey, lockOpts: lock.Options{TTL: d.LockTTL, Wait: d.LockWait, Logger: d.Logger},
		state: d.State, metrics: d.Metrics, log: d.Logger, now: d.Now, writeAlloc: d.WriteAlloc,
		metaLoc: d.MetadataLocator, swap: d.Swapper, neighbours: orphans.NewListing(d.Catalog, d.MetadataLocator, d.PassLength, d.Now),
		running: newRunningTasks(), progressEvery: d.ProgressInterval, assist: d.Assist, sharing: newLastLoads[bool](sharingMemory, d.Now),
		policies: newLastLoads[Policy](d.PassLength, d.Now)}
	d.Metrics.WatchRunning(r.Running)
	return r
}

// Request says what one pass does.
type Request struct {
	Tasks []string // empty = all tasks
	// Force runs the enabled tasks whatever their triggers say (CLI
	// --force, a trigger request with force).
	Force bool
	// Manual runs the enabled tasks whatever their thresholds say, but
	// honours the rate limit (a trigger request or an alert).
	Manual bool
	DryRun bool   // plan only
	Why    string // why the pass was requested, for logs and outcomes
	// Where scopes compaction to the files that may hold matching rows, on
	// top of the config's compact.where (both must hold); relative dates
	// resolve when the table's pass starts. Empty: the config's alone.
	Where string
	// state is the running task's trigger state as loaded before it ran
	// (set by runTask): what an earlier run left it to do.
	state trigger.State
	// shared: the compaction runs on partition leases beside other
	// replicas, not under the table's lease (set by RunTable).
	shared bool
}

// Outcome is the result of one task on one table: one JSON object of
// `--output json`.
type Outcome struct {
	Table  string `json:"table"`
	Task   string `json:"task"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Trigger says why the task ran (or was considered): a trigger
	// decision, a request, or --force.
	Trigger string         `json:"trigger,omitempty"`
	Error   string         `json:"error,omitempty"`
	Seconds float64        `json:"duration_seconds"`
	Compact *CompactReport `json:"compact,omitempty"`
	Deletes *DeletesReport `json:"deletes,omitempty"`
	Expire  *ExpireReport  `json:"expire,omitempty"`
	Orphans *OrphansReport `json:"orphans,omitempty"`
	// Settings are the task's effective values that are not built-in
	// defaults, with their sources; plan only.
	Settings []Setting `json:"settings,omitempty"`

	Manifests *ManifestsReport `json:"manifests,omitempty"`
	failure   error
	// ran: the task did its work (succeeded, or its plan found nothing to
	// do), so its trigger counters start again.
	ran bool
	// canceled: the run stopped because its context ended (shutdown, lost
	// lease), which is not a failure of the task.
	canceled bool
	// keep, if set, records in the task's trigger state what its next run
	// must do (expiry's failed deletes); it applies even to a failed or
	// cancelled run.
	keep func(trigger.State) trigger.State
}

// Err is the task's failure, if any.
func (o Outcome) Err() error { return o.failure }

// Changed reports whether the task changed the table or its storage: a
// compaction or manifest-rewrite commit, an expiry commit or delete, an
// orphan deleted.
func (o Outcome) Changed() bool {
	switch {
	case o.Compact != nil && len(o.Compact.Commits) > 0:
		return true
	case o.Deletes != nil && o.Deletes.Result != nil && o.Deletes.Result.SnapshotID != 0:
		return true
	case o.Manifests != nil && len(o.Manifests.Commits) > 0:
		return true
	case o.Expire != nil && (o.Expire.SnapshotsExpired > 0 || o.Expire.FilesDeleted > 0):
		return true
	case o.Orphans != nil && o.Orphans.FilesDeleted > 0:
		return true
	}
	return false
}

// Tables lists the selected tables of the catalog, sorted. A listing error
// is ErrUnavailable: nothing has been done yet.
func (r *Runner) Tables(ctx context.Context) ([]table.Identifier, error) {
	return r.list(ctx, r.selected)
}

// CatalogTables lists every table of the catalog, selected or not, sorted:
// what a selection that matched nothing was matched against.
func (r *Runner) CatalogTables(ctx context.Context) ([]table.Identifier, error) {
	return r.list(ctx, func(string) bool { return true })
}

func (r *Runner) list(ctx context.Context, keep func(ident string) bool) ([]table.Identifier, error) {
	var out []table.Identifier
	var walk func(parent table.Identifier) error
	walk = func(parent table.Identifier) error {
		nss, err := r.cat.ListNamespaces(ctx, parent)
		if err != nil {
			return fmt.Errorf("list namespaces under %q: %w", strings.Join(parent, "."), err)
		}
		for _, ns := range nss {
			for ident, err := range r.cat.ListTables(ctx, ns) {
				if err != nil {
					return fmt.Errorf("list tables of %q: %w", strings.Join(ns, "."), err)
				}
				if keep(strings.Join(ident, ".")) {
					out = append(out, ident)
				}
			}
			// Hierarchical catalogs return only direct children.
			if len(ns) > len(parent) {
				if err := walk(ns); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(nil); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	slices.SortFunc(out, func(a, b table.Identifier) int {
		return strings.Compare(strings.Join(a, "."), strings.Join(b, "."))
	})
	out = slices.CompactFunc(out, func(a, b table.Identifier) bool { return slices.Equal(a, b) })
	return out, nil
}

// RunTable runs the requested tasks on one table, in order, under the
// table's lease (except on a dry run). A task runs when its trigger says it
// is due (or the request forces it); its outcome is recorded in the trigger
// state and the metrics.
//
// A compaction with compact.group_leases gives the table's lease back once
// the table is loaded (or, finding it busy, goes on without it) and runs on
// partition leases, taking the table's lease only around its commits, so
// other replicas can compact the table at the same time; the later tasks
// then take the table's lease again for their whole run, as expiry and
// orphan removal must. A busy table whose last load had group_leases off
// is reported busy without loading it again.
func (r *Runner) RunTable(ctx context.Context, ident table.Identifier, req Request) []Outcome {
	name := strings.Join(ident, ".")
	tasks := req.Tasks
	if len(tasks) == 0 {
		tasks = TaskNames()
	}
	var out []Outcome
	defer func() {
		at := r.now()
		for _, o := range out {
			r.metrics.outcome(o, at)
		}
	}()
	if req.DryRun || r.locker == nil {
		out = stopped(ctx, r.runTasks(ctx, ident, name, tasks, req))
		return out
	}
	lease, busy := r.takeLease(ctx, name, tasks, req)
	var tbl *table.Table
	var pol Policy
	if lease == nil {
		// A shared compaction holds the table's lease only around its
		// commits: the holder may be one of them, and this compaction can
		// join it (its own commits wait for the lease).
		if !slices.Contains(tasks, TaskCompact) || busy[0].Status != StatusBusy || !r.mayShare(name) {
			out = busy
			return out
		}
		var err error
		if tbl, pol, err = r.loadFor(ctx, ident, name, tasks, req); err != nil || !pol.Compact.GroupLeases {
			out = busy
			return out
		}
	} else {
		var err error
		if tbl, pol, err = r.loadFor(lease.Context(), ident, name, tasks, req); err != nil {
			out = stopped(lease.Context(), failAll(name, tasks, err))
			r.giveLease(ctx, name, lease)
			return out
		}
		if !slices.Contains(tasks, TaskCompact) || !pol.Compact.GroupLeases {
			out = stopped(lease.Context(), r.runLoaded(lease.Context(), ident, name, tbl, pol, tasks, req))
			r.giveLease(ctx, name, lease)
			return out
		}
		r.giveLease(ctx, name, lease)
	}
	shared := req
	shared.shared = true
	out = stopped(ctx, r.runLoaded(ctx, ident, name, tbl, pol, []string{TaskCompact}, shared))
	rest := slices.DeleteFunc(slices.Clone(tasks), func(t string) bool { return t == TaskCompact })
	if len(rest) == 0 {
		return out
	}
	if lease, busy = r.takeLease(ctx, name, rest, req); lease == nil {
		out = append(out, busy...)
		return out
	}
	out = append(out, stopped(lease.Context(), r.runTasks(lease.Context(), ident, name, rest, req))...)
	r.giveLease(ctx, name, lease)
	return out
}

// takeLease takes the table's lease, or returns the outcomes of tasks when
// it cannot: busy elsewhere, or an error of the lock backend.
func (r *Runner) takeLease(ctx context.Context, name string, tasks []string, req Request) (*lock.Lease, []Outcome) {
	lease, err := lock.Acquire(ctx, r.locker, r.lockKey(name), r.lockOpts)
	switch {
	case errors.Is(err, lock.ErrBusy):
		r.metrics.lock("busy", 0)
		var out []Outcome
		for _, t := range tasks {
			out = append(out, Outcome{Table: name, Task: t, Status: StatusBusy,
				Reason: "another maintainer holds this table's lease", Trigger: req.Why})
		}
		return nil, out
	case err != nil:
		r.metrics.lock("error", 0)
		return nil, failAll(name, tasks, fmt.Errorf("take the lease of table %s: %w", name, err))
	}
	r.metrics.lock("acquired", lease.Waited())
	return lease, nil
}

// giveLease releases the table's lease, saying whether it was lost.
func (r *Runner) giveLease(ctx context.Context, name string, lease *lock.Lease) {
	if lost := lease.Lost(); lost != nil {
		r.metrics.lockLost()
		r.log.Error("lease lost while maintaining; the running task stopped before its next commit or delete",
			"table", name, "err", lost)
	}
	// Release on a fresh context: ctx may be cancelled (shutdown), and the
	// lease must still be given back.
	if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
		r.log.Warn("release lease", "table", name, "err", err)
	}
}

// stopped marks the failed outcomes of a run whose context ended (shutdown,
// a lost lease) as cancelled: not a failure of the task.
func stopped(ctx context.Context, out []Outcome) []Outcome {
	if ctx.Err() != nil {
		for i := range out {
			out[i].canceled = out[i].Status == StatusFailed
		}
	}
	return out
}

func (r *Runner) runTasks(ctx context.Context, ident table.Identifier, name string, tasks []string, req Request) []Outcome {
	tbl, pol, err := r.loadFor(ctx, ident, name, tasks, req)
	if err != nil {
		return failAll(name, tasks, err)
	}
	return r.runLoaded(ctx, ident, name, tbl, pol, tasks, req)
}

// loadFor loads the table for a pass over tasks: its policy scoped by the
// request's where when compaction is among them.
func (r *Runner) loadFor(ctx context.Context, ident table.Identifier, name string, tasks []string, req Request) (*table.Table, Policy, error) {
	tbl, pol, err := r.load(ctx, ident, name)
	if err == nil && slices.Contains(tasks, TaskCompact) {
		pol, err = r.scope(pol, name, req)
	}
	return tbl, pol, err
}

// runLoaded runs the tasks on the table as loaded.
func (r *Runner) runLoaded(ctx context.Context, ident table.Identifier, name string, tbl *table.Table, pol Policy, tasks []string, req Request) []Outcome {
	var out []Outcome
	changed := false
	for _, task := range Tasks() {
		if !slices.Contains(tasks, task.Name) {
			continue
		}
		start := r.now()
		o := r.runTask(ctx, tbl, name, task, pol, req, start)
		if o.Status == StatusSucceeded || o.Status == StatusFailed {
			changed = true
			// Later tasks see the table as this one left it (a failed task
			// may have committed part of its work).
			fresh, err := r.cat.LoadTable(ctx, ident)
			if err != nil {
				r.log.Warn("re-load after a task; later tasks plan from the earlier metadata",
					"table", name, "task", task.Name, "err", err)
			} else {
				tbl = fresh
			}
		}
		o.Table, o.Task = name, task.Name
		if req.DryRun {
			o.Settings = pol.Settings[task.Name]
		}
		o.Seconds = r.now().Sub(start).Seconds()
		if o.failure != nil {
			o.Error = o.failure.Error()
		}
		out = append(out, o)
	}
	if changed && r.metrics != nil && ctx.Err() == nil {
		h, err := TableHealth(ctx, tbl, pol.Compact)
		h.Table = name
		if err == nil {
			r.metrics.health(h, r.now())
		}
	}
	return out
}

// runTask decides whether one task is due, runs it, and records the result
// in the trigger state (not on dry runs, not when cancelled).
func (r *Runner) runTask(ctx context.Context, tbl *table.Table, name string, task Task, pol Policy, req Request, start time.Time) Outcome {
	if !pol.runs(task) {
		return Outcome{Status: StatusSkipped, Reason: pol.disabledReason(task)}
	}
	if err := pol.Invalid[task.Name]; err != nil {
		if req.DryRun {
			return Outcome{Status: StatusFailed, failure: err} // plan says why, due or not
		}
		// The trigger still decides when, and the failure is recorded like
		// any other, so serve reports it once per rate limit, not per poll.
		task.run = func(context.Context, *Runner, *table.Table, Policy, Request) Outcome {
			return Outcome{Status: StatusFailed, failure: err}
		}
	}
	if ctx.Err() != nil {
		// Shutdown or a lost lease: start nothing more.
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("not started: %w", context.Cause(ctx))}
	}
	tctx, end := r.bound(ctx, name, task.Name, pol.limits(task.Name), start)
	defer end()
	return r.runBounded(ctx, tctx, tbl, name, task, pol, req, start)
}

// runBounded is runTask under the task's max_run_time: the task works on
// tctx; ctx (the pass's) says whether the pass itself was stopped.
func (r *Runner) runBounded(ctx, tctx context.Context, tbl *table.Table, name string, task Task, pol Policy, req Request, start time.Time) Outcome {
	st, err := r.state.Load(tctx, name, task.Name)
	if err != nil {
		if !req.DryRun {
			return overran(Outcome{Status: StatusFailed, failure: err}, tctx)
		}
		// A plan writes nothing, so it can still show the work.
		o := overran(task.run(tctx, r, tbl, pol, req), tctx)
		o.Trigger = fmt.Sprintf("trigger state unavailable (%v); planned as if due", err)
		return o
	}
	why := joinWhy(req.Why, "forced")
	if !req.Force {
		d, err := r.decide(tctx, tbl, task.Name, pol, st, req.Manual, start)
		if err != nil {
			return overran(Outcome{Status: StatusFailed, failure: err}, tctx)
		}
		if !d.Due {
			// The status already says "not due".
			return Outcome{Status: StatusNotDue, Reason: strings.TrimPrefix(d.Reason, "not due: "), Trigger: req.Why}
		}
		why = d.Reason
		if req.Manual && req.Why != "" {
			why = req.Why // the request is the trigger
		}
	}
	mark := trigger.MarkOf(tbl.Metadata()) // writers' commits after this count next time
	req.state = st
	o := overran(task.run(tctx, r, tbl, pol, req), tctx)
	o.Trigger = why
	// A scoped compaction looked at part of the table: the writers'
	// commits elsewhere still count toward the next unscoped run.
	o.ran = (o.Status == StatusSucceeded || o.Status == StatusNotDue) && (req.Where == "" || task.Name != TaskCompact)
	cancelled := o.failure != nil && ctx.Err() != nil
	if req.DryRun || o.Status == StatusSkipped || (cancelled && o.keep == nil) {
		return o
	}
	next := st
	if !cancelled {
		next = trigger.Record(st, mark, start, result(o), o.failure, o.ran)
	}
	if o.keep != nil {
		next = o.keep(next)
	}
	if err := r.state.Save(context.WithoutCancel(ctx), name, task.Name, next); err != nil {
		// The work is done; the next pass may run the task again early.
		r.log.Warn("save trigger state", "table", name, "task", task.Name, "err", err)
	}
	return o
}

// decide applies a task's trigger. A manual request replaces the thresholds
// but keeps the rate limit and the window.
func (r *Runner) decide(ctx context.Context, tbl *table.Table, task string, pol Policy, st trigger.State, manual bool, now time.Time) (trigger.Decision, error) {
	cfg := pol.Triggers[task]
	if manual {
		cfg = trigger.Config{RateLimit: cfg.RateLimit, Window: cfg.Window}
	}
	d, err := trigger.Evaluate(ctx, tbl, st, cfg, now)
	if err != nil {
		return trigger.Decision{}, fmt.Errorf("count commits for the %s trigger: %w", task, err)
	}
	return d, nil
}

// load loads a table fresh and resolves its policy, the start of a pass, of
// a poll's decision and of a rate-limit look-up alike.
func (r *Runner) load(ctx context.Context, ident table.Identifier, name string) (*table.Table, Policy, error) {
	tbl, err := r.cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, Policy{}, r.loadError(ctx, ident, name, err)
	}
	pol, err := r.policy(name, tbl.Properties())
	if err != nil {
		// The config and this table's properties contradict each other.
		return nil, Policy{}, fmt.Errorf("settings for table %s: %w", name, err)
	}
	r.sharing.put(name, pol.Compact.GroupLeases)
	r.policies.put(name, pol)
	return tbl, pol, nil
}

// mayShare reports whether a compaction of the table may run on
// partition leases as of its last load: true when it was never loaded. A
// table property that turned group_leases on since is seen at the next
// load (serve's next poll); until then the busy table is skipped, which is
// never unsafe.
func (r *Runner) mayShare(name string) bool {
	on, seen := r.sharing.get(name)
	return on || !seen
}

// loadError wraps a failed load with the table's metadata file when the
// catalog says which it is: iceberg-go's errors for a truncated or corrupt
// metadata.json do not name it.
func (r *Runner) loadError(ctx context.Context, ident table.Identifier, name string, err error) error {
	if r.metaLoc != nil && ctx.Err() == nil {
		if loc, lerr := r.metaLoc.MetadataLocation(ctx, ident); lerr == nil && loc != "" && !strings.Contains(err.Error(), loc) {
			return fmt.Errorf("load table %s (metadata %s): %w", name, loc, err)
		}
	}
	return fmt.Errorf("load table %s: %w", name, err)
}

// DueTasks loads a table and returns its enabled tasks that are due, with
// the reasons; it is cheap (table metadata, manifests only when a
// threshold needs them) and takes no lease. With measure, it also sets the
// table's health gauges from the same loaded table (that reads manifests).
func (r *Runner) DueTasks(ctx context.Context, ident table.Identifier, measure bool) ([]string, []string, error) {
	name := strings.Join(ident, ".")
	tbl, pol, err := r.load(ctx, ident, name)
	if err != nil {
		return nil, nil, err
	}
	if measure {
		h, err := TableHealth(ctx, tbl, pol.Compact)
		h.Table = name
		if err != nil {
			r.log.Warn("measure table health", "table", name, "err", err)
		} else {
			r.metrics.health(h, r.now())
		}
	}
	var due, reasons []string
	now := r.now()
	for _, task := range Tasks() {
		if !pol.runs(task) {
			continue
		}
		st, err := r.state.Load(ctx, name, task.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("trigger state of %s %s: %w", name, task.Name, err)
		}
		d, err := r.decide(ctx, tbl, task.Name, pol, st, false, now)
		if err != nil {
			return nil, nil, err
		}
		if d.Due {
			due = append(due, task.Name)
			reasons = append(reasons, task.Name+" "+d.Reason)
		}
	}
	return due, reasons, nil
}

// HeldUntil returns, for each of a table's enabled tasks among tasks (all
// when empty) that the task's rate_limit or window holds back now, when
// both let a requested (manual) run of it go ahead. It takes no lease, and
// loads the table only when its last load is older than Deps.PassLength
// (its policy, from the table's properties, is kept that long).
func (r *Runner) HeldUntil(ctx context.Context, ident table.Identifier, tasks []string) (map[string]time.Time, error) {
	name := strings.Join(ident, ".")
	pol, ok := r.policies.get(name)
	if !ok {
		var err error
		if _, pol, err = r.load(ctx, ident, name); err != nil {
			return nil, err
		}
	}
	held := map[string]time.Time{}
	now := r.now()
	for _, task := range Tasks() {
		if !pol.runs(task) || (len(tasks) > 0 && !slices.Contains(tasks, task.Name)) {
			continue
		}
		st, err := r.state.Load(ctx, name, task.Name)
		if err != nil {
			return nil, fmt.Errorf("trigger state of %s %s: %w", name, task.Name, err)
		}
		if until := trigger.NextAllowed(pol.Triggers[task.Name], st, now); now.Before(until) {
			held[task.Name] = until
		}
	}
	return held, nil
}

func joinWhy(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// failAll fails every task of a table that could not be worked on; the
// other tables go on.
func failAll(name string, tasks []string, err error) []Outcome {
	out := make([]Outcome, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, Outcome{Table: name, Task: t, Status: StatusFailed, Error: err.Error(), failure: err})
	}
	return out
}

// HumanBytes renders a byte count with binary units.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Package maintenance is the per-table reconciler: it finds the managed
// tables of a catalog, and for each one loads it fresh and runs the due
// tasks in the fixed order compact -> expire -> orphans: plan, stop there on
// a dry run, execute, record. It knows nothing of config files or flags; it
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

	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
)

// Task names, in the order they run.
const (
	TaskCompact = "compact"
	TaskExpire  = "expire"
	TaskOrphans = "orphans"
)

// AllTasks lists the tasks in their fixed order.
var AllTasks = []string{TaskCompact, TaskExpire, TaskOrphans}

// Outcome statuses, as JSON output and metrics show them.
const (
	StatusSucceeded = "succeeded"
	StatusNotDue    = "not_due"
	StatusFailed    = "failed"
	StatusPlanned   = "planned"
	StatusSkipped   = "skipped"
)

// ErrUnavailable marks a dependency (catalog) that could not be reached
// before any work was done.
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
	Expire  expire.Config
	Orphans orphans.Config
}

// Runner runs maintenance passes over the tables of one catalog.
type Runner struct {
	cat      Catalog
	props    map[string]string
	policy   func(ident string, props iceberg.Properties) (Policy, error)
	selected func(ident string) bool
	log      *slog.Logger
	now      func() time.Time
}

// Deps are the Runner's collaborators; Policy and Selected are required.
type Deps struct {
	Catalog Catalog
	// CatalogProps are the catalog's properties; the orphan pass builds its
	// S3 client from them (s3.endpoint, s3.region, credentials).
	CatalogProps map[string]string
	Policy       func(ident string, props iceberg.Properties) (Policy, error)
	Selected     func(ident string) bool // managed by config and chosen by --table
	Logger       *slog.Logger
	Now          func() time.Time
}

func NewRunner(d Deps) *Runner {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Runner{cat: d.Catalog, props: d.CatalogProps, policy: d.Policy, selected: d.Selected, log: d.Logger, now: d.Now}
}

// Request says what one pass does.
type Request struct {
	Tasks  []string // empty = all tasks
	Force  bool     // run enabled tasks even when their plan finds nothing due
	DryRun bool     // plan only
}

// Outcome is the result of one task on one table: one JSON object of
// `--output json`.
type Outcome struct {
	Table   string         `json:"table"`
	Task    string         `json:"task"`
	Status  string         `json:"status"`
	Reason  string         `json:"reason,omitempty"`
	Error   string         `json:"error,omitempty"`
	Seconds float64        `json:"duration_seconds"`
	Compact *CompactReport `json:"compact,omitempty"`
	Expire  *ExpireReport  `json:"expire,omitempty"`
	Orphans *OrphansReport `json:"orphans,omitempty"`
	failure error
}

// Err is the task's failure, if any.
func (o Outcome) Err() error { return o.failure }

// Tables lists the selected tables of the catalog, sorted. A listing error
// is ErrUnavailable: nothing has been done yet.
func (r *Runner) Tables(ctx context.Context) ([]table.Identifier, error) {
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
				if r.selected(strings.Join(ident, ".")) {
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

// Run does one pass over the given tables. A table that cannot be loaded
// fails that table only.
func (r *Runner) Run(ctx context.Context, tables []table.Identifier, req Request) []Outcome {
	var out []Outcome
	for _, ident := range tables {
		if ctx.Err() != nil {
			break
		}
		out = append(out, r.RunTable(ctx, ident, req)...)
	}
	return out
}

// RunTable runs the requested tasks on one table, in order.
func (r *Runner) RunTable(ctx context.Context, ident table.Identifier, req Request) []Outcome {
	name := strings.Join(ident, ".")
	tasks := req.Tasks
	if len(tasks) == 0 {
		tasks = AllTasks
	}
	tbl, err := r.cat.LoadTable(ctx, ident)
	if err != nil {
		return failAll(name, tasks, fmt.Errorf("load table %s: %w", name, err))
	}
	pol, err := r.policy(name, tbl.Properties())
	if err != nil {
		// The config and this table's properties contradict each other.
		return failAll(name, tasks, fmt.Errorf("settings for table %s: %w", name, err))
	}
	var out []Outcome
	for _, task := range AllTasks {
		if !slices.Contains(tasks, task) {
			continue
		}
		start := r.now()
		var o Outcome
		switch task {
		case TaskCompact:
			o = r.compact(ctx, tbl, pol.Compact, req)
		case TaskExpire:
			o = r.expire(ctx, tbl, pol.Expire, req)
		case TaskOrphans:
			o = r.orphans(ctx, tbl, pol.Orphans, req)
		}
		if o.Status == StatusSucceeded || o.Status == StatusFailed {
			// Later tasks see the table as this one left it (a failed task
			// may have committed part of its work).
			fresh, err := r.cat.LoadTable(ctx, ident)
			if err != nil {
				r.log.Warn("re-load after a task failed; later tasks plan from the earlier metadata",
					"table", name, "task", task, "err", err)
			} else {
				tbl = fresh
			}
		}
		o.Table, o.Task = name, task
		o.Seconds = r.now().Sub(start).Seconds()
		if o.failure != nil {
			o.Error = o.failure.Error()
		}
		out = append(out, o)
	}
	return out
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

// CompactReport carries the figures of a compaction plan and run.
type CompactReport struct {
	SnapshotID         int64                       `json:"snapshot_id,omitempty"`
	TargetFileSize     int64                       `json:"target_file_size"`
	TargetSource       string                      `json:"target_source"`
	Groups             []compact.Group             `json:"groups,omitempty"`
	Partitions         []compact.PartitionDecision `json:"partitions,omitempty"`
	DeadDeletes        []string                    `json:"dead_delete_files,omitempty"`
	FilesIn            int                         `json:"files_in"`
	BytesIn            int64                       `json:"bytes_in"`
	EstFilesOut        int                         `json:"estimated_files_out"`
	FilesOut           int                         `json:"files_out"`
	BytesOut           int64                       `json:"bytes_out"`
	RowsRead           int64                       `json:"rows_read"`
	RowsWritten        int64                       `json:"rows_written"`
	DeleteFilesDropped int                         `json:"delete_files_dropped"`
	Commits            []int64                     `json:"commits,omitempty"`
	CommitRetries      int                         `json:"commit_retries"`
	GroupsFailed       []string                    `json:"groups_failed,omitempty"`
}

func (r *Runner) compact(ctx context.Context, tbl *table.Table, cfg compact.Config, req Request) Outcome {
	if !cfg.Enabled {
		return Outcome{Status: StatusSkipped, Reason: compact.ReasonDisabled}
	}
	plan, err := compact.PlanTable(ctx, tbl, cfg, r.now())
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("plan compaction: %w", err)}
	}
	rep := &CompactReport{
		SnapshotID: plan.SnapshotID, TargetFileSize: plan.TargetFileSize, TargetSource: plan.TargetSource,
		Groups: plan.Groups, Partitions: plan.Partitions,
		FilesIn: plan.InputFiles(), BytesIn: plan.InputBytes(), EstFilesOut: plan.EstOutputFiles(),
	}
	for _, d := range plan.DeadDeletes {
		rep.DeadDeletes = append(rep.DeadDeletes, d.FilePath())
	}
	if plan.SnapshotID == 0 {
		return Outcome{Status: StatusNotDue, Reason: compact.ReasonNoSnapshot, Compact: rep}
	}
	if req.DryRun {
		reason := fmt.Sprintf("would rewrite %d files (%s) in %d groups into about %d files",
			rep.FilesIn, HumanBytes(rep.BytesIn), len(plan.Groups), rep.EstFilesOut)
		if plan.Empty() {
			reason = compact.ReasonNothingToWrite
		}
		return Outcome{Status: StatusPlanned, Reason: reason, Compact: rep}
	}
	if plan.Empty() {
		return Outcome{Status: StatusNotDue, Reason: compact.ReasonNothingToWrite, Compact: rep}
	}
	res, err := compact.Execute(ctx, r.cat, tbl, plan, cfg, compact.Options{Logger: r.log})
	rep.FilesIn, rep.BytesIn = res.FilesRewritten, res.BytesRewritten
	rep.FilesOut, rep.BytesOut = res.FilesWritten, res.BytesWritten
	rep.RowsRead, rep.RowsWritten = res.RowsRead, res.RowsWritten
	rep.DeleteFilesDropped, rep.Commits, rep.CommitRetries = res.DeleteFilesDropped, res.Commits, res.CommitRetries
	for _, f := range res.GroupsFailed {
		rep.GroupsFailed = append(rep.GroupsFailed, fmt.Sprintf("%s: %v", f.Partition, f.Err))
	}
	if err != nil {
		return Outcome{Status: StatusFailed, failure: err, Compact: rep,
			Reason: fmt.Sprintf("%d groups committed, %d failed", res.GroupsCommitted, len(res.GroupsFailed))}
	}
	return Outcome{Status: StatusSucceeded, Compact: rep,
		Reason: fmt.Sprintf("rewrote %d files (%s) into %d files (%s)", res.FilesRewritten,
			HumanBytes(res.BytesRewritten), res.FilesWritten, HumanBytes(res.BytesWritten))}
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

package maintenance

import (
	"context"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/deletes"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/manifests"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
)

// Task names, in the order they run.
const (
	TaskCompact   = "compact"
	TaskDeletes   = "deletes"
	TaskManifests = "manifests"
	TaskExpire    = "expire"
	TaskOrphans   = "orphans"
)

// Task is one maintenance task as the runner, the scheduler and the command
// line see it. A new task is one more entry in Tasks plus its own adapter
// file (like compact_task.go) and package.
type Task struct {
	Name string
	// Enabled says whether a table's policy turns the task on.
	Enabled func(Policy) bool
	// disabled is the reason a task that is not enabled is skipped with.
	disabled string
	// run plans the enabled task and, unless the request is a dry run,
	// executes it.
	run func(ctx context.Context, r *Runner, tbl *table.Table, pol Policy, req Request) Outcome
}

// Tasks returns every task in run order: the order of a table's pass, of
// merged requests and of every list of task names shown to users. Compaction
// comes first so that expiry and orphan removal see the files it replaced;
// the manifest rewrite follows it and delete-file upkeep, to merge the
// manifests their commits wrote, and precedes expiry, which deletes the manifests it replaced once no
// retained snapshot lists them.
func Tasks() []Task {
	return []Task{{
		Name:     TaskCompact,
		Enabled:  func(p Policy) bool { return p.Compact.Enabled },
		disabled: compact.ReasonDisabled,
		run: func(ctx context.Context, r *Runner, tbl *table.Table, pol Policy, req Request) Outcome {
			return r.compact(ctx, tbl, pol.Compact, req)
		},
	}, {
		// After compaction, which applies and drops the deletes of the files
		// it rewrites: what is left is merged or dropped here.
		Name:     TaskDeletes,
		Enabled:  func(p Policy) bool { return p.Deletes.Enabled },
		disabled: deletes.ReasonDisabled,
		run: func(ctx context.Context, r *Runner, tbl *table.Table, pol Policy, req Request) Outcome {
			return r.deletes(ctx, tbl, pol.Deletes, req)
		},
	}, {
		// After the tasks that change files, so it merges the manifests
		// they left.
		Name:     TaskManifests,
		Enabled:  func(p Policy) bool { return p.Manifests.Enabled },
		disabled: manifests.ReasonDisabled,
		run: func(ctx context.Context, r *Runner, tbl *table.Table, pol Policy, req Request) Outcome {
			return r.manifests(ctx, tbl, pol.Manifests, req)
		},
	}, {
		Name:     TaskExpire,
		Enabled:  func(p Policy) bool { return p.Expire.Enabled },
		disabled: expire.ReasonDisabled,
		run: func(ctx context.Context, r *Runner, tbl *table.Table, pol Policy, req Request) Outcome {
			return r.expire(ctx, tbl, pol.Expire, req)
		},
	}, {
		Name:     TaskOrphans,
		Enabled:  func(p Policy) bool { return p.Orphans.Enabled },
		disabled: orphans.ReasonDisabled,
		run: func(ctx context.Context, r *Runner, tbl *table.Table, pol Policy, req Request) Outcome {
			return r.orphans(ctx, tbl, pol.Orphans, req)
		},
	}}
}

// TaskNames returns the task names in run order.
func TaskNames() []string {
	ts := Tasks()
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// LookupTask returns the task called name.
func LookupTask(name string) (Task, bool) {
	for _, t := range Tasks() {
		if t.Name == name {
			return t, true
		}
	}
	return Task{}, false
}

package maintenance

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
)

// ExpireReport carries the figures of an expiration plan and run. Its lists
// are [] when empty, never null: consumers iterate them.
type ExpireReport struct {
	Policy           expire.Policy            `json:"policy"`
	SnapshotsBefore  int                      `json:"snapshots_before"`
	Expired          []expire.ExpiredSnapshot `json:"expired"`
	RemovedRefs      []expire.RemovedRef      `json:"removed_refs"`
	FilesPlanned     int                      `json:"files_planned"`
	BytesPlanned     int64                    `json:"bytes_planned"`
	FilesBlocked     string                   `json:"files_blocked,omitempty"`
	SnapshotsExpired int                      `json:"snapshots_expired"`
	FilesDeleted     int                      `json:"files_deleted"`
	BytesDeleted     int64                    `json:"bytes_deleted"`
	Result           *expire.Result           `json:"result,omitempty"`
}

func (r *Runner) expire(ctx context.Context, tbl *table.Table, cfg expire.Config, req Request) Outcome {
	plan, err := expire.PlanTable(ctx, tbl, cfg, r.now())
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("plan expiration: %w", err)}
	}
	rep := &ExpireReport{Policy: plan.Policy, SnapshotsBefore: plan.SnapshotsBefore, Expired: nonNil(plan.Expired),
		RemovedRefs: nonNil(plan.RemovedRefs), FilesPlanned: len(plan.Files), BytesPlanned: plan.FileBytes(), FilesBlocked: plan.FilesBlocked}
	summary := fmt.Sprintf("%d of %d snapshots (retain last %d, max age %s), %d refs, %d files (%s)",
		len(plan.Expired), plan.SnapshotsBefore, plan.Policy.RetainLast, plan.Policy.MaxSnapshotAge,
		len(plan.RemovedRefs), len(plan.Files), HumanBytes(plan.FileBytes()))
	if req.DryRun {
		if plan.Empty() {
			return Outcome{Status: StatusPlanned, Reason: expire.ReasonNothingToExpire, Expire: rep}
		}
		return Outcome{Status: StatusPlanned, Reason: "would expire " + summary, Expire: rep}
	}
	if plan.Empty() {
		return Outcome{Status: StatusNotDue, Reason: expire.ReasonNothingToExpire, Expire: rep}
	}
	res, err := expire.Execute(ctx, r.cat, tbl, plan, cfg, expire.Options{Logger: r.log})
	if res != nil {
		rep.Result = res
		rep.SnapshotsExpired, rep.FilesDeleted, rep.BytesDeleted = res.SnapshotsExpired(), res.FilesDeleted(), res.BytesDeleted()
	}
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("expire snapshots: %w", err), Expire: rep}
	}
	reason := fmt.Sprintf("expired %d snapshots, deleted %d files (%s)", rep.SnapshotsExpired, rep.FilesDeleted, HumanBytes(rep.BytesDeleted))
	if res.FilesFailed > 0 {
		reason += fmt.Sprintf("; %d deletes failed (left for the orphan pass)", res.FilesFailed)
	}
	if res.FilesBlocked != "" {
		reason += "; no file deleted: " + res.FilesBlocked
	}
	return Outcome{Status: StatusSucceeded, Reason: reason, Expire: rep}
}

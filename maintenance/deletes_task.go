package maintenance

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/maintenance/deletes"
)

// DeletesReport carries the figures of a delete-file upkeep plan and run.
// Its lists are [] when empty, never null: consumers iterate them.
type DeletesReport struct {
	SnapshotID          int64             `json:"snapshot_id,omitempty"`
	TargetFileSize      int64             `json:"target_file_size_bytes"`
	TargetSource        string            `json:"target_source"`
	PositionDeleteFiles int               `json:"position_delete_files"`
	DeletionVectors     int               `json:"deletion_vectors"`
	EqualityDeleteFiles int               `json:"equality_delete_files"`
	Groups              []deletes.Group   `json:"groups"`
	Dangling            []deletes.Dropped `json:"dangling"`
	Skipped             []deletes.Skip    `json:"skipped"`
	FilesIn             int               `json:"files_in"`
	BytesIn             int64             `json:"bytes_in"`
	Result              *deletes.Result   `json:"result,omitempty"`
}

func (r *Runner) deletes(ctx context.Context, tbl *table.Table, cfg deletes.Config, req Request) Outcome {
	plan, err := deletes.PlanTable(ctx, tbl, cfg)
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("plan delete-file upkeep: %w", err)}
	}
	rep := &DeletesReport{
		SnapshotID: plan.SnapshotID, TargetFileSize: plan.TargetFileSize, TargetSource: plan.TargetSource,
		PositionDeleteFiles: plan.PositionDeleteFiles, DeletionVectors: plan.DeletionVectors, EqualityDeleteFiles: plan.EqualityDeleteFiles,
		Groups: nonNil(plan.Groups), Dangling: nonNil(plan.Dangling), Skipped: nonNil(plan.Skipped),
		FilesIn: plan.InputFiles(), BytesIn: plan.InputBytes(),
	}
	if plan.Empty() {
		return Outcome{Status: StatusNotDue, Reason: plan.IdleReason(), Deletes: rep}
	}
	summary := fmt.Sprintf("drop %d dangling delete files and merge %d small position-delete files in %d groups (%s)",
		len(plan.Dangling), rep.FilesIn-len(plan.Dangling), len(plan.Groups), HumanBytes(rep.BytesIn))
	if req.DryRun {
		return Outcome{Status: StatusPlanned, Reason: "would " + summary, Deletes: rep}
	}
	res, err := deletes.Execute(ctx, r.cat, tbl, plan, cfg, deletes.Options{Logger: r.log, Head: r.metaLoc})
	rep.Result = res
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("rewrite delete files: %w", err), Deletes: rep}
	}
	if res.SnapshotID == 0 {
		reason := deletes.ReasonNothingToDo + " (after a concurrent commit)"
		if len(res.GroupsKept) > 0 {
			reason = "nothing committed: " + strings.Join(res.GroupsKept, "; ")
		}
		return Outcome{Status: StatusNotDue, Reason: reason, Deletes: rep}
	}
	reason := fmt.Sprintf("removed %d delete files (%s): %d dangling", res.FilesRemoved, HumanBytes(res.BytesRemoved), res.DanglingDropped)
	if merged := res.FilesRemoved - res.DanglingDropped; merged > 0 {
		reason += fmt.Sprintf(", %d merged into %d (%d of %d positions left out: they deleted no live row)",
			merged, res.FilesWritten, res.PositionsLeftOut, res.PositionsRead)
	}
	return Outcome{Status: StatusSucceeded, Deletes: rep, Reason: reason}
}

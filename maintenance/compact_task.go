package maintenance

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
)

// CompactReport carries the figures of a compaction plan and run. Its lists
// are [] when empty, never null: consumers iterate them.
type CompactReport struct {
	SnapshotID         int64                       `json:"snapshot_id,omitempty"`
	TargetFileSize     int64                       `json:"target_file_size_bytes"`
	TargetSource       string                      `json:"target_source"`
	Groups             []compact.Group             `json:"groups"`
	Partitions         []compact.PartitionDecision `json:"partitions"`
	DeadDeletes        []string                    `json:"dead_delete_files"`
	FilesIn            int                         `json:"files_in"`
	BytesIn            int64                       `json:"bytes_in"`
	EstFilesOut        int                         `json:"estimated_files_out"`
	FilesOut           int                         `json:"files_out"`
	BytesOut           int64                       `json:"bytes_out"`
	RowsRead           int64                       `json:"rows_read"`
	RowsWritten        int64                       `json:"rows_written"`
	DeleteFilesDropped int                         `json:"delete_files_dropped"`
	Commits            []int64                     `json:"commits"`
	CommitRetries      int                         `json:"commit_retries"`
	GroupsFailed       []string                    `json:"groups_failed"`
	// Where is the row filter that chose the files, relative dates
	// resolved; empty when compaction looked at every file.
	Where string `json:"where,omitempty"`
}

func (r *Runner) compact(ctx context.Context, tbl *table.Table, cfg compact.Config, req Request) Outcome {
	plan, err := compact.PlanTable(ctx, tbl, cfg, r.now())
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("plan compaction: %w", err)}
	}
	rep := &CompactReport{
		SnapshotID: plan.SnapshotID, TargetFileSize: plan.TargetFileSize, TargetSource: plan.TargetSource,
		Groups: plan.Groups, Partitions: plan.Partitions,
		FilesIn: plan.InputFiles(), BytesIn: plan.InputBytes(), EstFilesOut: plan.EstOutputFiles(),
		DeadDeletes: []string{}, Commits: []int64{}, GroupsFailed: []string{},
	}
	rep.Groups, rep.Partitions = nonNil(rep.Groups), nonNil(rep.Partitions)
	rep.Where = cfg.Where
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
	res, err := compact.Execute(ctx, r.cat, tbl, plan, cfg, compact.Options{Logger: r.log, Allocator: r.writeAlloc})
	rep.FilesIn, rep.BytesIn = res.FilesRewritten, res.BytesRewritten
	rep.FilesOut, rep.BytesOut = res.FilesWritten, res.BytesWritten
	rep.RowsRead, rep.RowsWritten = res.RowsRead, res.RowsWritten
	rep.DeleteFilesDropped, rep.Commits, rep.CommitRetries = res.DeleteFilesDropped, nonNil(res.Commits), res.CommitRetries
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

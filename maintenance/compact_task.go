package maintenance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/iceberg-maintainer/maintainer/internal/waiting"
	"github.com/iceberg-maintainer/maintainer/lock"
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
	// Backfill progress of a compaction shared by replicas (group_leases):
	// partitions the plan found work in, groups this run committed, and
	// groups it left to the replicas that claimed their partitions.
	PartitionsPlanned      int `json:"partitions_planned"`
	GroupsCommitted        int `json:"groups_committed"`
	GroupsClaimedElsewhere int `json:"groups_claimed_elsewhere"`
	// Where is the row filter that chose the files, relative dates
	// resolved; empty when compaction looked at every file.
	Where string `json:"where,omitempty"`
	// SortOrder is the order each file is written in, and where it came
	// from; empty when the files are bin-packed.
	SortOrder string `json:"sort_order,omitempty"`
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
		PartitionsPlanned: plannedPartitions(plan),
	}
	rep.Groups, rep.Partitions = nonNil(rep.Groups), nonNil(rep.Partitions)
	rep.Where, rep.SortOrder = cfg.Where, plan.SortOrder()
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
	opts := compact.Options{Logger: r.log, Allocator: r.writeAlloc, Head: r.metaLoc, Swap: r.swap}
	if req.shared {
		name := strings.Join(tbl.Identifier(), ".")
		opts.RunID = uuid.NewString()
		prog := &backfillProgress{planned: rep.PartitionsPlanned}
		reportProgress(ctx, prog.String)
		opts.Claims = partitionLeases{r: r, key: r.lockKey(name), prog: prog}
		opts.Gate = commitGate{r: r, key: r.lockKey(name), wait: cfg.CommitLeaseWait}
		if r.assist != nil && cfg.AssistMinPartitions > 0 && rep.PartitionsPlanned >= cfg.AssistMinPartitions {
			host, _ := os.Hostname()
			defer r.askForHelp(ctx, tbl.Identifier(), host+"/"+opts.RunID)()
		}
	}
	res, err := compact.Execute(ctx, r.cat, tbl, plan, cfg, opts)
	rep.FilesIn, rep.BytesIn = res.FilesRewritten, res.BytesRewritten
	rep.FilesOut, rep.BytesOut = res.FilesWritten, res.BytesWritten
	rep.RowsRead, rep.RowsWritten = res.RowsRead, res.RowsWritten
	rep.DeleteFilesDropped, rep.Commits, rep.CommitRetries = res.DeleteFilesDropped, nonNil(res.Commits), res.CommitRetries
	rep.GroupsCommitted, rep.GroupsClaimedElsewhere = res.GroupsCommitted, res.GroupsClaimedElsewhere
	for _, f := range res.GroupsFailed {
		rep.GroupsFailed = append(rep.GroupsFailed, fmt.Sprintf("%s: %v", f.Partition, f.Err))
	}
	if err != nil {
		return Outcome{Status: StatusFailed, failure: err, Compact: rep,
			Reason: fmt.Sprintf("%d groups committed, %d failed", res.GroupsCommitted, len(res.GroupsFailed))}
	}
	reason := fmt.Sprintf("rewrote %d files (%s) into %d files (%s)", res.FilesRewritten,
		HumanBytes(res.BytesRewritten), res.FilesWritten, HumanBytes(res.BytesWritten))
	if req.shared {
		reason += fmt.Sprintf("; backfill: %d of %d partitions needed compaction at the plan, %d of its %d groups committed here, %d left to other replicas",
			rep.PartitionsPlanned, len(plan.Partitions), res.GroupsCommitted, len(plan.Groups), res.GroupsClaimedElsewhere)
	}
	return Outcome{Status: StatusSucceeded, Compact: rep, Reason: reason}
}

// plannedPartitions counts the partitions the plan rewrites groups in.
func plannedPartitions(plan *compact.Plan) int {
	n := 0
	for _, p := range plan.Partitions {
		if p.Groups > 0 {
			n++
		}
	}
	return n
}

// partitionLeases claims a table's partitions with leases of the table's
// locker: <table lease key>:part:<hash of the spec id and partition>.
type partitionLeases struct {
	r    *Runner
	key  string
	prog *backfillProgress // nil: not counted
}

// backfillProgress counts a shared compaction's partition claims as they
// happen, for /v1/status.
type backfillProgress struct {
	planned            int
	claimed, elsewhere atomic.Int64
}

func (p *backfillProgress) String() string {
	return fmt.Sprintf("%d partitions claimed here, %d held by other replicas, of %d planned",
		p.claimed.Load(), p.elsewhere.Load(), p.planned)
}

func (p partitionLeases) Claim(ctx context.Context, partition string) (compact.Claim, error) {
	sum := sha256.Sum256([]byte(partition))
	opts := p.r.lockOpts
	opts.Wait = 0 // busy: another replica has it, go on with the rest
	le, err := lock.Acquire(ctx, p.r.locker, p.key+":part:"+hex.EncodeToString(sum[:8]), opts)
	if errors.Is(err, lock.ErrBusy) {
		if p.prog != nil {
			p.prog.elsewhere.Add(1)
		}
		return nil, fmt.Errorf("%w: %w", compact.ErrClaimed, err)
	}
	if err != nil {
		return nil, err
	}
	if p.prog != nil {
		p.prog.claimed.Add(1)
	}
	return le, nil
}

// commitGate takes the table's lease around the commits of a shared
// compaction, waiting up to compact.commit_lease_wait for expiry, orphan
// removal or another replica's commit to end.
type commitGate struct {
	r    *Runner
	key  string
	wait time.Duration
}

func (g commitGate) Enter(ctx context.Context) (context.Context, func(), error) {
	opts := g.r.lockOpts
	opts.Wait = g.wait
	end := waiting.Begin(ctx, "lock: the table's lease for a commit")
	le, err := lock.Acquire(ctx, g.r.locker, g.key, opts)
	end()
	switch {
	case errors.Is(err, lock.ErrBusy):
		g.r.metrics.lock("busy", 0)
		return nil, nil, fmt.Errorf("the table's lease stayed busy for compact.commit_lease_wait (%s): %w", g.wait, err)
	case err != nil:
		g.r.metrics.lock("error", 0)
		return nil, nil, fmt.Errorf("take the table's lease for a commit: %w", err)
	}
	g.r.metrics.lock("acquired", le.Waited())
	return le.Context(), func() {
		if lost := le.Lost(); lost != nil {
			g.r.metrics.lockLost()
		}
		_ = le.Release(context.WithoutCancel(ctx)) // lost: it expires anyway
	}, nil
}

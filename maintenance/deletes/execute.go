package deletes

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/iceberg-maintainer/maintainer/internal/commitconflict"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/turn"
)

// Options carry what Execute needs besides the plan.
type Options struct {
	Logger *slog.Logger
	// RunID tags the snapshot of this run; a new UUID when empty.
	RunID string
	// Head reads the table's head cheaply, so that a retry after a
	// conflict starts right after the other writer's next commit
	// (internal/turn); nil: retries start at once.
	Head turn.HeadReader
	// beforeCommit, for tests, runs before each commit attempt;
	// afterStage between staging the rewrite and sending it.
	beforeCommit func(attempt int)
	afterStage   func()
}

// Result is what a run did.
type Result struct {
	SnapshotID      int64 `json:"snapshot_id,omitempty"`
	FilesRemoved    int   `json:"files_removed"` // delete files removed: merged sources and dangling files
	BytesRemoved    int64 `json:"bytes_removed"`
	DanglingDropped int   `json:"dangling_dropped"`
	FilesWritten    int   `json:"files_written"`
	BytesWritten    int64 `json:"bytes_written"`
	// PositionsRead are the positions of the merged sources; PositionsLeftOut
	// those that applied to no live row (a data file not live, or newer than
	// the delete) or repeated another; PositionsWritten the rest.
	PositionsRead    int64 `json:"positions_read"`
	PositionsWritten int64 `json:"positions_written"`
	PositionsLeftOut int64 `json:"positions_left_out"`
	CommitRetries    int   `json:"commit_retries"`
	// GroupsKept are groups left unmerged, and why: a source names a live
	// data file under another spelling of its location.
	GroupsKept []string `json:"groups_kept,omitempty"`
	// Replanned: a conflict made the run plan again on the new snapshot;
	// the figures are of the plan that landed.
	Replanned bool `json:"replanned,omitempty"`
}

// Why a run failed, for errors.Is.
var (
	// ErrConflict: writers kept committing between plan and commit until
	// the retries ran out.
	ErrConflict = errors.New("concurrent commits kept winning")
	// ErrCommitUnknown: no answer said whether the commit landed, so the
	// merged files stay (they may be live) for the orphan pass.
	ErrCommitUnknown = errors.New("unknown whether the commit landed")
	// ErrMismatch: a merged file read back does not hold exactly the
	// positions kept from its sources; nothing is committed.
	ErrMismatch = errors.New("merged positions mismatch")
)

// TableLoader is what Execute needs of the catalog: a fresh table after a
// conflict, and after an unanswered commit.
type TableLoader interface {
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
}

// Execute writes the plan's merged files and commits them with the drops in
// one snapshot on the planned one. After a conflict it re-loads the table
// and plans again (what the writer did may have changed what is dangling),
// up to cfg.CommitRetries times; a plan that came out empty ends the run.
func Execute(ctx context.Context, cat TableLoader, tbl *table.Table, plan *Plan, cfg Config, opts Options) (*Result, error) {
	res := &Result{}
	if plan.Empty() {
		return res, nil
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RunID == "" {
		opts.RunID = uuid.NewString()
	}
	log := opts.Logger.With("table", strings.Join(tbl.Identifier(), "."), "task", "deletes")
	// The plan's drops and merges hold for the snapshot it read: on any
	// other head (the table given moved on, or was rolled back to where a
	// delete the plan calls dangling still applies) plan again first.
	stale := tbl.CurrentSnapshot() == nil || tbl.CurrentSnapshot().SnapshotID != plan.SnapshotID
	for attempt := 0; ; attempt++ {
		if attempt > 0 || stale {
			stale = false
			fresh, err := cat.LoadTable(ctx, tbl.Identifier())
			if err != nil {
				return res, fmt.Errorf("re-load the table to plan again: %w", err)
			}
			tbl = fresh
			if plan, err = PlanTable(ctx, tbl, cfg); err != nil {
				return res, fmt.Errorf("plan again: %w", err)
			}
			res.Replanned = true
			if plan.Empty() {
				*res = Result{CommitRetries: res.CommitRetries, Replanned: true}
				return res, nil
			}
		}
		if opts.beforeCommit != nil {
			opts.beforeCommit(attempt)
		}
		snap, staged, written, err := attemptOnce(ctx, tbl, plan, opts.RunID, opts.afterStage)
		staged.CommitRetries, staged.Replanned = res.CommitRetries, res.Replanned
		if err == nil {
			*res = staged
			res.SnapshotID = snap
			log.Info("delete files rewritten", "snapshot_id", snap, "removed", res.FilesRemoved, "written", res.FilesWritten)
			return res, nil
		}
		if !definite(err) {
			if id := findOwnSnapshot(ctx, cat, tbl, opts.RunID); id != 0 {
				*res = staged
				res.SnapshotID = id
				return res, nil
			}
			return res, fmt.Errorf("%w: %w (written files kept; the orphan pass removes them if they are not live)", ErrCommitUnknown, err)
		}
		removeFiles(tbl, written, log) // certainly not committed: ours to delete
		if !commitconflict.Is(err) {
			return res, err // nothing was sent
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("stopped after a commit conflict: %w", context.Cause(ctx))
		}
		if attempt >= cfg.CommitRetries {
			return res, fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflict, attempt+1, err)
		}
		res.CommitRetries++
		log.Warn("delete-file rewrite conflicted; re-loading and planning again", "attempt", attempt+1, "err", err)
		if _, ok := turn.Await(ctx, opts.Head, tbl.Identifier(), 0); !ok {
			return res, fmt.Errorf("stopped after a commit conflict: %w", context.Cause(ctx))
		}
	}
}

// errNotSent marks failures before anything reached the catalog.
var errNotSent = errors.New("not committed")

// definite reports whether the commit certainly did not land.
func definite(err error) bool {
	return errors.Is(err, errNotSent) || commitconflict.Is(err)
}

// attemptOnce writes the merged files of plan and commits; it returns the
// figures of the commit it sent and the files it wrote, which the caller
// removes when the commit certainly failed.
func attemptOnce(ctx context.Context, tbl *table.Table, plan *Plan, runID string, afterStage func()) (snap int64, r Result, written []iceberg.DataFile, err error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0, r, nil, fmt.Errorf("%w: open table IO: %w", errNotSent, err)
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return 0, r, nil, fmt.Errorf("%w: the table's IO cannot write files", errNotSent)
	}
	txn := tbl.NewTransaction()
	rw := txn.NewRewrite(iceberg.Properties{
		tableprops.SummaryOperation: "deletes",
		tableprops.SummaryRunID:     runID,
	})
	for i := range plan.Groups {
		g := &plan.Groups[i]
		out, read, err := merge(ctx, wfs, tbl, plan, g)
		if out != nil {
			written = append(written, out)
		}
		if sp := (*otherSpelling)(nil); errors.As(err, &sp) {
			r.GroupsKept = append(r.GroupsKept, fmt.Sprintf("%s: %v", g.Partition, err))
			continue // its sources stay as they are
		}
		if err != nil {
			return 0, r, written, fmt.Errorf("%w: merge position deletes of partition %s: %w", errNotSent, g.Partition, err)
		}
		var seq int64
		for _, s := range g.sources {
			rw.DeleteFile(s.file)
			seq = max(seq, s.seq)
			r.FilesRemoved++
			r.BytesRemoved += s.file.FileSizeBytes()
		}
		r.PositionsRead += int64(len(read))
		if out != nil {
			// The largest of the sources' sequence numbers: each position
			// kept names a data file no newer than its own source, so it
			// applies to exactly the rows it applied to.
			rw.AddDeleteFileWithDataSequenceNumber(out, seq)
			r.FilesWritten++
			r.BytesWritten += out.FileSizeBytes()
			r.PositionsWritten += out.Count()
		}
	}
	r.PositionsLeftOut = r.PositionsRead - r.PositionsWritten
	for _, d := range plan.Dangling {
		rw.DeleteFile(d.file)
		r.FilesRemoved++
		r.DanglingDropped++
		r.BytesRemoved += d.file.FileSizeBytes()
	}
	if err := ctx.Err(); err != nil {
		return 0, r, written, fmt.Errorf("%w: stopped: %w", errNotSent, context.Cause(ctx))
	}
	if r.FilesRemoved == 0 {
		return 0, r, written, nil // every group kept: nothing to commit
	}
	if err := rw.Commit(ctx); err != nil {
		return 0, r, written, fmt.Errorf("%w: stage the rewrite: %w", errNotSent, err)
	}
	if afterStage != nil {
		afterStage()
	}
	// Staging writes manifests and may take long: a lease lost meanwhile
	// stops the run here, before anything reaches the catalog.
	if err := ctx.Err(); err != nil {
		return 0, r, written, fmt.Errorf("%w: stopped: %w", errNotSent, context.Cause(ctx))
	}
	next, err := txn.Commit(ctx)
	if err != nil {
		return 0, r, written, err
	}
	return next.CurrentSnapshot().SnapshotID, r, written, nil
}

// merge reads the sources of g, keeps the positions that applied to a live
// row, and writes them sorted into one new file; none when no position is
// kept. It reads the written file back and checks that it holds exactly
// the positions kept.
func merge(ctx context.Context, fs iceio.WriteFileIO, tbl *table.Table, plan *Plan, g *Group) (iceberg.DataFile, []position, error) {
	var read, kept []position
	for _, s := range g.sources {
		ps, err := readPositions(ctx, fs, s.file)
		if err != nil {
			return nil, read, err
		}
		read = append(read, ps...)
		for _, p := range ps {
			// A position applies to a row of a live data file whose data
			// sequence number is at most the delete's.
			seq, ok := plan.live[p.path]
			if ok && seq <= s.seq {
				kept = append(kept, p)
			}
			if live, other := plan.spelled[locationPath(p.path)]; !ok && other {
				// A reader that compares locations loosely (s3a:// as
				// s3://) may apply it: merged at another sequence number
				// it might apply to other rows, and dropped to fewer.
				return nil, read, &otherSpelling{delete: s.file.FilePath(), named: p.path, live: live}
			}
		}
	}
	slices.SortFunc(kept, comparePositions)
	kept = slices.Compact(kept)
	if len(kept) == 0 {
		return nil, read, nil
	}
	spec := tbl.Metadata().PartitionSpecByID(g.SpecID)
	if spec == nil {
		return nil, read, fmt.Errorf("partition spec %d of the table is gone", g.SpecID)
	}
	data, err := encodePositions(kept)
	if err != nil {
		return nil, read, fmt.Errorf("encode merged positions: %w", err)
	}
	loc, err := tbl.LocationProvider()
	if err != nil {
		return nil, read, fmt.Errorf("location provider: %w", err)
	}
	path := loc.NewDataLocation(fmt.Sprintf("deletes-%s.parquet", uuid.NewString()))
	if err := fs.WriteFile(path, data); err != nil {
		return nil, read, fmt.Errorf("write %s: %w", path, err)
	}
	out, err := positionFile(*spec, g.sources[0].file.Partition(), path, int64(len(data)), kept)
	if err != nil {
		return nil, read, err
	}
	back, err := readPositions(ctx, fs, out)
	if err != nil {
		return out, read, fmt.Errorf("read back: %w", err)
	}
	if !slices.Equal(back, kept) {
		return out, read, fmt.Errorf("%w: %s holds %d positions, %d were kept", ErrMismatch, path, len(back), len(kept))
	}
	return out, read, nil
}

// otherSpelling: a position-delete file names a live data file under
// another spelling of its location.
type otherSpelling struct{ delete, named, live string }

func (e *otherSpelling) Error() string {
	return fmt.Sprintf("%s names %s, which is live data file %s spelled otherwise; not merged", e.delete, e.named, e.live)
}

func removeFiles(tbl *table.Table, files []iceberg.DataFile, log *slog.Logger) {
	if len(files) == 0 {
		return
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		log.Warn("could not open the table IO to remove files this run wrote; the orphan pass will", "err", err)
		return
	}
	for _, df := range files {
		if err := fs.Remove(df.FilePath()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			log.Warn("could not remove a file this run wrote; the orphan pass will", "path", df.FilePath(), "err", err)
		}
	}
}

// findOwnSnapshot re-loads the table and returns the id of the snapshot this
// run committed, or 0.
func findOwnSnapshot(ctx context.Context, cat TableLoader, tbl *table.Table, runID string) int64 {
	fresh, err := cat.LoadTable(context.WithoutCancel(ctx), tbl.Identifier())
	if err != nil {
		return 0
	}
	if s := tableprops.RunSnapshot(fresh.Metadata(), runID, ""); s != nil {
		return s.SnapshotID
	}
	return 0
}

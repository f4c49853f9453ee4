package compact

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Planning holds one scan task per candidate data file until its group is
// rewritten, so what a task holds is what a large partition costs: a data
// file as iceberg-go's planner returns it carries its column statistics
// (sizes, value and null counts, bounds: about 8 KB for 20 columns), which
// compaction never reads. The tasks are planned without them.

// scanTasks lists the live data files of snap as scan tasks without column
// statistics, with the delete files that apply to each. A table with no
// delete manifest, of format v1 or v2, without a row filter, is listed by
// streaming its data manifests with a projection that never decodes the
// statistics (there are no deletes to match, nor row ids to inherit), so
// planning holds at most one entry's statistics at a time; any other goes
// through iceberg-go's planner, whose tasks are then stripped.
func scanTasks(ctx context.Context, tbl *table.Table, snap *table.Snapshot, filter iceberg.BooleanExpression) ([]table.FileScanTask, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, planError(ctx, tbl, snap, err)
	}
	deletes := slices.ContainsFunc(manifests, func(m iceberg.ManifestFile) bool {
		return m.ManifestContent() == iceberg.ManifestContentDeletes
	})
	if deletes || filter != nil || tbl.Metadata().Version() > 2 {
		return plannedTasks(ctx, tbl, snap, filter)
	}
	var tasks []table.FileScanTask
	for _, m := range manifests {
		for e, err := range iceberg.EntriesWithProjection(fs, m, true, iceberg.ManifestEntryProjection{}) {
			if err != nil {
				return nil, planError(ctx, tbl, snap, fmt.Errorf("read manifest %s: %w", m.FilePath(), err))
			}
			df := e.DataFile()
			if df.ContentType() != iceberg.EntryContentData {
				return nil, fmt.Errorf("read manifest %s: data manifest lists %s file %s", m.FilePath(), df.ContentType(), df.FilePath())
			}
			t := table.FileScanTask{File: df, Start: 0, Length: df.FileSizeBytes()}
			if seq := e.SequenceNum(); seq >= 0 {
				t.DataSequenceNumber = &seq
			}
			tasks = append(tasks, t)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return tasks, nil
}

// plannedTasks plans through iceberg-go, which matches delete files to
// data files, and drops the data files' statistics from the tasks. The
// delete files keep theirs: a position delete names its data file by the
// bounds of its file_path column (referencedPath).
func plannedTasks(ctx context.Context, tbl *table.Table, snap *table.Snapshot, filter iceberg.BooleanExpression) ([]table.FileScanTask, error) {
	opts := []table.ScanOption{table.WithSnapshotID(snap.SnapshotID)}
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	tasks, err := tbl.Scan(opts...).PlanFiles(ctx)
	if err != nil {
		return nil, planError(ctx, tbl, snap, err)
	}
	for i := range tasks {
		tasks[i].File = iceberg.DataFileWithoutColumnStats(tasks[i].File)
	}
	return tasks, nil
}

// planError names the file that made planning fail, which iceberg-go's
// errors do not: it reads the manifests again strictly (badManifest).
func planError(ctx context.Context, tbl *table.Table, snap *table.Snapshot, err error) error {
	if bad := badManifest(ctx, tbl, snap); bad != nil {
		return fmt.Errorf("plan files of snapshot %d: %w (iceberg-go: %v)", snap.SnapshotID, bad, err)
	}
	return fmt.Errorf("plan files of snapshot %d: %w", snap.SnapshotID, err)
}

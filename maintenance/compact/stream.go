package compact

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Planning sees every live data file of the snapshot once, as a scan task,
// and keeps what it plans to rewrite packed (fileList). A data file as
// iceberg-go's planner returns it carries its column statistics (sizes,
// value and null counts, bounds: about 8 KB for 20 columns), which
// compaction never reads.

// scanTasks calls visit with each live data file of snap as a scan task,
// with the delete files that apply to it. A table with no delete manifest,
// of format v1 or v2, without a row filter, is listed by streaming its data
// manifests with a projection that never decodes the statistics (there are
// no deletes to match, nor row ids to inherit), so planning holds at most
// one entry's statistics at a time; any other goes through iceberg-go's
// planner, whose tasks are held until the last is visited. visit must not
// keep a task's data file: it is valid only during the call.
func scanTasks(ctx context.Context, tbl *table.Table, snap *table.Snapshot, filter iceberg.BooleanExpression, visit func(table.FileScanTask)) error {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("open table IO: %w", err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return planError(ctx, tbl, snap, err)
	}
	deletes := slices.ContainsFunc(manifests, func(m iceberg.ManifestFile) bool {
		return m.ManifestContent() == iceberg.ManifestContentDeletes
	})
	if deletes || filter != nil || tbl.Metadata().Version() > 2 {
		return plannedTasks(ctx, tbl, snap, filter, visit)
	}
	for _, m := range manifests {
		for e, err := range iceberg.EntriesWithProjection(fs, m, true, iceberg.ManifestEntryProjection{}) {
			if err != nil {
				return planError(ctx, tbl, snap, fmt.Errorf("read manifest %s: %w", m.FilePath(), err))
			}
			df := e.DataFile()
			if df.ContentType() != iceberg.EntryContentData {
				return fmt.Errorf("read manifest %s: data manifest lists %s file %s", m.FilePath(), df.ContentType(), df.FilePath())
			}
			t := table.FileScanTask{File: df, Start: 0, Length: df.FileSizeBytes()}
			if seq := e.SequenceNum(); seq >= 0 {
				t.DataSequenceNumber = &seq
			}
			visit(t)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// plannedTasks plans through iceberg-go, which matches delete files to
// data files, and visits its tasks. The delete files keep their
// statistics: a position delete names its data file by the bounds of its
// file_path column (referencedPath).
func plannedTasks(ctx context.Context, tbl *table.Table, snap *table.Snapshot, filter iceberg.BooleanExpression, visit func(table.FileScanTask)) error {
	opts := []table.ScanOption{table.WithSnapshotID(snap.SnapshotID)}
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	tasks, err := tbl.Scan(opts...).PlanFiles(ctx)
	if err != nil {
		return planError(ctx, tbl, snap, err)
	}
	for i := range tasks {
		visit(tasks[i])
		tasks[i] = table.FileScanTask{} // its statistics can go
	}
	return ctx.Err()
}

// planError names the file that made planning fail, which iceberg-go's
// errors do not: it reads the manifests again strictly (badManifest).
func planError(ctx context.Context, tbl *table.Table, snap *table.Snapshot, err error) error {
	if bad := badManifest(ctx, tbl, snap); bad != nil {
		return fmt.Errorf("plan files of snapshot %d: %w (iceberg-go: %v)", snap.SnapshotID, bad, err)
	}
	return fmt.Errorf("plan files of snapshot %d: %w", snap.SnapshotID, err)
}

// slimFile is a data file as a fileList hands it out: what the rewrite
// paths and the commit read of it, without column statistics. Its
// partition map is the list's, shared by every file of it.
type slimFile struct {
	path       string
	format     iceberg.FileFormat
	partition  map[int]any // shared: never modified
	count      int64
	size       int64
	specID     int32
	sortOrder  *int
	firstRowID *int64 // v3 row lineage: the rows' ids are inherited from it
	splits     []int64
	key        []byte
}

func (f *slimFile) ContentType() iceberg.ManifestEntryContent { return iceberg.EntryContentData }
func (f *slimFile) FilePath() string                          { return f.path }
func (f *slimFile) FileFormat() iceberg.FileFormat            { return f.format }
func (f *slimFile) Partition() map[int]any                    { return f.partition }
func (f *slimFile) Count() int64                              { return f.count }
func (f *slimFile) FileSizeBytes() int64                      { return f.size }
func (f *slimFile) ColumnSizes() map[int]int64                { return nil }
func (f *slimFile) ValueCounts() map[int]int64                { return nil }
func (f *slimFile) NullValueCounts() map[int]int64            { return nil }
func (f *slimFile) NaNValueCounts() map[int]int64             { return nil }
func (f *slimFile) DistinctValueCounts() map[int]int64        { return nil }
func (f *slimFile) LowerBoundValues() map[int][]byte          { return nil }
func (f *slimFile) UpperBoundValues() map[int][]byte          { return nil }
func (f *slimFile) KeyMetadata() []byte                       { return f.key }
func (f *slimFile) SplitOffsets() []int64                     { return f.splits }
func (f *slimFile) EqualityFieldIDs() []int                   { return nil }
func (f *slimFile) SortOrderID() *int                         { return f.sortOrder }
func (f *slimFile) SpecID() int32                             { return f.specID }
func (f *slimFile) FirstRowID() *int64                        { return f.firstRowID }
func (f *slimFile) ReferencedDataFile() *string               { return nil }
func (f *slimFile) ContentOffset() *int64                     { return nil }
func (f *slimFile) ContentSizeInBytes() *int64                { return nil }

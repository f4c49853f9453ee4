package compact

import (
	"context"
	"fmt"
	"maps"
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
	parts := partitions{}
	for _, m := range manifests {
		for e, err := range iceberg.EntriesWithProjection(fs, m, true, iceberg.ManifestEntryProjection{}) {
			if err != nil {
				return nil, planError(ctx, tbl, snap, fmt.Errorf("read manifest %s: %w", m.FilePath(), err))
			}
			df := e.DataFile()
			if df.ContentType() != iceberg.EntryContentData {
				return nil, fmt.Errorf("read manifest %s: data manifest lists %s file %s", m.FilePath(), df.ContentType(), df.FilePath())
			}
			t := table.FileScanTask{File: parts.slim(df), Start: 0, Length: df.FileSizeBytes()}
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
// data files, and slims the data files of the tasks. The
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
	parts := partitions{}
	for i := range tasks {
		tasks[i].File = parts.slim(tasks[i].File)
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

// slimFile is a candidate data file as compaction holds it from the plan to
// the commit: what the rewrite paths and the commit read of it. iceberg-go's
// data file without its statistics still takes about 1.3 KB (two partition
// maps, name and type maps, decoding state), so 80,000 of them held a
// hundred MB alive through the run; this takes the path and a few words,
// and the files of one partition share one partition map.
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

// partitions hands out one partition map per partition.
type partitions map[string]map[int]any

// slim returns df as a slimFile; a delete file is returned as it is.
func (p partitions) slim(df iceberg.DataFile) iceberg.DataFile {
	if df.ContentType() != iceberg.EntryContentData {
		return df
	}
	part := df.Partition()
	key := partitionKey(df.SpecID(), part)
	shared, ok := p[key]
	if !ok {
		shared = maps.Clone(part)
		p[key] = shared
	}
	return &slimFile{path: df.FilePath(), format: df.FileFormat(), partition: shared, count: df.Count(),
		size: df.FileSizeBytes(), specID: df.SpecID(), sortOrder: df.SortOrderID(), firstRowID: df.FirstRowID(),
		splits: df.SplitOffsets(), key: df.KeyMetadata()}
}

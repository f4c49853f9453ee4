package gen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
)

// SummaryAppendIndex is the snapshot summary property holding the append
// index of every generated append.
const SummaryAppendIndex = "gen.append-index"

// Defaults applied by [Options] zero values.
const (
	DefaultNamespace     = "demo"
	DefaultTable         = "events"
	DefaultRowsPerAppend = 2000
	DefaultFormatVersion = 2
)

// DefaultStart is the first event day when Options.Start is zero.
var DefaultStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Options describes a generated table.
type Options struct {
	Namespace, Table string // default "demo"."events"
	// Appends is the number of separate commits; each appends exactly one
	// data file to one partition (round-robin over the days).
	Appends int
	// RowsPerAppend is the number of rows of each data file (default 2000).
	RowsPerAppend int
	// Partitions is the number of day partitions: the events of append i are
	// on day Start + i%Partitions. 0 means an unpartitioned table whose
	// events are all on day Start.
	Partitions int
	// Start is the first event day (UTC); default 2024-01-01.
	Start time.Time
	// Seed makes the data deterministic: append i always has the same rows
	// for a given (Seed, Start, Partitions, RowsPerAppend).
	Seed int64
	// Properties are extra table properties, e.g. write.target-file-size-bytes.
	Properties map[string]string
	// FormatVersion is the table format version (default 2).
	FormatVersion int
	// Workers is the number of goroutines generating and writing data files
	// ahead of the (sequential) commits; default GOMAXPROCS.
	Workers int
	// FilesPerCommit commits this many appends' files in one snapshot
	// (default 1: a commit each). Tables of tens of thousands of files are
	// generated this way: a commit each would rewrite metadata listing
	// every earlier snapshot every time.
	FilesPerCommit int
}

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.RowsPerAppend <= 0 {
		o.RowsPerAppend = DefaultRowsPerAppend
	}
	if o.Start.IsZero() {
		o.Start = DefaultStart
	}
	if o.FormatVersion == 0 {
		o.FormatVersion = DefaultFormatVersion
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.FilesPerCommit <= 0 {
		o.FilesPerCommit = 1
	}

	return o
}

// Identifier returns the table identifier {Namespace, Table}.
func (o Options) Identifier() table.Identifier {
	o = o.withDefaults()

	return table.Identifier{o.Namespace, o.Table}
}

// PartitionSpec returns the spec of the generated table: day(event_time) when
// partitions > 0, unpartitioned otherwise.
func PartitionSpec(partitions int) (iceberg.PartitionSpec, error) {
	if partitions <= 0 {
		return *iceberg.UnpartitionedSpec, nil
	}

	return iceberg.NewPartitionSpecOpts(
		iceberg.AddPartitionFieldBySourceID(2, PartitionFieldName, iceberg.DayTransform{}, Schema(), nil))
}

// Create creates the table (namespace included, if missing) with [Schema],
// partitioned by day(event_time) when opt.Partitions > 0, and performs
// opt.Appends single-file appends (append indexes 0..Appends-1). It returns
// the loaded table. It fails if the table already exists.
func Create(ctx context.Context, cat catalog.Catalog, opt Options) (*table.Table, error) {
	opt = opt.withDefaults()
	ns := table.Identifier{opt.Namespace}
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("gen: create namespace %s: %w", opt.Namespace, err)
	}

	spec, err := PartitionSpec(opt.Partitions)
	if err != nil {
		return nil, err
	}
	props := iceberg.Properties{table.PropertyFormatVersion: strconv.Itoa(opt.FormatVersion)}
	maps.Copy(props, opt.Properties)

	tbl, err := cat.CreateTable(ctx, opt.Identifier(), Schema(),
		catalog.WithPartitionSpec(&spec), catalog.WithProperties(props))
	if err != nil {
		return nil, fmt.Errorf("gen: create table %v: %w", opt.Identifier(), err)
	}

	return Append(ctx, tbl, opt, opt.Appends, 0)
}

// Append performs n more single-file appends (append indexes from ..
// from+n-1) to an existing generated table, one commit each, and returns the
// table as of the last commit. Using the same Options (Seed, Start,
// Partitions, RowsPerAppend) as [Create] and from = number of appends done so
// far continues the same data set with fresh, unique event_ids.
//
// Data files are generated and written by opt.Workers goroutines ahead of the
// commits, which happen sequentially in append order. A commit rejected
// because another writer committed first (table.ErrCommitFailed) is retried
// on the refreshed table without rewriting the data file, so Append can play
// the role of a concurrent writer. On error, data files written but
// certainly not committed are deleted.
func Append(ctx context.Context, tbl *table.Table, opt Options, n, from int) (*table.Table, error) {
	opt = opt.withDefaults()
	if n <= 0 {
		return tbl, nil
	}
	if from < 0 {
		return nil, fmt.Errorf("gen: negative append index %d", from)
	}

	if err := checkSchema(tbl.Schema()); err != nil {
		return nil, err
	}
	arrowSc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("gen: arrow schema: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type result struct {
		files []iceberg.DataFile
		err   error
	}
	type job struct {
		idx int
		out chan result
	}

	writer := *tbl // spec/schema/properties only; never committed through
	jobs := make(chan job)
	// pending bounds how many appends are generated ahead of the commits.
	pending := make(chan chan result, 2*opt.Workers)
	for range opt.Workers {
		go func() {
			for j := range jobs {
				files, err := writeAppend(ctx, &writer, arrowSc, &opt, j.idx)
				j.out <- result{files, err}
			}
		}()
	}
	go func() {
		defer close(jobs)
		defer close(pending)
		for i := from; i < from+n; i++ {
			out := make(chan result, 1)
			select {
			case pending <- out:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- job{i, out}:
			case <-ctx.Done():
				out <- result{err: ctx.Err()}

				return
			}
		}
	}()

	var firstErr error
	idx, sinceReload := from, 0
	var batch []iceberg.DataFile // appends written, not committed yet
	for out := range pending {
		// Every queued append yields exactly one result, even after a
		// cancellation, so that no written file goes unaccounted.
		res := <-out
		if firstErr != nil || res.err != nil {
			if firstErr == nil {
				firstErr = res.err
				cancel()
			}
			removeFiles(&writer, res.files)
			removeFiles(&writer, batch)
			batch = nil

			continue
		}
		batch = append(batch, res.files...)
		if idx++; (idx-from)%opt.FilesPerCommit != 0 && idx < from+n {
			continue
		}
		// The snapshot records the batch's last append index.
		next, err := commitAppend(ctx, tbl, &opt, idx-1, batch)
		if err != nil {
			firstErr = fmt.Errorf("gen: commit append %d: %w", idx-1, err)
			cancel()
			if isConflict(err) {
				// Definitely not committed. Other errors may leave the
				// commit state unknown: keep the file then.
				removeFiles(&writer, batch)
			}
			batch = nil

			continue
		}
		batch = nil
		tbl = next
		if sinceReload++; sinceReload >= reloadEvery && idx < from+n {
			// Work around iceberg-go retaining every previous metadata
			// generation from a table returned by Commit (memory grows
			// quadratically with the number of commits): reload the table
			// from the catalog now and then.
			sinceReload = 0
			fresh := *tbl
			if err := fresh.Refresh(ctx); err != nil {
				firstErr = fmt.Errorf("gen: reload table: %w", err)
				cancel()

				continue
			}
			tbl = &fresh
		}
	}
	if firstErr != nil {
		return tbl, firstErr
	}

	return tbl, nil
}

// checkSchema verifies that sc is [Schema] up to field IDs.
func checkSchema(sc *iceberg.Schema) error {
	want, err := table.SchemaToArrowSchema(Schema(), nil, false, false)
	if err != nil {
		return err
	}
	got, err := table.SchemaToArrowSchema(sc, nil, false, false)
	if err != nil {
		return err
	}
	if !got.Equal(want) {
		return fmt.Errorf("gen: table schema is not the generator's schema:\n%s", sc)
	}

	return nil
}

// NextAppendIndex returns 1 + the highest append index recorded in the
// snapshot summaries of tbl (0 if there is none): the from argument that
// continues a generated table with fresh event_ids. Two writers appending
// concurrently must use disjoint ranges.
func NextAppendIndex(tbl *table.Table) int {
	next := 0
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary == nil {
			continue
		}
		if v, err := strconv.Atoi(s.Summary.Properties[SummaryAppendIndex]); err == nil {
			next = max(next, v+1)
		}
	}

	return next
}

// writeAppend writes the data file of append idx (not committed).
func writeAppend(ctx context.Context, tbl *table.Table, sc *arrow.Schema, opt *Options, idx int) ([]iceberg.DataFile, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec := buildBatch(memory.DefaultAllocator, sc, opt, idx, opt.RowsPerAppend)
	// A single record batch per write: iceberg-go only rolls to a new file
	// between batches, so this yields exactly one file per partition
	// whatever write.target-file-size-bytes is.
	recs := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }

	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, sc, recs) {
		if err != nil {
			removeFiles(tbl, files)

			return nil, fmt.Errorf("gen: write append %d: %w", idx, err)
		}
		files = append(files, df)
	}
	if len(files) != 1 {
		removeFiles(tbl, files)

		return nil, fmt.Errorf("gen: append %d produced %d data files, want 1", idx, len(files))
	}

	return files, nil
}

const (
	maxCommitAttempts = 50
	reloadEvery       = 16
)

// commitAppend commits files as one append snapshot, retrying on conflicts
// with other writers.
func commitAppend(ctx context.Context, tbl *table.Table, opt *Options, idx int, files []iceberg.DataFile) (*table.Table, error) {
	props := iceberg.Properties{SummaryAppendIndex: strconv.Itoa(idx)}
	backoff := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		next, err := tryCommitAppend(ctx, tbl, files, props)
		if err == nil {
			return next, nil
		}
		if !isConflict(err) || attempt >= maxCommitAttempts {
			return tbl, err
		}
		select {
		case <-ctx.Done():
			return tbl, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
		fresh := *tbl
		if rerr := fresh.Refresh(ctx); rerr != nil {
			return tbl, errors.Join(err, rerr)
		}
		tbl = &fresh
	}
}

func tryCommitAppend(ctx context.Context, tbl *table.Table, files []iceberg.DataFile, props iceberg.Properties) (*table.Table, error) {
	if tbl.Metadata().Version() >= 3 {
		// AddDataFiles insists on an explicit first_row_id on v3 tables.
		var err error
		if files, err = withFirstRowIDs(tbl, files); err != nil {
			return nil, err
		}
	}
	txn := tbl.NewTransaction()
	if err := txn.AddDataFiles(ctx, files, props, table.WithoutDuplicateCheck(), table.WithoutAutoNameMapping()); err != nil {
		return nil, err
	}

	return txn.Commit(ctx)
}

// isConflict reports whether a commit failed because the table changed
// underneath: the SQL catalog wraps a lost compare-and-swap in
// table.ErrCommitFailed but returns requirement failures (e.g. "branch main
// has changed") as plain errors.
func isConflict(err error) bool {
	if errors.Is(err, table.ErrCommitFailed) {
		return true
	}
	msg := err.Error()

	return strings.Contains(msg, "requirement failed") || strings.Contains(msg, "database is locked")
}

// withFirstRowIDs returns copies of files with first_row_id assigned from the
// table's next-row-id, as row-lineage inheritance would.
func withFirstRowIDs(tbl *table.Table, files []iceberg.DataFile) ([]iceberg.DataFile, error) {
	spec := tbl.Spec()
	logical := map[int]string{}
	for _, f := range spec.Fields() {
		if _, ok := f.Transform.(iceberg.DayTransform); ok {
			logical[f.FieldID] = "date"
		}
	}
	next := tbl.Metadata().NextRowID()
	out := make([]iceberg.DataFile, len(files))
	for i, df := range files {
		b, err := iceberg.NewDataFileBuilder(spec, df.ContentType(), df.FilePath(), df.FileFormat(),
			df.Partition(), logical, nil, df.Count(), df.FileSizeBytes())
		if err != nil {
			return nil, err
		}
		b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
			NaNValueCounts(df.NaNValueCounts()).LowerBoundValues(df.LowerBoundValues()).
			UpperBoundValues(df.UpperBoundValues()).SplitOffsets(df.SplitOffsets())
		if id := df.SortOrderID(); id != nil {
			b.SortOrderID(*id)
		}
		b.FirstRowID(next)
		next += df.Count()
		out[i] = b.Build()
	}

	return out, nil
}

func removeFiles(tbl *table.Table, files []iceberg.DataFile) {
	if len(files) == 0 {
		return
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		return
	}
	rm, ok := fs.(interface{ Remove(string) error })
	if !ok {
		return
	}
	for _, f := range files {
		_ = rm.Remove(f.FilePath())
	}
}

// CreateWarehouseForBenchmark creates, under dir, a SQLite catalog
// (dir/catalog.db, catalog name "bench") with a local warehouse
// (dir/warehouse) and a generated table described by opt. The caller closes
// the catalog.
func CreateWarehouseForBenchmark(ctx context.Context, dir string, opt Options) (*sqlcat.Catalog, *table.Table, error) {
	cat, err := OpenSQLiteCatalog(ctx, "bench", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err != nil {
		return nil, nil, err
	}
	tbl, err := Create(ctx, cat, opt)
	if err != nil {
		_ = cat.Close()

		return nil, nil, err
	}

	return cat, tbl, nil
}

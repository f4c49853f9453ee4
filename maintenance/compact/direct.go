package compact

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// The direct path rewrites a group that needs nothing but its rows moved:
// Parquet files of the current schema and partition spec with no deletes
// to apply, in a table whose writer does nothing but encode (format v1 or
// v2, no sort order, Parquet properties it reads exactly as iceberg-go
// does). pqarrow reads each input and one pqarrow writer, configured as
// iceberg-go's, writes the output; the data files are built from the
// written footers. That skips iceberg-go's scan and writer pipelines (delete
// application, schema projection, re-batching, channels between goroutines)
// and the garbage they make. Every other group goes through iceberg-go.

// directTable is what the direct path needs of a table, prepared once per run.
type directTable struct {
	out       *parquetOutput
	meta      table.Metadata
	spec      iceberg.PartitionSpec
	mem       memory.Allocator
	writeUUID uuid.UUID
	files     atomic.Int64
}

// newDirectTable prepares the direct path for tbl, or says why the table
// cannot take it.
func newDirectTable(tbl *table.Table) (*directTable, string) {
	meta := tbl.Metadata()
	props := meta.Properties()
	switch {
	case meta.Version() > 2:
		return nil, fmt.Sprintf("format version %d", meta.Version())
	case !strings.EqualFold(props.Get(table.WriteFormatDefaultKey, "parquet"), "parquet"):
		return nil, "write format " + props[table.WriteFormatDefaultKey]
	case meta.DefaultSortOrder() != table.UnsortedSortOrderID:
		return nil, "the table has a sort order"
	}
	sc := meta.CurrentSchema()
	if sanitized, err := iceberg.SanitizeColumnNames(sc); err != nil || !sanitized.Equals(sc) {
		return nil, "column names need sanitizing"
	}
	spec := meta.PartitionSpec()
	mem := memory.NewGoAllocator()
	out, why := parquetOutputFor(sc, props, mem)
	if out == nil {
		return nil, why
	}
	return &directTable{out: out, meta: meta, spec: spec, mem: mem, writeUUID: uuid.New()}, ""
}

// directGroup says why group g cannot take the direct path, or "".
func (d *directTable) groupReason(g *Group) string {
	if g.SpecID != d.spec.ID() {
		return fmt.Sprintf("files of partition spec %d", g.SpecID)
	}
	for _, t := range g.tasks {
		switch {
		case t.File.FileFormat() != iceberg.ParquetFile:
			return fmt.Sprintf("%s file %s", t.File.FileFormat(), t.File.FilePath())
		case len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles) > 0:
			return "deletes to apply"
		case t.Start != 0 || (t.Length != 0 && t.Length != t.File.FileSizeBytes()):
			return "a split file"
		}
	}
	return ""
}

// errOtherColumns: an input file does not hold the table's current columns
// exactly as the output will; the group goes through iceberg-go instead.
type errOtherColumns struct{ why string }

func (e *errOtherColumns) Error() string { return e.why }

// schemaReason says why a file read by fr does not hold the table's current
// columns exactly as the output will, or "".
func (d *directTable) schemaReason(path string, fr *pqarrow.FileReader) (string, error) {
	if !sameParquetSchema(fr.ParquetReader().MetaData().Schema, d.out.parquet) {
		return "file " + path + " has other columns than the current schema", nil
	}
	asc, err := fr.Schema()
	if err != nil {
		return "", err
	}
	if !sameArrowTypes(asc, d.out.arrow) {
		return "file " + path + " reads as other Arrow types", nil
	}
	return "", nil
}

// open opens one input file for reading batches of batchRows rows.
func (d *directTable) open(fs iceio.IO, path string, batchRows int, fn func(*pqarrow.FileReader) error) error {
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f, file.WithReadProps(parquet.NewReaderProperties(d.mem)))
	if err != nil {
		return fmt.Errorf("read footer of %s: %w", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, d.mem)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return fn(fr)
}

func sameArrowTypes(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// rewriteDirect streams the group's files into new files of about the
// target size, counting the rows read. It returns the files written, also
// on error, so that the caller can remove them.
func (e *executor) rewriteDirect(ctx context.Context, d *directTable, g *Group) (files []iceberg.DataFile, rowsRead int64, err error) {
	w := &directWriter{d: d, fs: e.fs, g: g, target: e.plan.TargetFileSize, ctx: ctx}
	defer func() {
		if cerr := w.abort(); err == nil && cerr != nil {
			err = cerr
		}
		files = w.files
	}()
	n := 0
	for i, t := range g.tasks {
		if err := ctx.Err(); err != nil {
			return nil, rowsRead, context.Cause(ctx)
		}
		err := d.open(e.fs, t.File.FilePath(), e.opts.ArrowBatchRows, func(fr *pqarrow.FileReader) error {
			// Checked as each file is opened, not in a pass of its own, so
			// that no footer is read twice; a mismatch is rare (a schema
			// change) and typically shows at the first file of a group.
			why, err := d.schemaReason(t.File.FilePath(), fr)
			if err != nil {
				return err
			}
			if e.opts.otherColumns != nil && e.opts.otherColumns(i) {
				why = "file " + t.File.FilePath() + " has other columns (test)"
			}
			if why != "" {
				return &errOtherColumns{why: why}
			}
			rr, err := fr.GetRecordReader(ctx, nil, nil)
			if err != nil {
				return err
			}
			defer rr.Release()
			for rr.Next() {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				rec := rr.RecordBatch()
				rowsRead += rec.NumRows()
				if n++; e.opts.dropBatch != nil && e.opts.dropBatch(n) {
					continue
				}
				// Same columns and types (checked): only the field metadata
				// the reader restored may differ from the output schema's.
				out := array.NewRecordBatch(d.out.arrow, rec.Columns(), rec.NumRows())
				err := w.write(out)
				out.Release()
				if err != nil {
					return err
				}
			}
			if err := rr.Err(); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return ctx.Err()
		})
		if other := (*errOtherColumns)(nil); errors.As(err, &other) {
			return nil, rowsRead, err
		}
		if err != nil {
			return nil, rowsRead, fmt.Errorf("rewrite %s: %w", t.File.FilePath(), err)
		}
	}
	if err := w.close(); err != nil {
		return nil, rowsRead, err
	}
	return w.files, rowsRead, nil
}

// directWriter writes one group's rows into files that roll over at the
// target size, with row groups cut at write.parquet.row-group-size-bytes:
// the rules of iceberg-go's rolling writer.
type directWriter struct {
	ctx    context.Context
	d      *directTable
	fs     iceio.IO
	g      *Group
	target int64

	path    string
	sink    iceio.FileWriter
	counter *countingWriter
	fw      *pqarrow.FileWriter
	files   []iceberg.DataFile
}

type countingWriter struct {
	w iceio.FileWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (w *directWriter) write(rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	if w.fw == nil {
		if err := w.open(); err != nil {
			return err
		}
	} else if w.fw.RowGroupTotalBytesWritten() >= w.d.out.rowGroupBytes {
		if err := w.fw.NewBufferedRowGroupChecked(); err != nil {
			return fmt.Errorf("start a row group in %s: %w", w.path, err)
		}
	}
	if err := w.fw.WriteBuffered(rec); err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	if w.counter.n >= w.target {
		return w.close()
	}
	return nil
}

func (w *directWriter) open() error {
	wfs, ok := w.fs.(iceio.WriteFileIO)
	if !ok {
		return errors.New("the table's file IO cannot write")
	}
	path, err := w.d.newPath(w.g)
	if err != nil {
		return err
	}
	sink, err := wfs.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	w.path, w.sink, w.counter = path, sink, &countingWriter{w: sink}
	fw, err := pqarrow.NewFileWriter(w.d.out.arrow, w.counter, parquet.NewWriterProperties(w.d.out.writer...), w.d.out.arrowWriter)
	if err != nil {
		w.abort()
		return fmt.Errorf("start %s: %w", path, err)
	}
	w.fw = fw
	return nil
}

// close finishes the open file and records it as a data file.
func (w *directWriter) close() error {
	if w.fw == nil {
		return nil
	}
	err := w.fw.Close()
	if cerr := w.sink.Close(); err == nil {
		err = cerr
	}
	path := w.path
	w.fw, w.sink, w.path = nil, nil, ""
	if err != nil {
		_ = w.fs.Remove(path)
		return fmt.Errorf("finish %s: %w", path, err)
	}
	df, err := w.d.dataFile(w.ctx, w.fs, path, w.g)
	if err != nil {
		_ = w.fs.Remove(path)
		return err
	}
	w.files = append(w.files, df)
	return nil
}

// abort drops a file still open after a failure.
func (w *directWriter) abort() error {
	if w.sink == nil {
		return nil
	}
	_ = w.sink.Close()
	err := w.fs.Remove(w.path)
	w.fw, w.sink, w.path = nil, nil, ""
	return err
}

// newPath names an output file as iceberg-go's writer does: the table's
// location provider, under data/<partition path> for a partitioned table.
func (d *directTable) newPath(g *Group) (string, error) {
	n := d.files.Add(1)
	name := fmt.Sprintf("%05d-%d-%s-%05d.parquet", 0, n, d.writeUUID, 1)
	props := d.meta.Properties()
	if part := partitionPath(d.spec, d.meta.CurrentSchema(), g.tasks[0].File.Partition()); part != "" {
		root, err := url.Parse(d.meta.Location())
		if err != nil {
			return "", fmt.Errorf("table location %q: %w", d.meta.Location(), err)
		}
		props = maps.Clone(props)
		props[table.WriteDataPathKey] = root.JoinPath("data", part).String()
	}
	loc, err := table.LoadLocationProvider(d.meta.Location(), props)
	if err != nil {
		return "", fmt.Errorf("location provider: %w", err)
	}
	return loc.NewDataLocation(name), nil
}

type partitionRecord []any

func (r partitionRecord) Size() int        { return len(r) }
func (r partitionRecord) Get(i int) any    { return r[i] }
func (r partitionRecord) Set(i int, v any) { r[i] = v }

func partitionPath(spec iceberg.PartitionSpec, sc *iceberg.Schema, values map[int]any) string {
	if spec.IsUnpartitioned() {
		return ""
	}
	var rec partitionRecord
	for _, f := range spec.Fields() {
		rec = append(rec, values[f.FieldID])
	}
	return spec.PartitionToPath(rec, sc)
}

// dataFile builds the data file of a written file from its footer, with
// the group's partition (one partition of the current spec: all inputs
// share it) rather than one inferred from column bounds, which only some
// transforms allow.
func (d *directTable) dataFile(ctx context.Context, fs iceio.IO, path string, g *Group) (iceberg.DataFile, error) {
	sc := d.meta.CurrentSchema()
	stats, err := table.FileToDataFile(ctx, fs, path, sc, *iceberg.UnpartitionedSpec, table.UnsortedSortOrderID, d.meta.Properties())
	if err != nil {
		return nil, fmt.Errorf("read back %s: %w", path, err)
	}
	part := map[int]any{}
	logical := map[int]string{}
	for _, f := range d.spec.Fields() {
		part[f.FieldID] = g.tasks[0].File.Partition()[f.FieldID]
		if src, ok := sc.FindFieldByID(f.SourceID()); ok {
			if lt := avroLogicalType(f.Transform.ResultType(src.Type)); lt != "" {
				logical[f.FieldID] = lt
			}
		}
	}
	b, err := iceberg.NewDataFileBuilder(d.spec, iceberg.EntryContentData, path, iceberg.ParquetFile,
		part, logical, nil, stats.Count(), stats.FileSizeBytes())
	if err != nil {
		return nil, fmt.Errorf("data file for %s: %w", path, err)
	}
	b.ColumnSizes(stats.ColumnSizes()).ValueCounts(stats.ValueCounts()).NullValueCounts(stats.NullValueCounts()).
		NaNValueCounts(stats.NaNValueCounts()).LowerBoundValues(stats.LowerBoundValues()).
		UpperBoundValues(stats.UpperBoundValues()).SplitOffsets(stats.SplitOffsets())
	return b.Build(), nil
}

// avroLogicalType is the logical type a partition value of type t carries
// in manifests, as iceberg-go's writer sets it.
func avroLogicalType(t iceberg.Type) string {
	switch t.(type) {
	case iceberg.DateType:
		return "date"
	case iceberg.TimeType:
		return "time-micros"
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return "timestamp-micros"
	case iceberg.DecimalType:
		return "decimal"
	case iceberg.UUIDType:
		return "uuid"
	}
	return ""
}

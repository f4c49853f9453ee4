package compact

import (
	"context"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Sort-preserving compaction. When a plan has a sort order (planSort), the
// sort path takes every group before the others: it is iceberg-go's path
// (scanRewriter: deletes applied, old files projected) with the group's
// rows sorted between the scan and the writer. The rows are gathered, as
// decoded Arrow batches, up to the sort's memory budget, sorted by their
// keys (the columns, or their transformed values: sortkeys.go), and
// written; a group holding more is sorted as several sort groups one after
// another, and a file never holds rows of two of them, so every file is
// sorted across all its rows. The splitter still cuts files at the target
// size within a sort group; its last file ends with it.

// SortOrder is the order the plan writes each file in, in Spark's syntax,
// and where it comes from; "" when the files are bin-packed.
func (p *Plan) SortOrder() string {
	if p.sort == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s)", p.sort, p.sort.source)
}

// withSortPath puts the sort path before paths when the plan has a sort
// order: it takes every group then, and the direct paths, which write rows
// in the order they read them, none.
func withSortPath(plan *Plan, paths []rewritePath) []rewritePath {
	if plan.sort == nil {
		return paths
	}
	return append([]rewritePath{sortPath}, paths...)
}

// sortPath is the sort path: it declines every group of a plan without a
// sort order.
func sortPath(env *pathEnv) rewriter {
	if env.sort == nil {
		return declining{path: "sort", why: "the table has no sort order and the strategy is binpack"}
	}
	sr := scanPath(env)
	s, ok := sr.(*scanRewriter)
	if !ok {
		if f, isFailing := sr.(failing); isFailing {
			return failing{path: "sort", err: f.err}
		}
		return sr
	}
	view, err := unsortedView(s.tbl)
	if err != nil {
		return failing{path: "sort", err: err}
	}
	s.tbl, s.sort = view, env.sort
	return s
}

// unsortedView is tbl as its writer sees it: the same metadata with no
// default sort order. The rows reach the writer sorted; with the table's
// order iceberg-go's writer sorts each batch again by the order's source
// columns, which undoes an order by a transform (bucket, truncate, days)
// or its ties broken by the next key.
func unsortedView(tbl *table.Table) (*table.Table, error) {
	meta := tbl.Metadata()
	if meta.DefaultSortOrder() == table.UnsortedSortOrderID {
		return tbl, nil
	}
	b, err := table.MetadataBuilderFromBase(meta, tbl.MetadataLocation())
	if err != nil {
		return nil, fmt.Errorf("table metadata without its sort order: %w", err)
	}
	unsorted := table.UnsortedSortOrder
	if err := b.AddSortOrder(&unsorted); err != nil {
		return nil, fmt.Errorf("table metadata without its sort order: %w", err)
	}
	if err := b.SetDefaultSortOrderID(table.UnsortedSortOrderID); err != nil {
		return nil, fmt.Errorf("table metadata without its sort order: %w", err)
	}
	view, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("table metadata without its sort order: %w", err)
	}
	return table.New(tbl.Identifier(), view, tbl.MetadataLocation(), tbl.FS, nil), nil
}

// failing is a path that fails every group with err.
type failing struct {
	path string
	err  error
}

func (f failing) name() string { return f.path }
func (f failing) rewrite(context.Context, *groupInput) ([]iceberg.DataFile, int64, error) {
	return nil, 0, f.err
}

// declining is a path that declines every group.
type declining struct{ path, why string }

func (d declining) name() string { return d.path }
func (d declining) rewrite(context.Context, *groupInput) ([]iceberg.DataFile, int64, error) {
	return nil, 0, &declined{why: d.why}
}

// sortedStream is the sort between a group's scan and its writer.
type sortedStream struct {
	spec      *sortSpec
	batchRows int64
	// first is the first batch of the sort group being written: the file
	// open when it comes ends before it.
	first arrow.RecordBatch
	// groups counts the sort groups written.
	groups int
}

func (s *sortSpec) stream(batchRows int) *sortedStream {
	return &sortedStream{spec: s, batchRows: int64(max(batchRows, 1))}
}

// startsGroup says whether rec is the first batch of a sort group.
func (st *sortedStream) startsGroup(rec arrow.RecordBatch) bool {
	return st.first != nil && rec == st.first
}

// sorted yields the rows of in sorted, sort group by sort group: batches
// are gathered until their decoded size, with their transformed keys
// (keyBytes), reaches the budget, then sorted together and yielded in
// batches of batchRows. The batches it yields are the receiver's to
// release.
func (st *sortedStream) sorted(ctx context.Context, in iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		var buf []arrow.RecordBatch
		var size int64
		defer func() {
			for _, r := range buf {
				r.Release()
			}
		}()
		flush := func() bool {
			if len(buf) == 0 {
				return true
			}
			ok := st.emit(ctx, buf, yield)
			for _, r := range buf {
				r.Release()
			}
			buf, size = buf[:0], 0
			return ok
		}
		for rec, err := range in {
			if err != nil {
				yield(nil, err)
				return
			}
			if rec.NumRows() == 0 {
				rec.Release()
				continue
			}
			recSize := recordBytes(rec) + st.spec.keyBytes(rec)
			if len(buf) > 0 && size+recSize > st.spec.memory {
				if !flush() {
					return
				}
			}
			buf = append(buf, rec)
			size += recSize
		}
		flush()
	}
}

// emit sorts one sort group and yields its rows; false when the receiver
// stopped or a yield of an error was made.
func (st *sortedStream) emit(ctx context.Context, recs []arrow.RecordBatch, yield func(arrow.RecordBatch, error) bool) bool {
	tbl := array.NewTableFromRecords(recs[0].Schema(), recs)
	defer tbl.Release()
	idx, err := st.spec.order(ctx, tbl)
	if err != nil {
		yield(nil, err)
		return false
	}
	defer idx.Release()
	st.groups++
	n := int64(idx.Len())
	for off := int64(0); off < n; off += st.batchRows {
		part := array.NewSlice(idx, off, min(off+st.batchRows, n))
		rec, err := takeRows(ctx, tbl, part)
		part.Release()
		if err != nil {
			yield(nil, fmt.Errorf("take sorted rows: %w", err))
			return false
		}
		if off == 0 {
			st.first = rec
		}
		if !yield(rec, nil) {
			return false
		}
	}
	return true
}

// order is the indices of tbl's rows in the sort's order: stable, so rows
// with equal keys keep the order they were read in.
func (s *sortSpec) order(ctx context.Context, tbl arrow.Table) (arrow.Array, error) {
	mem := memory.DefaultAllocator
	keyed, keys, err := s.keyTable(tbl, mem)
	if err != nil {
		return nil, err
	}
	defer keyed.Release()
	if len(keys) == 0 { // only void keys: the order read
		b := array.NewInt64Builder(mem)
		defer b.Release()
		for i := range tbl.NumRows() {
			b.Append(i)
		}
		return b.NewArray(), nil
	}
	idx, err := compute.SortIndicesTable(ctx, keyed, keys)
	if err != nil {
		return nil, fmt.Errorf("sort rows: %w", err)
	}
	return idx, nil
}

// takeRows takes the rows of tbl at indices, in their order, into one
// record batch.
func takeRows(ctx context.Context, tbl arrow.Table, indices arrow.Array) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, tbl.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	opts := compute.DefaultTakeOptions()
	for i := range cols {
		out, err := compute.Take(ctx, *opts, compute.NewDatumWithoutOwning(tbl.Column(int(i)).Data()), compute.NewDatumWithoutOwning(indices))
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", tbl.Schema().Field(i).Name, err)
		}
		cols[i] = concatChunks(out)
		out.Release()
		if cols[i] == nil {
			return nil, fmt.Errorf("column %s: take gave %s", tbl.Schema().Field(i).Name, out.Kind())
		}
	}
	return array.NewRecordBatch(tbl.Schema(), cols, int64(indices.Len())), nil
}

// concatChunks is the one array of a Take's result (an array, or a
// chunked array of one or more chunks).
func concatChunks(d compute.Datum) arrow.Array {
	switch v := d.(type) {
	case *compute.ArrayDatum:
		return v.MakeArray()
	case *compute.ChunkedDatum:
		chunks := v.Value.Chunks()
		if len(chunks) == 1 {
			chunks[0].Retain()
			return chunks[0]
		}
		out, err := array.Concatenate(chunks, nil)
		if err != nil {
			return nil
		}
		return out
	}
	return nil
}

// stamp records the sort order a file was written in on its data file:
// iceberg-go's writer records none (it sorts batch by batch).
func (s *sortSpec) stamp(meta table.Metadata, df iceberg.DataFile) (iceberg.DataFile, error) {
	if s == nil || s.orderID == nil {
		return df, nil
	}
	spec := meta.PartitionSpecByID(int(df.SpecID()))
	if spec == nil {
		return nil, fmt.Errorf("data file %s: partition spec %d not in the table", df.FilePath(), df.SpecID())
	}
	sc := meta.CurrentSchema()
	logical := map[int]string{}
	for _, f := range spec.Fields() {
		if src, ok := sc.FindFieldByID(f.SourceID()); ok {
			if lt := avroLogicalType(f.Transform.ResultType(src.Type)); lt != "" {
				logical[f.FieldID] = lt
			}
		}
	}
	b, err := iceberg.NewDataFileBuilder(*spec, df.ContentType(), df.FilePath(), df.FileFormat(),
		df.Partition(), logical, nil, df.Count(), df.FileSizeBytes())
	if err != nil {
		return nil, fmt.Errorf("data file for %s: %w", df.FilePath(), err)
	}
	b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
		NaNValueCounts(df.NaNValueCounts()).DistinctValueCounts(df.DistinctValueCounts()).
		LowerBoundValues(df.LowerBoundValues()).UpperBoundValues(df.UpperBoundValues()).
		SplitOffsets(df.SplitOffsets()).SortOrderID(*s.orderID)
	if k := df.KeyMetadata(); k != nil {
		b.KeyMetadata(k)
	}
	if id := df.FirstRowID(); id != nil {
		b.FirstRowID(*id)
	}
	return b.Build(), nil
}

// keyBytes bounds the transformed sort keys of rec's rows, which the sort
// builds beside the rows and holds as long as they are: 4 bytes a row for
// bucket and the time transforms, the column's own bytes for truncate
// (a truncated value is never longer). Identity keys are the rows' own
// columns and void keys are not built.
func (s *sortSpec) keyBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, k := range s.keys {
		switch k.transform.(type) {
		case nil, iceberg.IdentityTransform, iceberg.VoidTransform:
		case iceberg.TruncateTransform:
			if idx := rec.Schema().FieldIndices(k.name); len(idx) == 1 {
				n += dataBytes(rec.Column(idx[0]).Data())
			}
		default:
			n += 4 * rec.NumRows()
		}
	}
	return n
}

// recordBytes is the decoded size of rec: the bytes of its buffers.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		n += dataBytes(d.Dictionary())
	}
	return n
}

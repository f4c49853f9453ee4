package compact

import (
	"context"
	"fmt"
	"iter"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// A rewriter is one way to rewrite a group: it reads the group's live rows
// and writes them again into data files of about the target size. There are
// three paths, tried in order (defaultPaths): the direct path copying leaf by
// leaf, the direct path moving Arrow batches (direct.go, copy.go), and
// iceberg-go's scan and writer (scanRewriter), which takes every group and
// is the reference the other two are tested against: they take only groups
// that need nothing but their rows moved, and write what it writes.
type rewriter interface {
	// name is the path's name in logs: "copy", "direct" or "iceberg-go".
	name() string
	// rewrite returns the files written and the rows read. On error it
	// returns the files written so far too, for the caller to remove. A
	// path that cannot take the group returns a *declined error, with the
	// files it wrote before it found out (the direct path checks each
	// input as it opens it), for the caller to remove.
	rewrite(ctx context.Context, in *groupInput) (files []iceberg.DataFile, rowsRead int64, err error)
}

// declined says why a path cannot take a group; the next path gets it.
type declined struct{ why string }

func (d *declined) Error() string { return d.why }

// groupInput is one group on its way through the paths.
type groupInput struct {
	g *Group
}

// A rewritePath builds a path's rewriter for one run over one table.
type rewritePath func(*pathEnv) rewriter

// defaultPaths are the paths Execute tries for each group, in order.
func defaultPaths() []rewritePath {
	return []rewritePath{copyPath(0), arrowPath(0), scanPath}
}

// pathEnv is what the paths of one run share: the table as loaded for the
// plan, its IO, and the direct path's preparation of it.
type pathEnv struct {
	tbl   *table.Table
	fs    iceio.IO
	sizes fileSizes
	opts  Options
	sort  *sortSpec // the plan's sort order; nil: none (sort.go)
	// rowGroupCap is the encoded bytes each writer closes its row group at
	// the latest (Config.rowGroupCap); 0: the table's row-group size.
	rowGroupCap int64

	prepared  bool
	direct    *directTable // nil when the table cannot take the direct path
	directWhy string
}

// directTable prepares the direct path for the table once, for both of its
// modes, or says why the table cannot take it.
func (env *pathEnv) directTable() (*directTable, string) {
	if !env.prepared {
		env.prepared = true
		env.direct, env.directWhy = newDirectTable(env.tbl, env.opts.Allocator)
		if env.direct != nil && env.rowGroupCap > 0 {
			env.direct.out.rowGroupBytes = min(env.direct.out.rowGroupBytes, env.rowGroupCap)
		}
	}
	return env.direct, env.directWhy
}

// fileSizes are the sizes of the plan that the written files are held to.
type fileSizes struct{ target, min, max int64 }

func (p *Plan) fileSizes() fileSizes {
	return fileSizes{target: p.TargetFileSize, min: p.MinFileSize, max: p.MaxFileSize}
}

// files is how many files bytes of output are written as: files of at
// most the target, unless those would be smaller than the min size (1.3
// targets' worth in two files), then one fewer, if that stays within the
// max size. So every file of a group with at least the min size's worth
// is neither a candidate for being too small nor for being too large.
func (s fileSizes) files(bytes int64) int64 {
	if bytes <= s.target {
		return 1
	}
	n := (bytes + s.target - 1) / s.target
	if bytes/n < s.min && n > 1 && bytes/(n-1) <= s.max {
		return n - 1
	}
	return n
}

// splitter says where a group's output files end: it spreads the rows
// still to write evenly over the files that files() makes of their
// expected bytes, expected from the bytes per row of the files written
// so far, else from the plan's estimate. Every path asks it before each
// record batch, so they all cut the same group at the same rows.
type splitter struct {
	sizes    fileSizes
	rowsLeft int64   // rows of the group not given to a file yet (with deletes to apply, fewer may come)
	rowBytes float64 // expected bytes per row
	// Of the files closed so far:
	bytes, rows int64
}

func newSplitter(sizes fileSizes, g *Group) *splitter {
	rb := g.rowBytes
	if rb <= 0 {
		rb = float64(g.Bytes) / float64(max(g.Records, 1))
	}
	return &splitter{sizes: sizes, rowsLeft: g.Records, rowBytes: rb}
}

// room is how many more rows the open file, holding fileRows, takes
// before it ends; 0 ends it now.
func (s *splitter) room(fileRows int64) int64 {
	rows := fileRows + max(s.rowsLeft, 0)
	bytes := float64(rows) * s.rowBytes
	n := s.sizes.files(int64(bytes))
	if n <= 1 {
		return max(s.rowsLeft, 1) // the rest, whatever it turns out to be
	}
	per := (rows + n - 1) / n
	if s.rows == 0 && bytes >= firstFileHedgeTargets*float64(s.sizes.target) {
		// The first file is written before its bytes per row are known:
		// the estimate is the input's, which the rewrite may compress
		// better or worse. Aiming at the middle of [min, max] lands it in
		// range for a ratio off by about 40% either way; the files after
		// it are spread with the bytes per row it measured.
		mid := float64(s.sizes.min+s.sizes.max) / 2
		per = min(int64(mid/s.rowBytes), rows)
	}
	// A file holds one row at least: with rows larger than the size range
	// (blobs against a 1 MiB target) per is 0, and an empty file would end
	// before taking any row, over and over.
	per = max(per, 1)
	return max(per-fileRows, 0)
}

// firstFileHedgeTargets is how many targets' worth a group expects at
// least for its first file to aim at the middle of the size range rather
// than at an even share: with fewer, what remains after it could be small.
const firstFileHedgeTargets = 4

// took records rows given to the open file.
func (s *splitter) took(rows int64) { s.rowsLeft -= rows }

// closed learns the bytes per row from a file written.
func (s *splitter) closed(df iceberg.DataFile) {
	s.bytes += df.FileSizeBytes()
	s.rows += df.Count()
	if s.rows > 0 {
		s.rowBytes = float64(s.bytes) / float64(s.rows)
	}
}

// WriterAllocator gives the Parquet writer of one output file of the direct
// path the allocator of its buffers (a row group of pages, held until it is
// written), and a reclaim that frees at once whatever of them is still
// allocated. Reclaim is called after the writer failed or was abandoned,
// which may not have freed its own; a writer that closed cleanly did. The
// binary builds one that keeps the buffers off the Go heap; nil means the
// Go heap.
type WriterAllocator func() (mem memory.Allocator, reclaim func())

// scanPath is iceberg-go's path.
func scanPath(env *pathEnv) rewriter {
	tbl, err := rowGroupView(env.tbl, env.rowGroupCap)
	if err != nil {
		return failing{path: "iceberg-go", err: err}
	}
	return &scanRewriter{tbl: tbl, sizes: env.sizes, batchRows: env.opts.ArrowBatchRows, bufferBatches: env.opts.WriteBufferBatches,
		chunk: env.opts.scanChunk}
}

// rowGroupView is tbl as iceberg-go's writer sees it: the same metadata,
// with write.parquet.row-group-size-bytes lowered to limit when the table's
// is larger, so that its writers buffer no more than the direct path's. A
// property that is not a positive integer is left for iceberg-go to refuse.
func rowGroupView(tbl *table.Table, limit int64) (*table.Table, error) {
	meta := tbl.Metadata()
	size, ok := positiveIntProp(meta.Properties(), table.ParquetRowGroupSizeBytesKey)
	if !ok || limit <= 0 || size <= limit {
		return tbl, nil
	}
	b, err := table.MetadataBuilderFromBase(meta, tbl.MetadataLocation())
	if err == nil {
		err = b.SetProperties(iceberg.Properties{table.ParquetRowGroupSizeBytesKey: strconv.FormatInt(limit, 10)})
	}
	var view table.Metadata
	if err == nil {
		view, err = b.Build()
	}
	if err != nil {
		return nil, fmt.Errorf("table metadata with row groups of at most %d bytes: %w", limit, err)
	}
	return table.New(tbl.Identifier(), view, tbl.MetadataLocation(), tbl.FS, nil), nil
}

// scanRewriter rewrites a group through iceberg-go's scan, which applies
// deletes and projects old files onto the current schema, and its writer.
type scanRewriter struct {
	tbl                      *table.Table
	sizes                    fileSizes
	batchRows, bufferBatches int
	chunk                    int       // tasks a scan reads (readTasks)
	sort                     *sortSpec // set: the sort path (sort.go)
}

func (s *scanRewriter) name() string {
	if s.sort != nil {
		return "sort"
	}
	return "iceberg-go"
}

func (s *scanRewriter) rewrite(ctx context.Context, in *groupInput) (files []iceberg.DataFile, readRows int64, err error) {
	g, tbl := in.g, s.tbl
	meta := tbl.Metadata()
	lineage := meta.Version() >= 3 && allHaveLineage(g)
	scanOpts := []table.ScanOption{table.WithMaxConcurrency(1), table.WithArrowBatchSize(s.batchRows)}
	if lineage {
		scanOpts = append(scanOpts, table.WithRowLineage())
	}
	schema, records, err := readTasks(ctx, tbl.Scan(scanOpts...), g.files, s.chunk)
	if err != nil {
		return nil, 0, fmt.Errorf("read group: %w", err)
	}
	writeOpts := []table.WriteRecordOption{
		// The splitter ends each file; iceberg-go's own roll at the max
		// size only guards against an estimate far off.
		table.WithTargetFileSize(s.sizes.max),
		table.WithRecordBatchBufferSize(s.bufferBatches),
	}
	// A group of the current spec is one partition, so its stream is
	// clustered. Files of an older spec may spread over several partitions
	// of the current one: those go through the fanout writer.
	if g.SpecID == meta.DefaultPartitionSpec() {
		writeOpts = append(writeOpts, table.WithClusteredWrite())
	}
	if lineage {
		projected := iceberg.SchemaWithRowLineage(tbl.Schema())
		if schema, err = table.SchemaToArrowSchemaWithOptions(projected, table.ArrowSchemaOptions{
			IncludeFieldIDs: true, TableProperties: meta.Properties(),
		}); err != nil {
			return nil, 0, fmt.Errorf("build row-lineage schema: %w", err)
		}
		writeOpts = append(writeOpts, table.WithPreserveRowLineage(projected))
	}
	var sorted *sortedStream
	if s.sort != nil {
		sorted = s.sort.stream(s.batchRows)
		records = sorted.sorted(ctx, records)
	}
	next, stop := iter.Pull2(records)
	defer stop()
	// Each file is one WriteRecords over the rows the splitter gives it:
	// its writer rolls by bytes flushed, which a row group held in memory
	// until the file closes keeps at 0.
	split := newSplitter(s.sizes, g)
	var carry arrow.RecordBatch // the rest of a batch cut between two files
	defer func() {
		if carry != nil {
			carry.Release()
		}
	}()
	for more := true; more; {
		more = false
		file := func(yield func(arrow.RecordBatch, error) bool) {
			var fileRows int64
			for {
				rec := carry
				carry = nil
				if rec == nil {
					r, err, ok := next()
					if !ok {
						return
					}
					if err != nil {
						yield(nil, err)
						return
					}
					readRows += r.NumRows()
					rec = r
					if sorted != nil && fileRows > 0 && sorted.startsGroup(rec) {
						carry, more = rec, true // a file holds one sort group's rows
						return
					}
				}
				room := split.room(fileRows)
				if room == 0 {
					carry, more = rec, true
					return
				}
				if n := rec.NumRows(); n > room {
					head := rec.NewSlice(0, room)
					carry = rec.NewSlice(room, n)
					rec.Release()
					rec = head
				}
				fileRows += rec.NumRows()
				split.took(rec.NumRows())
				if !yield(rec, nil) {
					return
				}
			}
		}
		for df, werr := range table.WriteRecords(ctx, tbl, schema, file, writeOpts...) {
			if werr != nil {
				return files, readRows, fmt.Errorf("write group: %w", werr)
			}
			split.closed(df)
			if df, werr = s.sort.stamp(meta, df); werr != nil {
				return files, readRows, werr
			}
			files = append(files, df)
		}
	}
	return files, readRows, nil
}

// readChunk is how many of a group's tasks one scan reads by default. A
// scan holds the tasks it is given, decoded (a few hundred bytes each),
// and loads the delete files they apply anew: a delete file that applies
// to files of several chunks is read once per chunk. Most groups are one
// chunk. An error setting up a later chunk comes through the records,
// after files were written: the group fails as on any read error, its
// files removed.
const readChunk = 16384

// readTasks reads the rows of files through scan, perScan tasks at a time,
// in the list's order.
func readTasks(ctx context.Context, scan *table.Scan, files *fileList, perScan int) (*arrow.Schema, iter.Seq2[arrow.RecordBatch, error], error) {
	r := listReader{l: files}
	left := files.len()
	chunk := func() []table.FileScanTask {
		out := make([]table.FileScanTask, min(left, perScan))
		for i := range out {
			out[i] = r.next()
		}
		left -= len(out)
		return out
	}
	schema, records, err := scan.ReadTasks(ctx, chunk())
	if err != nil {
		return nil, nil, err
	}
	return schema, func(yield func(arrow.RecordBatch, error) bool) {
		for {
			for rec, err := range records {
				if !yield(rec, err) || err != nil {
					return
				}
			}
			if left == 0 {
				return
			}
			if _, records, err = scan.ReadTasks(ctx, chunk()); err != nil {
				yield(nil, err)
				return
			}
		}
	}, nil
}

func allHaveLineage(g *Group) bool {
	for t := range g.files.all() {
		if t.FirstRowID == nil {
			return false
		}
	}
	return g.files.len() > 0
}

package compact

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
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
	// path that cannot take the group returns a *declined error, before it
	// wrote anything.
	rewrite(ctx context.Context, in *groupInput) (files []iceberg.DataFile, rowsRead int64, err error)
}

// declined says why a path cannot take a group; the next path gets it.
type declined struct{ why string }

func (d *declined) Error() string { return d.why }

// groupInput is one group on its way through the paths. What a path read
// of the input files is kept for the next, so that no footer is read twice.
type groupInput struct {
	g       *Group
	footers []*metadata.FileMetaData // of g's files in order, once read
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
	tbl    *table.Table
	fs     iceio.IO
	target int64
	opts   Options

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
	}
	return env.direct, env.directWhy
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
	return &scanRewriter{tbl: env.tbl, target: env.target, batchRows: env.opts.ArrowBatchRows, bufferBatches: env.opts.WriteBufferBatches}
}

// scanRewriter rewrites a group through iceberg-go's scan, which applies
// deletes and projects old files onto the current schema, and its writer.
type scanRewriter struct {
	tbl                      *table.Table
	target                   int64
	batchRows, bufferBatches int
}

func (s *scanRewriter) name() string { return "iceberg-go" }

func (s *scanRewriter) rewrite(ctx context.Context, in *groupInput) (files []iceberg.DataFile, readRows int64, err error) {
	g, tbl := in.g, s.tbl
	meta := tbl.Metadata()
	lineage := meta.Version() >= 3 && allHaveLineage(g.tasks)
	scanOpts := []table.ScanOption{table.WithMaxConcurrency(1), table.WithArrowBatchSize(s.batchRows)}
	if lineage {
		scanOpts = append(scanOpts, table.WithRowLineage())
	}
	schema, records, err := tbl.Scan(scanOpts...).ReadTasks(ctx, g.tasks)
	if err != nil {
		return nil, 0, fmt.Errorf("read group: %w", err)
	}
	writeOpts := []table.WriteRecordOption{
		table.WithTargetFileSize(s.target),
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
	counted := func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range records {
			if err == nil {
				readRows += rec.NumRows()
			}
			if !yield(rec, err) {
				return
			}
		}
	}
	for df, werr := range table.WriteRecords(ctx, tbl, schema, counted, writeOpts...) {
		if werr != nil {
			return files, readRows, fmt.Errorf("write group: %w", werr)
		}
		files = append(files, df)
	}
	return files, readRows, nil
}

func allHaveLineage(tasks []table.FileScanTask) bool {
	for _, t := range tasks {
		if t.FirstRowID == nil {
			return false
		}
	}
	return len(tasks) > 0
}

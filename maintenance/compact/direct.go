package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// The direct path rewrites a group that needs nothing but its rows moved:
// Parquet files of the current schema and partition spec with no deletes
// to apply, in a table whose writer does nothing but encode (format v1 or
// v2, no sort order, Parquet properties it reads exactly as iceberg-go
// does). It writes what iceberg-go's writer writes, with the writer
// configured as iceberg-go's, and builds the data files from the written
// footers. It is two paths (rewriters), each taking a group only if the
// input footers, each checked before any of its rows is written, allow:
//   - copy (copy.go): every file stores every leaf as the output does, so
//     levels and values go from column readers to column writers;
//   - Arrow ("direct"): the files decode to the output's Arrow types (Spark
//     and PyIceberg annotate some columns otherwise); pqarrow reads each
//     file and one pqarrow writer writes the output.
//
// Either skips iceberg-go's scan and writer pipelines (delete application,
// schema projection, re-batching, channels between goroutines) and the
// garbage they make. Every other group goes through iceberg-go.

// directTable is what the direct path needs of a table, prepared once per run.
type directTable struct {
	out  *parquetOutput
	meta table.Metadata
	spec iceberg.PartitionSpec
	mem  memory.Allocator // the readers', and the writers' without alloc
	// alloc backs the writers' buffers, one per file; nil: the heap.
	alloc WriterAllocator
	// footerKV is the key-value metadata pqarrow writes in the footer (the
	// Arrow schema), which copy mode writes too.
	footerKV  metadata.KeyValueMetadata
	writeUUID uuid.UUID
	files     atomic.Int64
	// bufs holds the buffers of input files read whole, for the next ones.
	bufs sync.Pool
	// pages backs the page readers of copy mode, which closes them.
	pages pageBuffers
}

// newDirectTable prepares the direct path for tbl, its writers allocating
// from alloc (nil: the Go heap), or says why the table cannot take it.
func newDirectTable(tbl *table.Table, alloc WriterAllocator) (*directTable, string) {
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
	out, why := parquetOutputFor(sc, props)
	if out == nil {
		return nil, why
	}
	kv, err := pqarrowFooterKV(out, mem)
	if err != nil {
		return nil, err.Error()
	}
	return &directTable{out: out, meta: meta, spec: spec, mem: mem, alloc: alloc, footerKV: kv, writeUUID: uuid.New()}, ""
}

// pqarrowFooterKV is the key-value metadata of a file that pqarrow writes
// with the output's settings, taken from an empty one.
func pqarrowFooterKV(out *parquetOutput, mem memory.Allocator) (metadata.KeyValueMetadata, error) {
	var buf bytes.Buffer
	wp, ap := out.props(mem)
	fw, err := pqarrow.NewFileWriter(out.arrow, &buf, wp, ap)
	if err != nil {
		return nil, fmt.Errorf("pqarrow writer: %w", err)
	}
	if err := fw.Close(); err != nil {
		return nil, fmt.Errorf("pqarrow writer: %w", err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("pqarrow footer: %w", err)
	}
	defer pf.Close()
	return pf.MetaData().KeyValueMetadata(), nil
}

// directGroup says why group g cannot take the direct path, or "".
func (d *directTable) groupReason(g *Group) string {
	if g.SpecID != d.spec.ID() {
		return fmt.Sprintf("files of partition spec %d", g.SpecID)
	}
	for t := range g.files.all() {
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

// directMode is how the direct path moves a group's rows; each mode is a
// path of its own.
type directMode string

const (
	modeCopy  directMode = "copy"   // leaf by leaf (copy.go)
	modeArrow directMode = "direct" // as Arrow record batches
)

// copyPath and arrowPath are the direct path's modes. wholeMax is the
// largest input file read whole: 0 means wholeFileMax, < 0 reads every file
// by ranges.
func copyPath(wholeMax int64) rewritePath  { return directPath(modeCopy, wholeMax) }
func arrowPath(wholeMax int64) rewritePath { return directPath(modeArrow, wholeMax) }

func directPath(mode directMode, wholeMax int64) rewritePath {
	if wholeMax == 0 {
		wholeMax = wholeFileMax
	}
	return func(env *pathEnv) rewriter {
		d, why := env.directTable()
		return &directRewriter{mode: mode, d: d, why: why, fs: env.fs, sizes: env.sizes,
			batchRows: int64(env.opts.ArrowBatchRows), wholeMax: wholeMax}
	}
}

// directRewriter is the direct path in one mode.
type directRewriter struct {
	mode      directMode
	d         *directTable // nil when the table cannot take the path
	why       string       // why not
	fs        iceio.IO
	sizes     fileSizes
	batchRows int64
	wholeMax  int64 // files of at most this many bytes are read whole
}

func (r *directRewriter) name() string { return string(r.mode) }

// unfit says why an input file, of footer md, cannot be rewritten in
// mode, or "": both modes need the output's columns; copy needs the file
// to store every leaf as the output does, Arrow needs it to decode to the
// output's Arrow types. Each file is checked as it is opened, before any of
// its rows is written. fit is the last file found fit in Arrow mode: one of
// an equal schema decodes alike, without converting its schema again.
func (d *directTable) unfit(mode directMode, path string, md *metadata.FileMetaData, fit *fitSchema) (string, error) {
	if !sameParquetSchema(md.Schema, d.out.parquet) {
		return "file " + path + " has other columns than the current schema", nil
	}
	if mode == modeCopy {
		if !samePhysicalLeaves(md.Schema, d.out.parquet) {
			return "file " + path + " stores its columns otherwise than the output", nil
		}
		return "", nil
	}
	kv := md.KeyValueMetadata()
	if fit.schema != nil && fit.schema.Equals(md.Schema) && sameKV(fit.kv, kv) {
		return "", nil
	}
	asc, err := pqarrow.FromParquet(md.Schema, &pqarrow.ArrowReadProperties{}, kv)
	if err != nil {
		return "", fmt.Errorf("arrow schema of %s: %w", path, err)
	}
	if !sameArrowTypes(asc, d.out.arrow) {
		return "file " + path + " reads as other Arrow types", nil
	}
	fit.schema, fit.kv = md.Schema, kv
	return "", nil
}

// fitSchema is the Parquet schema and key-value metadata (where pqarrow
// finds a stored Arrow schema) of a file that decodes to the output's
// Arrow types.
type fitSchema struct {
	schema *schema.Schema
	kv     metadata.KeyValueMetadata
}

func sameKV(a, b metadata.KeyValueMetadata) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal([]byte(a[i].GetValue()), []byte(b[i].GetValue())) {
			return false
		}
	}
	return true
}

// wholeFileMax is the largest input file read whole. Compaction's inputs
// are mostly small files, for which a request per column chunk and for the
// footer is most of the cost on an object store: opening a file there
// already starts a GET of the whole object, which reads such a file at
// once. Larger files are read by ranges, a column chunk at a time, so that
// memory stays bounded.
const wholeFileMax = 8 << 20

// readAhead is how many input files beyond the one being copied are opened,
// read (when read whole) and their footers parsed: the next file's GET
// and footer overlap the current file's decoding and encoding, and memory
// stays bounded by a few files.
const readAhead = 2

// inputFile is one input file opened, with its footer read.
type inputFile struct {
	path string
	pf   *file.Reader
	buf  *[]byte // the bytes of a file read whole, from the table's pool
	err  error
}

// inputs opens the files of tasks in order, readAhead ahead of the
// receiver, through fs, reading files of at most wholeMax bytes whole,
// their page readers allocating from mem. The
// receiver releases each file it took; stop ends the reading ahead and
// releases what was read and not taken. A file that fails to open is the
// last sent.
func (d *directTable) inputs(ctx context.Context, fs iceio.IO, wholeMax int64, mem memory.Allocator, tasks *fileList) (files <-chan *inputFile, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan *inputFile, readAhead-1) // and one being opened
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		for t := range tasks.all() {
			if ctx.Err() != nil {
				return
			}
			in := d.openInput(fs, wholeMax, mem, t.File.FilePath())
			select {
			case ch <- in:
			case <-ctx.Done():
				d.release(in)
				return
			}
			if in.err != nil {
				return
			}
		}
	}()
	return ch, func() {
		cancel()
		for in := range ch {
			d.release(in)
		}
		<-done
	}
}

// openInput opens one input file and reads its footer; a file of at most
// wholeMax bytes is read whole, in one request, into a pooled buffer.
func (d *directTable) openInput(fs iceio.IO, wholeMax int64, mem memory.Allocator, path string) *inputFile {
	in := &inputFile{path: path}
	f, err := fs.Open(path)
	if err != nil {
		in.err = fmt.Errorf("open %s: %w", path, err)
		return in
	}
	var src parquet.ReaderAtSeeker = f
	st, err := f.Stat()
	whole := err == nil && st.Size() <= wholeMax
	if whole {
		// Parquet readers copy what they read out of src (ReadAt), so
		// nothing refers to these bytes once the file is released.
		buf, _ := d.bufs.Get().(*[]byte)
		if buf == nil {
			buf = new([]byte)
		}
		*buf = slices.Grow((*buf)[:0], int(st.Size()))[:st.Size()]
		_, err := io.ReadFull(f, *buf)
		f.Close()
		in.buf = buf
		if err != nil {
			d.release(in)
			in.err = fmt.Errorf("read %s: %w", path, err)
			return in
		}
		src = bytes.NewReader(*buf)
	}
	// Closing the reader closes f when it reads by ranges.
	pf, err := file.NewParquetReader(src, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		if !whole {
			f.Close()
		}
		d.release(in)
		in.err = fmt.Errorf("read footer of %s: %w", path, err)
		return in
	}
	in.pf = pf
	return in
}

// release closes an input file and returns its buffer to the pool.
func (d *directTable) release(in *inputFile) {
	if in.pf != nil {
		_ = in.pf.Close()
		in.pf = nil
	}
	if in.buf != nil {
		d.bufs.Put(in.buf)
		in.buf = nil
	}
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

// rewrite streams the group's files into new files of about the target
// size, counting the rows read. It returns the files written, also on
// error, so that the caller can remove them. Each file is checked for the
// mode as it is opened: a file found unfit after others were written
// declines the group with those files, which the caller removes.
func (r *directRewriter) rewrite(ctx context.Context, in *groupInput) (files []iceberg.DataFile, rowsRead int64, err error) {
	d, g := r.d, in.g
	if d == nil {
		return nil, 0, &declined{why: r.why}
	}
	if why := d.groupReason(g); why != "" {
		return nil, 0, &declined{why: why}
	}
	w := &directWriter{d: d, fs: r.fs, g: g, maxSize: r.sizes.max, split: newSplitter(r.sizes, g), ctx: ctx, mode: r.mode}
	if r.mode == modeCopy {
		if w.src, err = newCopySource(d.out.parquet, runtime.GOMAXPROCS(0), d.mem); err != nil {
			return nil, 0, err
		}
	}
	defer func() {
		if cerr := w.abort(); err == nil && cerr != nil {
			err = cerr
		}
		files = w.files
	}()
	// Copy mode closes the page readers of each file it finished, so
	// their buffers can serve the next files' (pageBuffers); the Arrow
	// reader's stay with the garbage collector.
	readMem := d.mem
	if r.mode == modeCopy {
		readMem = &d.pages
	}
	inputs, stop := d.inputs(ctx, r.fs, r.wholeMax, readMem, g.files)
	defer stop()
	var fit fitSchema
	for range g.files.len() {
		f, ok := <-inputs
		if !ok {
			return nil, rowsRead, context.Cause(ctx)
		}
		if f.err != nil {
			return nil, rowsRead, f.err
		}
		why, err := d.unfit(r.mode, f.path, f.pf.MetaData(), &fit)
		if err == nil && why == "" {
			var n int64
			n, err = r.copyInput(ctx, w, f.pf)
			rowsRead += n
			if err != nil {
				err = fmt.Errorf("rewrite %s: %w", f.path, err)
			}
		}
		d.release(f)
		if err != nil {
			return nil, rowsRead, err
		}
		if why != "" {
			return nil, 0, &declined{why: why}
		}
	}
	if err := w.close(); err != nil {
		return nil, rowsRead, err
	}
	return w.files, rowsRead, nil
}

// copyInput writes the rows of one input file and returns how many it read.
func (r *directRewriter) copyInput(ctx context.Context, w *directWriter, pf *file.Reader) (rowsRead int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, context.Cause(ctx)
	}
	if r.mode == modeCopy {
		return w.copyFile(ctx, pf, r.batchRows)
	}
	// Columns decode in parallel: the writer encodes them one after another.
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: r.batchRows, Parallel: true}, r.d.mem)
	if err != nil {
		return 0, err
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return 0, err
	}
	defer rr.Release()
	for rr.Next() {
		if ctx.Err() != nil {
			return rowsRead, context.Cause(ctx)
		}
		rec := rr.RecordBatch()
		rowsRead += rec.NumRows()
		// Same columns and types (checked): only the field metadata the
		// reader restored may differ from the output schema's.
		out := array.NewRecordBatch(r.d.out.arrow, rec.Columns(), rec.NumRows())
		err := w.writeSplit(out)
		out.Release()
		if err != nil {
			return rowsRead, err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return rowsRead, err
	}
	if err := ctx.Err(); err != nil {
		return rowsRead, context.Cause(ctx)
	}
	return rowsRead, nil
}

// directWriter writes one group's rows into files that end where the
// splitter says, as the iceberg-go path's do, with row groups cut at
// write.parquet.row-group-size-bytes and write.parquet.row-group-limit and
// a roll at the max size by bytes flushed: the rules of iceberg-go's
// rolling writer. In Arrow mode pqarrow's writer encodes record batches; in copy
// mode the rows go into the column writers of the same file writer that
// pqarrow's wraps, with the same properties and footer metadata.
type directWriter struct {
	ctx     context.Context
	d       *directTable
	fs      iceio.IO
	g       *Group
	maxSize int64 // iceberg-go's roll, which the scan path sets to the max size
	split   *splitter
	mode    directMode

	fileRows int64 // rows given to the open file

	path    string
	sink    iceio.FileWriter
	counter *countingWriter
	fw      *pqarrow.FileWriter         // Arrow mode
	pw      *file.Writer                // copy mode
	rg      file.BufferedRowGroupWriter // copy mode: the open row group
	src     *copySource                 // copy mode: the input file
	reclaim func()                      // frees the open file's buffers; nil on the heap
	files   []iceberg.DataFile
}

type countingWriter struct {
	w       iceio.FileWriter
	n       int64
	discard bool // an abandoned file is finished into nothing
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.discard {
		return len(p), nil
	}
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
	if w.counter.n >= w.maxSize {
		return w.close()
	}
	return nil
}

// writeSplit writes rec, cut where the splitter ends a file.
func (w *directWriter) writeSplit(rec arrow.RecordBatch) error {
	for off, n := int64(0), rec.NumRows(); off < n; {
		room := w.split.room(w.fileRows)
		if room == 0 {
			if err := w.close(); err != nil {
				return err
			}
			continue
		}
		k := min(room, n-off)
		part := rec
		if k < n {
			part = rec.NewSlice(off, off+k)
		}
		w.fileRows += k
		w.split.took(k)
		err := w.write(part)
		if part != rec {
			part.Release()
		}
		if err != nil {
			return err
		}
		off += k
	}
	return nil
}

// copyFile copies the rows of one input file in batches of batchRows, as
// write does record batches of that size: row groups are cut and files
// rolled between batches. It returns the rows read.
func (w *directWriter) copyFile(ctx context.Context, pf *file.Reader, batchRows int64) (int64, error) {
	src := w.src
	src.open(pf)
	var rows int64
	for left := pf.NumRows(); left > 0; {
		if ctx.Err() != nil {
			return rows, context.Cause(ctx)
		}
		// A batch as the Arrow reader's, cut where the splitter ends a file
		// as writeSplit cuts it.
		for want := min(batchRows, left); want > 0; {
			room := w.split.room(w.fileRows)
			if room == 0 {
				if err := w.close(); err != nil {
					return rows, err
				}
				continue
			}
			k := min(room, want)
			w.fileRows += k
			w.split.took(k)
			n, err := w.copyBatch(src, k)
			rows += n
			if err != nil {
				return rows, err
			}
			if n < k {
				return rows, fmt.Errorf("its columns end after %d rows, its footer says %d", rows, pf.NumRows())
			}
			want -= n
			left -= n
		}
	}
	return rows, src.finish()
}

// copyBatch copies up to n rows from src, as pqarrow's WriteBuffered writes
// a record batch of n rows (splitting it at the row group limit).
func (w *directWriter) copyBatch(src *copySource, n int64) (int64, error) {
	if w.pw == nil {
		if err := w.open(); err != nil {
			return 0, err
		}
	} else if w.rg.TotalBytesWritten() >= w.d.out.rowGroupBytes {
		if err := w.newRowGroup(); err != nil {
			return 0, err
		}
	}
	var copied int64
	for copied < n {
		cur, err := w.rg.NumRows()
		if err != nil {
			return copied, fmt.Errorf("write %s: %w", w.path, err)
		}
		if int64(cur) >= w.d.out.rowGroupRows {
			if err := w.newRowGroup(); err != nil {
				return copied, err
			}
			continue
		}
		want := min(n-copied, w.d.out.rowGroupRows-int64(cur))
		got, err := src.copyRows(w.rg, want)
		copied += got
		if err != nil {
			return copied, fmt.Errorf("write %s: %w", w.path, err)
		}
		if got < want {
			break
		}
	}
	if copied > 0 && w.counter.n >= w.maxSize {
		return copied, w.close()
	}
	return copied, nil
}

func (w *directWriter) newRowGroup() error {
	if w.rg != nil {
		if err := w.rg.Close(); err != nil {
			return fmt.Errorf("finish a row group in %s: %w", w.path, err)
		}
	}
	rg, err := w.pw.AppendBufferedRowGroupChecked()
	if err != nil {
		return fmt.Errorf("start a row group in %s: %w", w.path, err)
	}
	w.rg = rg
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
	var mem memory.Allocator
	mem, w.reclaim = w.d.writerMem()
	props, ap := w.d.out.props(mem)
	if w.mode == modeCopy {
		w.pw, err = file.NewParquetWriterWithError(w.counter, w.d.out.parquet.Root(),
			file.WithWriterProps(props), file.WithWriteMetadata(w.d.footerKV))
		if err == nil {
			err = w.newRowGroup()
		}
	} else {
		w.fw, err = pqarrow.NewFileWriter(w.d.out.arrow, w.counter, props, ap)
	}
	if err != nil {
		w.abort()
		return fmt.Errorf("start %s: %w", path, err)
	}
	return nil
}

// close finishes the open file and records it as a data file.
func (w *directWriter) close() error {
	if w.sink == nil {
		return nil
	}
	var err error
	if w.fw != nil {
		err = w.fw.Close()
	} else {
		err = w.pw.Close() // closes the open row group first
	}
	if cerr := w.sink.Close(); err == nil {
		err = cerr
	}
	path, reclaim := w.path, w.reclaim
	w.fw, w.pw, w.rg, w.sink, w.path, w.reclaim, w.fileRows = nil, nil, nil, nil, "", nil, 0
	if err != nil {
		// A writer that failed to close may not have freed its buffers.
		reclaimBuffers(reclaim)
		_ = w.fs.Remove(path)
		return fmt.Errorf("finish %s: %w", path, err)
	}
	df, err := w.d.dataFile(w.ctx, w.fs, path, w.g)
	if err != nil {
		_ = w.fs.Remove(path)
		return err
	}
	w.split.closed(df)
	w.files = append(w.files, df)
	return nil
}

// abort drops a file still open after a failure.
func (w *directWriter) abort() error {
	if w.sink == nil {
		return nil
	}
	// Finish the writer into nothing so that it frees its buffers: those
	// of a mapped allocator are not the garbage collector's to reclaim.
	w.counter.discard = true
	if w.fw != nil {
		_ = w.fw.Close()
	}
	if w.pw != nil {
		_ = w.pw.Close() // closes the open row group too
	}
	// A close that failed (columns of unequal rows after a read error)
	// leaves buffers unfreed; the writer is dropped, so free them here.
	reclaimBuffers(w.reclaim)
	_ = w.sink.Close()
	err := w.fs.Remove(w.path)
	w.fw, w.pw, w.rg, w.sink, w.path, w.reclaim, w.fileRows = nil, nil, nil, nil, "", nil, 0
	return err
}

// writerMem returns the allocator of one output file's writer and the
// reclaim of its buffers (nil on the Go heap, whose collector reclaims them).
func (d *directTable) writerMem() (memory.Allocator, func()) {
	if d.alloc == nil {
		return d.mem, nil
	}
	return d.alloc()
}

func reclaimBuffers(reclaim func()) {
	if reclaim != nil {
		reclaim()
	}
}

// newPath names an output file as iceberg-go's writer does: the table's
// location provider, under data/<partition path> for a partitioned table.
func (d *directTable) newPath(g *Group) (string, error) {
	n := d.files.Add(1)
	name := fmt.Sprintf("%05d-%d-%s-%05d.parquet", 0, n, d.writeUUID, 1)
	props := d.meta.Properties()
	if part := partitionPath(d.spec, d.meta.CurrentSchema(), g.files.partition); part != "" {
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
		part[f.FieldID] = g.files.partition[f.FieldID]
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

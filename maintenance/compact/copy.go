package compact

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// Column copy: when every input file stores every leaf column exactly as
// the output will (physical type, length, annotations, levels), the direct
// path moves each leaf's levels and values from the input's column readers
// straight into the output's column writers. Nothing is rebuilt as Arrow
// arrays (maps, lists and structs are never reassembled from their levels
// and split again) while the values are still decoded and encoded anew, so
// the output is encoded, paged, dictionary-built and compressed by the same
// column writers, with the same properties, as pqarrow and iceberg-go use.

// samePhysicalLeaves reports whether every leaf of a file is stored as the
// output's leaf is; with sameParquetSchema, the values can be copied as
// they are.
func samePhysicalLeaves(file, out *schema.Schema) bool {
	if file.NumColumns() != out.NumColumns() {
		return false
	}
	for i := range out.NumColumns() {
		a, b := file.Column(i), out.Column(i)
		if a.PhysicalType() != b.PhysicalType() || a.ConvertedType() != b.ConvertedType() ||
			!sameLogicalType(a.LogicalType(), b.LogicalType()) ||
			(a.PhysicalType() == parquet.Types.FixedLenByteArray && a.TypeLength() != b.TypeLength()) ||
			a.MaxDefinitionLevel() != b.MaxDefinitionLevel() || a.MaxRepetitionLevel() != b.MaxRepetitionLevel() {
			return false
		}
	}
	return true
}

// sameLogicalType compares what two annotations say of the values. A
// timestamp's other fields (whether it came from, or must also be written
// as, a converted type) are how a schema was built, not what it holds.
func sameLogicalType(a, b schema.LogicalType) bool {
	ta, ok := a.(*schema.TimestampLogicalType)
	tb, ok2 := b.(*schema.TimestampLogicalType)
	if ok && ok2 {
		return ta.IsAdjustedToUTC() == tb.IsAdjustedToUTC() && ta.TimeUnit() == tb.TimeUnit()
	}
	return a.Equals(b)
}

// copySource copies rows of one input file at a time, leaf by leaf. It is
// built for the output's leaves, which every file of a group in copy mode
// stores alike (samePhysicalLeaves), and keeps its buffers from file to
// file. Leaves are independent (a column reader and a column writer each,
// over bytes already read), so up to workers of them are copied at once:
// each column writer sees the same calls in the same order as when they
// are copied one after another, so the file written is the same.
type copySource struct {
	pf      *file.Reader
	leaves  []leafCopier
	workers int
	order   []int   // the leaves, largest in the open file first
	got     []int64 // rows each leaf copied in the last call
	errs    []error
}

// newCopySource copies into columns of sc, reading with mem, the
// allocator of the files' readers.
func newCopySource(sc *schema.Schema, workers int, mem memory.Allocator) (*copySource, error) {
	n := sc.NumColumns()
	s := &copySource{leaves: make([]leafCopier, n), workers: max(workers, 1),
		order: make([]int, n), got: make([]int64, n), errs: make([]error, n)}
	for i := range n {
		l, err := newLeafCopier(i, sc.Column(i), mem)
		if err != nil {
			return nil, err
		}
		s.leaves[i] = l
		s.order[i] = i
	}
	return s, nil
}

// open starts copying the rows of pf. The file before was finished: no
// leaf holds anything of it (finish).
func (s *copySource) open(pf *file.Reader) {
	s.pf = pf
	// One reader of each row group for all leaves: each builds the row
	// group's metadata and page index reader anew.
	rgs := make([]*file.RowGroupReader, pf.NumRowGroups())
	for i := range rgs {
		rgs[i] = pf.RowGroup(i)
	}
	for _, l := range s.leaves {
		l.open(pf, rgs)
	}
	if s.workers > 1 {
		// The largest leaves go first, so that the workers finish at
		// about the same time.
		size := make([]int64, len(s.leaves))
		for rg := range pf.NumRowGroups() {
			md := pf.MetaData().RowGroup(rg)
			for i := range size {
				if cc, err := md.ColumnChunk(i); err == nil {
					size[i] += cc.TotalUncompressedSize()
				}
			}
		}
		slices.SortStableFunc(s.order, func(a, b int) int { return cmp.Compare(size[b], size[a]) })
	}
}

// finish checks that no leaf holds rows beyond those copied: a file whose
// columns hold more rows than its footer says is not rewritten.
func (s *copySource) finish() error {
	for i, l := range s.leaves {
		more, err := l.more()
		if err != nil {
			return fmt.Errorf("column %s: %w", s.pf.MetaData().Schema.Column(i).Path(), err)
		}
		if more {
			return fmt.Errorf("column %s holds more rows than the footer says", s.pf.MetaData().Schema.Column(i).Path())
		}
	}
	// Every value of the file is written, and the writers copied what
	// they keep (encoders, dictionaries, statistics): the page readers'
	// buffers can go back (pageBuffers).
	for _, l := range s.leaves {
		l.release()
	}
	return nil
}

// copyRows copies the next n rows (fewer at the end of the file) into the
// row group rg and returns how many it copied. Every leaf must yield the
// same number of rows.
func (s *copySource) copyRows(rg file.BufferedRowGroupWriter, n int64) (int64, error) {
	s.each(func(i int) {
		s.got[i], s.errs[i] = 0, nil
		cw, err := rg.Column(i)
		if err != nil {
			s.errs[i] = fmt.Errorf("column %d of the output: %w", i, err)
			return
		}
		if s.got[i], err = s.leaves[i].copyRows(cw, n); err != nil {
			s.errs[i] = fmt.Errorf("column %s: %w", s.pf.MetaData().Schema.Column(i).Path(), err)
		}
	})
	for i, err := range s.errs {
		if err != nil {
			return 0, err
		}
		if s.got[i] != s.got[0] {
			return 0, fmt.Errorf("column %s has %d rows where column %s has %d",
				s.pf.MetaData().Schema.Column(i).Path(), s.got[i], s.pf.MetaData().Schema.Column(0).Path(), s.got[0])
		}
	}
	return s.got[0], nil
}

// each calls fn for every leaf, on up to workers goroutines, the largest
// leaves first, and returns when all calls have.
func (s *copySource) each(fn func(leaf int)) {
	if s.workers == 1 {
		for _, i := range s.order {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for k := next.Add(1) - 1; k < int64(len(s.order)); k = next.Add(1) - 1 {
			fn(s.order[k])
		}
	}
	var wg sync.WaitGroup
	for range min(s.workers, len(s.order)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// leafCopier copies the rows of one leaf column across the file's row groups.
type leafCopier interface {
	open(pf *file.Reader, rowGroups []*file.RowGroupReader)
	copyRows(w file.ColumnChunkWriter, n int64) (int64, error)
	// more reports whether the file holds rows of the column not copied.
	more() (bool, error)
	// release closes the reader of the file's last chunk read, once the
	// column holds nothing of the file (more is false).
	release()
}

type levelReader[T any] interface {
	file.ColumnChunkReader
	ReadBatchInPage(batch int64, values []T, def, rep []int16) (int64, int, error)
}

type levelWriter[T any] interface {
	WriteBatch(values []T, def, rep []int16) (int64, error)
}

func newLeafCopier(col int, d *schema.Column, mem memory.Allocator) (leafCopier, error) {
	switch d.PhysicalType() {
	case parquet.Types.Boolean:
		return newLeaf[bool](col, d, mem, nil), nil
	case parquet.Types.Int32:
		return newLeaf[int32](col, d, mem, nil), nil
	case parquet.Types.Int64:
		return newLeaf[int64](col, d, mem, nil), nil
	case parquet.Types.Int96:
		return newLeaf[parquet.Int96](col, d, mem, nil), nil
	case parquet.Types.Float:
		return newLeaf[float32](col, d, mem, nil), nil
	case parquet.Types.Double:
		return newLeaf[float64](col, d, mem, nil), nil
	case parquet.Types.ByteArray:
		return newLeaf(col, d, mem, func(b parquet.ByteArray) []byte { return b }), nil
	case parquet.Types.FixedLenByteArray:
		return newLeaf(col, d, mem, func(b parquet.FixedLenByteArray) []byte { return b }), nil
	}
	return nil, fmt.Errorf("column %s: physical type %s", d.Path(), d.PhysicalType())
}

// leafRead is how many levels a leaf asks for at least in one read.
const leafRead = 4096

// leaf copies one column. The levels and values of the rows asked for are
// gathered, across pages and row groups, and written in one call per leaf,
// as pqarrow writes a record batch: the column writer checks page size and
// dictionary cost at the same points, so pages and encodings come out as
// pqarrow's do. Pending levels always start at a row; of a repeated
// column, the last row read may go on in the next read.
//
// Byte array values point into the reader's page buffer, which the next
// page overwrites: before each read, pending ones are copied into arena.
// Those of a dictionary-encoded page point into the chunk's dictionary
// page instead, which its page reader holds apart from data pages for the
// whole chunk (dictPages): they are copied only when the chunk ends.
type leaf[T any] struct {
	pf             *file.Reader
	rowGroups      []*file.RowGroupReader // of pf
	col            int
	mem            memory.Allocator // of pf's column readers
	maxDef, maxRep int16
	bytesOf        func(T) []byte // nil unless values are byte arrays
	pages          *dictPages     // the page reader of rd

	rowGroup int // next row group to open
	rd       levelReader[T]
	chunkEnd bool // rd has no more levels: every pending row is complete

	vals         []T
	def, rep     []int16
	levels       int // pending levels
	values       int // pending values
	owned        int // pending values already in arena
	arena, spare []byte

	// Of a repeated column: the pending levels scanned, the values among
	// them, and where each row after the first starts, with the values
	// before it (see scan).
	scanned, scannedValues int
	starts, valuesBefore   []int
}

func newLeaf[T any](col int, d *schema.Column, mem memory.Allocator, bytesOf func(T) []byte) *leaf[T] {
	l := &leaf[T]{col: col, mem: mem, maxDef: d.MaxDefinitionLevel(), maxRep: d.MaxRepetitionLevel(), bytesOf: bytesOf}
	l.grow(leafRead)
	return l
}

// open starts on the column of the next file. Nothing is pending: the
// file before was finished, and write cleared every value it wrote.
func (l *leaf[T]) open(pf *file.Reader, rowGroups []*file.RowGroupReader) {
	l.pf, l.rowGroups, l.rowGroup, l.rd, l.chunkEnd = pf, rowGroups, 0, nil, false
	l.pages = nil
	l.arena, l.spare = l.arena[:0], l.spare[:0]
}

func (l *leaf[T]) copyRows(cw file.ColumnChunkWriter, n int64) (int64, error) {
	w, ok := cw.(levelWriter[T])
	if !ok {
		return 0, fmt.Errorf("output column writer %T for values of %T", cw, *new(T))
	}
	for {
		rows, levels, values := l.complete(n)
		if rows == n {
			return rows, l.write(w, levels, values)
		}
		more, err := l.fill(n)
		if err != nil {
			return 0, err
		}
		if !more {
			// The column has no more rows: all pending ones are complete.
			return rows, l.write(w, levels, values)
		}
	}
}

// complete returns how many of the pending rows, at most n, are complete,
// and the levels and values they span. What it learns of the pending
// levels is kept, so that each level is looked at once however many reads
// a batch takes.
func (l *leaf[T]) complete(n int64) (rows int64, levels, values int) {
	if l.levels == 0 {
		return 0, 0, 0
	}
	if l.maxRep == 0 {
		// A level is a row; a read never goes past the rows asked for.
		levels = int(min(n, int64(l.levels)))
		if levels == l.levels {
			return int64(levels), levels, l.values
		}
		for _, d := range l.def[:levels] {
			if l.maxDef == 0 || d == l.maxDef {
				values++
			}
		}
		return int64(levels), levels, values
	}
	l.scan()
	switch k := int64(len(l.starts)); {
	case k >= n:
		return n, l.starts[n-1], l.valuesBefore[n-1]
	case l.chunkEnd:
		return k + 1, l.levels, l.values // rows never span row groups
	case k > 0:
		// The last pending row may go on in the next read.
		return k, l.starts[k-1], l.valuesBefore[k-1]
	}
	return 0, 0, 0
}

// scan records, for the pending levels not scanned yet, where each row
// after the first starts and how many values come before it.
func (l *leaf[T]) scan() {
	for ; l.scanned < l.levels; l.scanned++ {
		i := l.scanned
		if i > 0 && l.rep[i] == 0 {
			l.starts = append(l.starts, i)
			l.valuesBefore = append(l.valuesBefore, l.scannedValues)
		}
		if l.def[i] == l.maxDef {
			l.scannedValues++
		}
	}
}

// write writes the first pending levels and values and keeps the rest
// pending.
func (l *leaf[T]) write(w levelWriter[T], levels, values int) error {
	if levels > 0 {
		var def, rep []int16
		if l.def != nil {
			def = l.def[:levels]
		}
		if l.rep != nil {
			rep = l.rep[:levels]
		}
		if _, err := w.WriteBatch(l.vals[:values], def, rep); err != nil {
			return err
		}
	}
	if l.def != nil {
		copy(l.def, l.def[levels:l.levels])
	}
	if l.rep != nil {
		copy(l.rep, l.rep[levels:l.levels])
	}
	copy(l.vals, l.vals[values:l.values])
	clear(l.vals[l.values-values : l.values]) // no stale references to pages or arenas
	l.levels -= levels
	l.values -= values
	l.owned = max(0, l.owned-values)
	if l.maxRep > 0 {
		// Rows were written whole: levels is a row start or the end.
		m := 0
		for m < len(l.starts) && l.starts[m] <= levels {
			m++
		}
		l.starts = append(l.starts[:0], l.starts[m:]...)
		l.valuesBefore = append(l.valuesBefore[:0], l.valuesBefore[m:]...)
		for i := range l.starts {
			l.starts[i] -= levels
			l.valuesBefore[i] -= values
		}
		l.scanned -= levels
		l.scannedValues -= values
	}
	if l.bytesOf != nil {
		// The values still pending that point into arena move to spare,
		// so that arena can be filled again from its start.
		l.spare = l.spare[:0]
		for i := range l.owned {
			if !l.pages.inDict(l.bytesOf(l.vals[i])) {
				l.vals[i] = l.keep(&l.spare, l.vals[i])
			}
		}
		l.arena, l.spare = l.spare, l.arena
	}
	return nil
}

// keep copies v's bytes to the end of *buf and returns v pointing there.
func (l *leaf[T]) keep(buf *[]byte, v T) T {
	b := l.bytesOf(v)
	start := len(*buf)
	*buf = append(*buf, b...)
	kept := (*buf)[start:len(*buf):len(*buf)]
	switch any(v).(type) {
	case parquet.ByteArray:
		return any(parquet.ByteArray(kept)).(T)
	default:
		return any(parquet.FixedLenByteArray(kept)).(T)
	}
}

func (l *leaf[T]) release() {
	if l.pages != nil {
		_ = l.pages.PageReader.Close()
	}
	l.pages, l.rd = nil, nil
}

func (l *leaf[T]) more() (bool, error) {
	if l.levels > 0 || (l.rd != nil && l.rd.HasNext()) {
		return true, nil
	}
	if l.rd != nil && l.rd.Err() != nil {
		return false, l.rd.Err()
	}
	for rg := l.rowGroup; rg < l.pf.NumRowGroups(); rg++ {
		if l.pf.MetaData().RowGroup(rg).NumRows() > 0 {
			return true, nil
		}
	}
	return false, nil
}

// fill reads more levels, moving on to the next row group at the end of a
// chunk; false when the column has no more rows. need bounds the read of
// a column without repetition, where a level is a row.
func (l *leaf[T]) fill(need int64) (bool, error) {
	if l.bytesOf != nil {
		// Reading on may load the next page over these values.
		for i := l.owned; i < l.values; i++ {
			if !l.pages.inDict(l.bytesOf(l.vals[i])) {
				l.vals[i] = l.keep(&l.arena, l.vals[i])
			}
		}
		l.owned = l.values
	}
	for l.rd == nil || !l.rd.HasNext() {
		if l.rd != nil {
			if err := l.rd.Err(); err != nil {
				return false, err
			}
			if err := l.pages.err; err != nil {
				return false, fmt.Errorf("row group %d: %w", l.rowGroup-1, err)
			}
			if l.levels > 0 && !l.chunkEnd {
				// complete may now count the last pending row.
				l.chunkEnd = true
				return true, nil
			}
		}
		if l.rowGroup >= l.pf.NumRowGroups() {
			return false, nil
		}
		if l.bytesOf != nil {
			// The chunk's dictionary is not the next one's.
			for i := range l.values {
				if l.pages.inDict(l.bytesOf(l.vals[i])) {
					l.vals[i] = l.keep(&l.arena, l.vals[i])
				}
			}
		}
		pr, err := l.rowGroups[l.rowGroup].GetColumnPageReader(l.col)
		if err != nil {
			return false, fmt.Errorf("row group %d: %w", l.rowGroup, err)
		}
		l.pages = &dictPages{PageReader: pr}
		cr := file.NewColumnReader(l.pf.MetaData().Schema.Column(l.col), l.pages, l.mem, l.pf.BufferPool())
		rd, ok := cr.(levelReader[T])
		if !ok {
			return false, fmt.Errorf("row group %d: column reader %T for values of %T", l.rowGroup, cr, *new(T))
		}
		l.rowGroup++
		l.rd, l.chunkEnd = rd, false
	}
	batch := leafRead
	if l.maxRep == 0 {
		batch = max(int(need)-l.levels, 1)
	}
	l.grow(batch)
	var def, rep []int16
	if l.def != nil {
		def = l.def[l.levels:]
	}
	if l.rep != nil {
		rep = l.rep[l.levels:]
	}
	levels, values, err := l.rd.ReadBatchInPage(int64(batch), l.vals[l.values:], def, rep)
	if err == nil && l.pages.err != nil {
		err = fmt.Errorf("row group %d: %w", l.rowGroup-1, l.pages.err)
	}
	if err != nil {
		return false, err
	}
	l.levels += int(levels)
	l.values += values
	return true, nil
}

// grow makes room for batch more levels and values after the pending ones.
func (l *leaf[T]) grow(batch int) {
	if need := l.values + batch; need > len(l.vals) {
		l.vals = append(l.vals, make([]T, need-len(l.vals))...)
	}
	if need := l.levels + batch; l.maxDef > 0 && need > len(l.def) {
		l.def = append(l.def, make([]int16, need-len(l.def))...)
	}
	if need := l.levels + batch; l.maxRep > 0 && need > len(l.rep) {
		l.rep = append(l.rep, make([]int16, need-len(l.rep))...)
	}
}

// dictPages is a column chunk's page reader that remembers the bytes of the
// chunk's dictionary page, into which the values of its dictionary-encoded
// pages point. arrow-go decodes a dictionary page into a buffer of its own
// and a data page into another, and a chunk has one dictionary: should a
// data page ever be decoded over the dictionary, the values still pending
// that point into it are lost, and err says so.
type dictPages struct {
	file.PageReader
	dict []byte
	err  error
}

func (p *dictPages) Page() file.Page {
	pg := p.PageReader.Page()
	p.watch(pg)
	return pg
}

func (p *dictPages) GetDictionaryPage() (*file.DictionaryPage, error) {
	pg, err := p.PageReader.GetDictionaryPage()
	if pg != nil {
		p.watch(pg)
	}
	return pg, err
}

func (p *dictPages) watch(pg file.Page) {
	if pg == nil {
		return
	}
	b := pg.Data()
	if _, ok := pg.(*file.DictionaryPage); ok {
		if p.dict == nil {
			p.dict = b
		}
		return
	}
	if len(b) > 0 && p.overlaps(b) {
		p.dict, p.err = nil, fmt.Errorf("a data page was read over the column chunk's dictionary")
	}
}

// inDict reports whether b lies in the dictionary page's bytes (of no
// dictionary before the first chunk: p is nil).
func (p *dictPages) inDict(b []byte) bool {
	if p == nil || len(b) == 0 || len(p.dict) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p.dict)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return at >= start && at+uintptr(len(b)) <= start+uintptr(len(p.dict))
}

// overlaps reports whether b shares bytes with the dictionary page's.
func (p *dictPages) overlaps(b []byte) bool {
	if len(p.dict) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p.dict)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return at < start+uintptr(len(p.dict)) && start < at+uintptr(len(b))
}

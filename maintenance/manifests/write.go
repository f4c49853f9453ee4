package manifests

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"reflect"
	"slices"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// written is the rewrite of a plan's groups: the manifests written for one
// snapshot id, ready to go into a manifest list.
type written struct {
	snapshotID int64
	manifests  []iceberg.ManifestFile
	replaced   map[string]bool // the input manifests, by path
	entries    int64
	bytesIn    int64
	bytesOut   int64
}

func (w *written) paths() []string {
	out := make([]string, len(w.manifests))
	for i, m := range w.manifests {
		out[i] = m.FilePath()
	}
	return out
}

// rewriter writes the manifests of one attempt.
type rewriter struct {
	fs     iceio.WriteFileIO
	loc    table.LocationProvider
	meta   table.Metadata
	prefix string // names this run's manifests
	count  int    // manifests written so far, for unique names
}

// rewriteGroup reads the live entries of a group's manifests, sorts them by
// partition and writes them as EXISTING entries into manifests of about the
// target size. It checks the written manifests read back to the same
// entries with the same snapshot ids and sequence numbers before it returns
// them; on any error it removes what it wrote.
func (r *rewriter) rewriteGroup(g Group, target, snapshotID int64) (out []iceberg.ManifestFile, entries int64, err error) {
	defer func() {
		if err != nil {
			r.remove(out)
			out = nil
		}
	}()
	spec := r.meta.PartitionSpecByID(int(g.SpecID))
	if spec == nil {
		return nil, 0, fmt.Errorf("partition spec %d of the %s manifests is not in the table metadata", g.SpecID, g.Content)
	}
	var live []iceberg.ManifestEntry
	for _, m := range g.inputs {
		es, err := m.FetchEntries(r.fs, true)
		if err != nil {
			return nil, 0, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
		}
		live = append(live, es...)
	}
	if len(live) == 0 {
		// Only deleted entries: the manifests drop out of the list.
		return nil, 0, nil
	}
	slices.SortStableFunc(live, byPartition(spec))
	content := iceberg.ManifestContentData
	if g.Content == "deletes" {
		content = iceberg.ManifestContentDeletes
	}
	for rest := live; len(rest) > 0; {
		m, n, err := r.write(*spec, content, snapshotID, rest, target)
		if m != nil {
			out = append(out, m)
		}
		if err != nil {
			return out, 0, err
		}
		rest = rest[n:]
	}
	if err := r.check(live, out); err != nil {
		return out, 0, err
	}
	return out, int64(len(live)), nil
}

// write writes one manifest of the first entries, each EXISTING with its
// own snapshot id, data sequence number and file sequence number, until the
// file reaches target bytes (seen as the Avro writer flushes a block of
// entries, so it may pass the target by up to a block), and returns how many
// it took.
func (r *rewriter) write(spec iceberg.PartitionSpec, content iceberg.ManifestContent, snapshotID int64, entries []iceberg.ManifestEntry, target int64) (iceberg.ManifestFile, int, error) {
	r.count++
	path := r.loc.NewMetadataLocation(fmt.Sprintf("%s-m%d.avro", r.prefix, r.count))
	f, err := r.fs.Create(path)
	if err != nil {
		return nil, 0, fmt.Errorf("create manifest %s: %w", path, err)
	}
	cw := &countingWriter{w: f}
	fail := func(err error) (iceberg.ManifestFile, int, error) {
		_ = f.Close()
		_ = r.fs.Remove(path)
		return nil, 0, fmt.Errorf("write manifest %s: %w", path, err)
	}
	w, err := iceberg.NewManifestWriter(r.meta.Version(), cw, spec, r.meta.CurrentSchema(), snapshotID,
		iceberg.WithManifestWriterContent(content))
	if err != nil {
		return fail(err)
	}
	n := 0
	for _, e := range entries {
		if n > 0 && cw.n >= target {
			break
		}
		if err := w.Existing(e); err != nil {
			return fail(fmt.Errorf("entry %s: %w", e.DataFile().FilePath(), err))
		}
		n++
	}
	if err := w.Close(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = r.fs.Remove(path)
		return nil, 0, fmt.Errorf("write manifest %s: %w", path, err)
	}
	m, err := w.ToManifestFile(path, cw.n)
	if err != nil {
		_ = r.fs.Remove(path)
		return nil, 0, fmt.Errorf("describe manifest %s: %w", path, err)
	}
	return m, n, nil
}

// signature is what a rewrite must keep of an entry.
type signature struct {
	path             string
	content          iceberg.ManifestEntryContent
	snapshotID       int64
	dataSeq, fileSeq int64 // -1: none
	records          int64
	firstRowID       int64  // -1: none (before v3)
	referencedFile   string // deletion vectors: several share a Puffin file
	contentOffset    int64
	status           iceberg.ManifestEntryStatus
}

func signatureOf(e iceberg.ManifestEntry) signature {
	s := signature{path: e.DataFile().FilePath(), content: e.DataFile().ContentType(), snapshotID: e.SnapshotID(),
		dataSeq: -1, fileSeq: -1, records: e.DataFile().Count(), firstRowID: -1,
		status: iceberg.EntryStatusEXISTING}
	if n := e.SequenceNum(); n >= 0 {
		s.dataSeq = n
	}
	if n := e.FileSequenceNum(); n != nil {
		s.fileSeq = *n
	}
	if f, ok := e.DataFile().(interface{ FirstRowID() *int64 }); ok && f.FirstRowID() != nil {
		s.firstRowID = *f.FirstRowID()
	}
	if ref := e.DataFile().ReferencedDataFile(); ref != nil {
		s.referencedFile = *ref
	}
	if off := e.DataFile().ContentOffset(); off != nil {
		s.contentOffset = *off
	}
	return s
}

// check reads the written manifests back and compares their entries with
// the live entries they replace: the same files, each EXISTING with the same
// snapshot id, sequence numbers, row count and (v3) first row id. A rewrite
// that changed any of them would change what equality deletes apply to.
func (r *rewriter) check(live []iceberg.ManifestEntry, out []iceberg.ManifestFile) error {
	// Format v1 has no sequence numbers: its entries read as 0 from a
	// listed manifest and as unassigned from one not yet listed, and
	// every reader takes them as 0.
	noSeq := func(s signature) signature {
		if r.meta.Version() < 2 {
			s.dataSeq, s.fileSeq = -1, -1
		}
		return s
	}
	want := make([]signature, len(live))
	for i, e := range live {
		want[i] = noSeq(signatureOf(e))
	}
	var got []signature
	for _, m := range out {
		es, err := m.FetchEntries(r.fs, false)
		if err != nil {
			return fmt.Errorf("read back manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range es {
			s := noSeq(signatureOf(e))
			s.status = e.Status()
			got = append(got, s)
		}
	}
	cmpSig := func(a, b signature) int {
		return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.contentOffset, b.contentOffset),
			cmp.Compare(a.referencedFile, b.referencedFile), cmp.Compare(a.snapshotID, b.snapshotID),
			cmp.Compare(a.dataSeq, b.dataSeq), cmp.Compare(a.fileSeq, b.fileSeq))
	}
	slices.SortFunc(want, cmpSig)
	slices.SortFunc(got, cmpSig)
	if len(got) != len(want) {
		return fmt.Errorf("%w: %d live entries read, %d written", ErrEntriesChanged, len(want), len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("%w: entry %s was %+v, is %+v", ErrEntriesChanged, want[i].path, want[i], got[i])
		}
	}
	return nil
}

func (r *rewriter) remove(ms []iceberg.ManifestFile) {
	for _, m := range ms {
		_ = r.fs.Remove(m.FilePath()) // never referenced; the orphan pass gets any left
	}
}

// byPartition orders entries by their partition tuple in the spec's field
// order, then by path, so that each manifest written covers few partitions
// and its partition summary prunes it from scans of the others.
func byPartition(spec *iceberg.PartitionSpec) func(a, b iceberg.ManifestEntry) int {
	var ids []int
	for _, f := range spec.Fields() {
		ids = append(ids, f.FieldID)
	}
	return func(a, b iceberg.ManifestEntry) int {
		pa, pb := a.DataFile().Partition(), b.DataFile().Partition()
		for _, id := range ids {
			if c := compareValues(pa[id], pb[id]); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.DataFile().FilePath(), b.DataFile().FilePath())
	}
}

// compareValues orders two partition values of one field: nulls first, then
// by value for numbers, strings, booleans and bytes, else by their printed
// form (only the clustering depends on it).
func compareValues(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	if ab, ok := a.([]byte); ok {
		if bb, ok := b.([]byte); ok {
			return bytes.Compare(ab, bb)
		}
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() == vb.Kind() {
		switch va.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return cmp.Compare(va.Int(), vb.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return cmp.Compare(va.Uint(), vb.Uint())
		case reflect.Float32, reflect.Float64:
			return cmp.Compare(va.Float(), vb.Float())
		case reflect.String:
			return cmp.Compare(va.String(), vb.String())
		case reflect.Bool:
			return cmp.Compare(b2i(va.Bool()), b2i(vb.Bool()))
		}
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Package verify reads an Iceberg table from local disk without iceberg-go
// and reports the number of live rows of a snapshot and an order-independent
// checksum of them, so tests can check what maintenance did to a table by a
// path that shares no code with the one that wrote it.
//
// The table metadata JSON is parsed here, manifest lists and manifests are
// decoded as generic Avro records (internal/testenv/avrofile), Parquet data
// and delete files are read with arrow-go, and deletes are applied as the
// Iceberg spec says:
//
//   - entries with status DELETED are skipped; a null data sequence number is
//     inherited from the manifest-list entry (v2+), and is 0 for v1;
//   - a position delete (Parquet rows or a deletion vector) applies to a data
//     file when the paths match and delete seq >= data seq;
//   - an equality delete applies when delete seq > data seq and the delete's
//     spec is unpartitioned or spec id and partition tuple are equal; values
//     are compared in canonical form, NULL equals NULL;
//   - columns are found by Parquet field id; files without field ids fall back
//     to schema.name-mapping.default, then to column names. A column missing
//     from a file comes from an identity partition value, then from
//     initial-default, else is null.
//
// The checksum is the one of the project's earlier Node.js verifier, so the
// values recorded in testdata/fixtures/expected.json hold: each live row is
// projected onto the current schema and written as the JSON text of
// [[field_id, value], ...] in schema order, value in canonical form (null;
// true/false; int, long, date, time and timestamps as decimal strings of
// their count of days or micro- (nano-) seconds; float and double as the hex
// of their IEEE-754 bits, "NaN" for any NaN; decimal(P,S) as a plain decimal
// with S fraction digits; string as itself; uuid as 8-4-4-4-12 hex; binary
// and fixed as hex; struct as [[field_id, value], ...]; list as an array; map
// as [[key, value], ...] sorted by the JSON text of the key). The checksum
// is the sum modulo 2^64 of the first 8 bytes (big-endian) of the SHA-256 of
// each row's text, as 16 hex digits.
package verify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/iceberg-maintainer/maintainer/internal/testenv/avrofile"
)

// Options change what is verified and how.
type Options struct {
	// SnapshotID verifies that snapshot instead of the current one.
	SnapshotID string
	// StrictPaths matches position-delete file_path values to data-file paths
	// as raw strings (the spec's rule) instead of after mapping both to local
	// files; it proves a relocation rewrote the delete files.
	StrictPaths bool
	// Maps reads locations starting with Maps[i][0] from local folder
	// Maps[i][1]; needed only for files outside the table location.
	Maps [][2]string
}

// Result is the report on one snapshot.
type Result struct {
	Metadata                  string // the metadata file read
	FormatVersion             int
	SnapshotID                string // "" when the table has no snapshot
	SchemaID                  int
	DataFiles                 int
	PositionDeleteFiles       int
	DeletionVectors           int
	EqualityDeleteFiles       int
	RowsInDataFiles           int64
	PositionDeletedRows       int64
	EqualityDeletedRows       int64
	InvalidPositionDeleteRows int64 // position-delete rows with a null file_path or pos, ignored
	LiveRows                  int64
	Checksum                  string // 16 hex digits
	// Error is set (and only Metadata and SnapshotID besides) by
	// AllSnapshots for a snapshot that could not be read.
	Error string
}

// Snapshot verifies one snapshot (the current one unless opts.SnapshotID) of
// the table at target: its folder (holding metadata/) or a metadata file.
func Snapshot(target string, opts Options) (Result, error) {
	t, err := openTable(target, opts)
	if err != nil {
		return Result{}, err
	}
	return t.verify(opts.SnapshotID)
}

// AllSnapshots verifies every snapshot the metadata lists, in its order; a
// snapshot that cannot be read has Error set. It also returns the current
// snapshot id ("" when there is none). opts.SnapshotID is ignored.
func AllSnapshots(target string, opts Options) ([]Result, string, error) {
	t, err := openTable(target, opts)
	if err != nil {
		return nil, "", err
	}
	out := make([]Result, 0, len(t.meta.Snapshots))
	for _, s := range t.meta.Snapshots {
		r, err := t.verify(s.SnapshotID.String())
		if err != nil {
			r = Result{Metadata: t.file, SnapshotID: s.SnapshotID.String(), Error: err.Error()}
		}
		out = append(out, r)
	}
	cur, _ := t.currentSnapshot()
	return out, cur, nil
}

type table struct {
	file        string
	meta        *tableMetadata
	res         *resolver
	strictPaths bool
}

func openTable(target string, opts Options) (*table, error) {
	file, err := MetadataFile(target)
	if err != nil {
		return nil, fmt.Errorf("find the metadata file of %s: %w", target, err)
	}
	meta, err := readMetadata(file)
	if err != nil {
		return nil, err
	}
	res, err := newResolver(filepath.Dir(filepath.Dir(file)), meta.Location, opts.Maps)
	if err != nil {
		return nil, err
	}
	return &table{file: file, meta: meta, res: res, strictPaths: opts.StrictPaths}, nil
}

// currentSnapshot is current-snapshot-id, else the main branch's snapshot;
// "" when the table has none.
func (t *table) currentSnapshot() (string, error) {
	id := ""
	if t.meta.CurrentSnapshotID != nil {
		id = t.meta.CurrentSnapshotID.String()
	} else if main, ok := t.meta.Refs["main"]; ok {
		id = main.SnapshotID.String()
	}
	if id == "" || id == "-1" {
		return "", nil
	}
	n, err := parseID(json.Number(id))
	return strconv.FormatInt(n, 10), err
}

// pathKey is what a position delete's file_path is matched on.
func (t *table) pathKey(p string) string {
	if t.strictPaths {
		return p
	}
	return t.res.key(p)
}

// contentFile is one live manifest entry.
type contentFile struct {
	path          string
	content       int // 0 data, 1 position deletes, 2 equality deletes
	format        string
	specID        int
	partition     map[string]any
	partitionKeys []string // partition field names in spec order
	recordCount   int64
	dataSeq       int64
	equalityIDs   []int
	referenced    string // a deletion vector's data file
	contentOffset int64
	contentSize   int64
}

// plan lists the live data and delete files of snapshot id.
func (t *table) plan(id int64) (data, deletes []contentFile, err error) {
	i := slices.IndexFunc(t.meta.Snapshots, func(s snapshot) bool {
		n, err := parseID(s.SnapshotID)
		return err == nil && n == id
	})
	if i < 0 {
		return nil, nil, fmt.Errorf("snapshot %d not found in metadata", id)
	}
	snap := t.meta.Snapshots[i]
	type manifest struct {
		path   string
		seq    int64
		specID *int
	}
	var manifests []manifest
	if snap.ManifestList != "" {
		local, err := t.res.resolve(snap.ManifestList)
		if err != nil {
			return nil, nil, err
		}
		list, err := avrofile.Read(local)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range list.Records {
			p, _ := m["manifest_path"].(string)
			seq, _ := avrofile.Int(m["sequence_number"])
			mf := manifest{path: p, seq: seq}
			if spec, ok := avrofile.Int(m["partition_spec_id"]); ok {
				s := int(spec)
				mf.specID = &s
			}
			manifests = append(manifests, mf)
		}
	} else {
		for _, p := range snap.Manifests {
			manifests = append(manifests, manifest{path: p})
		}
	}
	for _, m := range manifests {
		local, err := t.res.resolve(m.path)
		if err != nil {
			return nil, nil, err
		}
		a, err := avrofile.Read(local)
		if err != nil {
			return nil, nil, err
		}
		specID := 0
		if m.specID != nil {
			specID = *m.specID
		} else if s, ok := a.Meta["partition-spec-id"]; ok {
			if specID, err = strconv.Atoi(string(s)); err != nil {
				return nil, nil, fmt.Errorf("%s: partition-spec-id %q: %w", m.path, s, err)
			}
		}
		partKeys, err := a.FieldNames("data_file", "partition")
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.path, err)
		}
		for _, e := range a.Records {
			if status, _ := avrofile.Int(e["status"]); status == 2 { // DELETED
				continue
			}
			df, ok := e["data_file"].(map[string]any)
			if !ok {
				return nil, nil, fmt.Errorf("%s: manifest entry without data_file", m.path)
			}
			f := contentFile{specID: specID, partitionKeys: partKeys}
			content, _ := avrofile.Int(df["content"])
			f.content = int(content)
			f.path, _ = df["file_path"].(string)
			format, _ := df["file_format"].(string)
			f.format = strings.ToUpper(format)
			f.partition, _ = df["partition"].(map[string]any)
			f.recordCount, _ = avrofile.Int(df["record_count"])
			if seq, ok := avrofile.Int(e["sequence_number"]); ok {
				f.dataSeq = seq
			} else if t.meta.FormatVersion >= 2 {
				f.dataSeq = m.seq
			}
			ids, _ := df["equality_ids"].([]any)
			for _, id := range ids {
				n, _ := avrofile.Int(id)
				f.equalityIDs = append(f.equalityIDs, int(n))
			}
			f.referenced, _ = df["referenced_data_file"].(string)
			f.contentOffset, _ = avrofile.Int(df["content_offset"])
			f.contentSize, _ = avrofile.Int(df["content_size_in_bytes"])
			if f.content == 0 {
				data = append(data, f)
			} else {
				deletes = append(deletes, f)
			}
		}
	}
	return data, deletes, nil
}

type positionDeletes struct {
	seq       int64
	positions map[int64]bool
}

type equalityDeletes struct {
	seq     int64
	specID  int
	partKey string
	global  bool // the delete's spec is unpartitioned
	ids     []int
	keys    map[string]bool // JSON text of the canonical values of ids
}

// verify reads snapshot id ("" = the current one).
func (t *table) verify(id string) (Result, error) {
	m := t.meta
	res := Result{Metadata: t.file, FormatVersion: m.FormatVersion, SchemaID: m.currentSchemaID()}
	if id == "" {
		cur, err := t.currentSnapshot()
		if err != nil || cur == "" {
			res.Checksum = fmt.Sprintf("%016x", 0)
			return res, err
		}
		id = cur
	}
	sid, err := parseID(json.Number(id))
	if err != nil {
		return res, fmt.Errorf("bad snapshot id %q", id)
	}
	res.SnapshotID = strconv.FormatInt(sid, 10)
	schema := m.schemaByID(res.SchemaID)
	if schema == nil {
		return res, fmt.Errorf("%s: no current schema %d", t.file, res.SchemaID)
	}
	defs := m.fieldsByID(schema)
	names, err := m.nameMapping()
	if err != nil {
		return res, err
	}
	data, deletes, err := t.plan(sid)
	if err != nil {
		return res, err
	}
	res.DataFiles = len(data)

	posDeletes := map[string][]positionDeletes{}
	var eqDeletes []equalityDeletes
	for _, d := range deletes {
		switch {
		case d.content == 1 && d.format == "PUFFIN":
			res.DeletionVectors++
			local, err := t.res.resolve(d.path)
			if err != nil {
				return res, err
			}
			positions, err := readDeletionVector(local, d.contentOffset, d.contentSize)
			if err != nil {
				return res, err
			}
			k := t.pathKey(d.referenced)
			posDeletes[k] = append(posDeletes[k], positionDeletes{seq: d.dataSeq, positions: positions})
		case d.format != "PARQUET":
			return res, fmt.Errorf("unsupported delete file format %s: %s", d.format, d.path)
		case d.content == 1:
			res.PositionDeleteFiles++
			byFile, invalid, err := t.readPositionDeletes(d.path)
			if err != nil {
				return res, err
			}
			res.InvalidPositionDeleteRows += invalid
			for k, positions := range byFile {
				posDeletes[k] = append(posDeletes[k], positionDeletes{seq: d.dataSeq, positions: positions})
			}
		case d.content == 2:
			res.EqualityDeleteFiles++
			e, err := t.readEqualityDeletes(d, defs)
			if err != nil {
				return res, err
			}
			eqDeletes = append(eqDeletes, e)
		default:
			return res, fmt.Errorf("unknown delete content %d: %s", d.content, d.path)
		}
	}

	var checksum uint64
	for _, f := range data {
		if f.format != "PARQUET" {
			return res, fmt.Errorf("unsupported data file format %s: %s", f.format, f.path)
		}
		pf, err := t.openParquet(f.path)
		if err != nil {
			return res, err
		}
		nrows := pf.numRows
		res.RowsInDataFiles += nrows
		spec := m.spec(f.specID)
		// locate finds field id in the file, else a constant for it.
		locate := func(id int) (column, error) {
			if i, ok := pf.byID[id]; ok {
				return column{index: i}, nil
			}
			def := defs[id]
			if !pf.hasIDs {
				candidates := names[id]
				if candidates == nil && def != nil {
					candidates = []string{def.Name}
				}
				for _, n := range candidates {
					if i, ok := pf.byName[n]; ok {
						return column{index: i}, nil
					}
				}
			}
			if spec != nil && f.partition != nil {
				// Partition tuples are written in spec field order.
				idx := slices.IndexFunc(spec.Fields, func(p partitionField) bool { return p.SourceID == id && p.Transform == "identity" })
				if idx >= 0 && idx < len(f.partitionKeys) {
					return column{index: -1, constant: f.partition[f.partitionKeys[idx]]}, nil
				}
			}
			if def != nil && len(def.InitialDefault) > 0 {
				v, err := rawDefault(def.InitialDefault, &def.Type)
				return column{index: -1, constant: v}, err
			}
			return column{index: -1}, nil
		}
		cols := make([]column, len(schema.Fields))
		for i := range schema.Fields {
			fd := &schema.Fields[i]
			if cols[i], err = locate(fd.ID); err != nil {
				return res, err
			}
			cols[i].id, cols[i].typ = fd.ID, &fd.Type
		}
		var applicable []equalityDeletes
		for _, e := range eqDeletes {
			if e.seq > f.dataSeq && (e.global || (e.specID == f.specID && e.partKey == partitionKey(f.partition))) {
				applicable = append(applicable, e)
			}
		}
		eqCols := map[int]column{}
		for _, e := range applicable {
			for _, id := range e.ids {
				if _, ok := eqCols[id]; ok {
					continue
				}
				c, err := locate(id)
				if err != nil {
					return res, err
				}
				c.id, c.typ = id, &defs[id].Type
				eqCols[id] = c
			}
		}
		if err := pf.load(append(slices.Collect(maps.Values(eqCols)), cols...)); err != nil {
			return res, fmt.Errorf("read %s: %w", f.path, err)
		}
		deleted := map[int64]bool{}
		for _, pd := range posDeletes[t.pathKey(f.path)] {
			if pd.seq < f.dataSeq { // position deletes apply to data of seq <= theirs
				continue
			}
			for p := range pd.positions {
				if p < nrows {
					deleted[p] = true
				}
			}
		}
		var posDel, eqDel, live int64
		row := make([]any, len(cols))
		var text []byte
		for i := range nrows {
			if deleted[i] {
				posDel++
				continue
			}
			isDeleted := false
			for _, e := range applicable {
				key := make([]any, len(e.ids))
				for j, id := range e.ids {
					if key[j], err = pf.value(eqCols[id], int(i)); err != nil {
						return res, fmt.Errorf("%s: %w", f.path, err)
					}
				}
				if e.keys[string(appendJSON(nil, key))] {
					isDeleted = true
					break
				}
			}
			if isDeleted {
				eqDel++
				continue
			}
			live++
			for j, c := range cols {
				v, err := pf.value(c, int(i))
				if err != nil {
					return res, fmt.Errorf("%s: field %d: %w", f.path, c.id, err)
				}
				row[j] = []any{c.id, v}
			}
			text = appendJSON(text[:0], row)
			sum := sha256.Sum256(text)
			checksum += binary.BigEndian.Uint64(sum[:8])
		}
		res.PositionDeletedRows += posDel
		res.EqualityDeletedRows += eqDel
		res.LiveRows += live
	}
	res.Checksum = fmt.Sprintf("%016x", checksum)
	return res, nil
}

// readPositionDeletes reads a position-delete file: the deleted positions by
// pathKey of their data file, and the number of rows with a null file_path
// or pos (ignored, as Impala does).
func (t *table) readPositionDeletes(location string) (map[string]map[int64]bool, int64, error) {
	pf, err := t.openParquet(location)
	if err != nil {
		return nil, 0, err
	}
	pathCol, ok := pf.column(2147483546, "file_path")
	posCol, ok2 := pf.column(2147483545, "pos")
	if !ok || !ok2 {
		return nil, 0, fmt.Errorf("position delete file without file_path/pos: %s", location)
	}
	if err := pf.load([]column{pathCol, posCol}); err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", location, err)
	}
	paths, pos := pf.arrays[pathCol.index], pf.arrays[posCol.index]
	out := map[string]map[int64]bool{}
	var invalid int64
	for i := range int(pf.numRows) {
		p, okP := bytesValue(paths, i)
		n, okN := integer(pos, i)
		if paths.IsNull(i) || pos.IsNull(i) || !okP || !okN {
			invalid++
			continue
		}
		k := t.pathKey(string(p))
		if out[k] == nil {
			out[k] = map[int64]bool{}
		}
		out[k][n] = true
	}
	return out, invalid, nil
}

func (t *table) readEqualityDeletes(d contentFile, defs map[int]*field) (equalityDeletes, error) {
	e := equalityDeletes{seq: d.dataSeq, specID: d.specID, partKey: partitionKey(d.partition),
		global: t.meta.unpartitioned(d.specID), ids: d.equalityIDs, keys: map[string]bool{}}
	if len(e.ids) == 0 {
		return e, fmt.Errorf("equality delete file without equality_ids: %s", d.path)
	}
	pf, err := t.openParquet(d.path)
	if err != nil {
		return e, err
	}
	cols := make([]column, len(e.ids))
	for j, id := range e.ids {
		def := defs[id]
		if def == nil {
			return e, fmt.Errorf("equality field %d of %s is in no schema", id, d.path)
		}
		c, ok := pf.column(id, def.Name)
		if !ok {
			return e, fmt.Errorf("equality field %d not found in delete file %s", id, d.path)
		}
		c.id, c.typ = id, &def.Type
		cols[j] = c
	}
	if err := pf.load(cols); err != nil {
		return e, fmt.Errorf("read %s: %w", d.path, err)
	}
	for i := range int(pf.numRows) {
		key := make([]any, len(cols))
		for j, c := range cols {
			if key[j], err = pf.value(c, i); err != nil {
				return e, fmt.Errorf("%s: %w", d.path, err)
			}
		}
		e.keys[string(appendJSON(nil, key))] = true
	}
	return e, nil
}

// partitionKey identifies a partition tuple; tuples of one spec decode to
// the same Go types, so their printed form compares them.
func partitionKey(p map[string]any) string {
	keys := slices.Sorted(maps.Keys(p))
	var b strings.Builder
	for _, k := range keys {
		v := p[k]
		if n, ok := avrofile.Int(v); ok {
			v = n
		}
		fmt.Fprintf(&b, "%q=%#v;", k, v)
	}
	return b.String()
}

// column is where a field's values come from: a top-level column of the
// file (index >= 0) or a constant.
type column struct {
	id       int
	typ      *icebergType
	index    int
	constant any
}

// parquetFile is one open Parquet file with the top-level columns read so far.
type parquetFile struct {
	fr      *pqarrow.FileReader
	pf      *file.Reader
	numRows int64
	byID    map[int]int
	byName  map[string]int
	hasIDs  bool
	arrays  map[int]arrow.Array
}

func (t *table) openParquet(location string) (*parquetFile, error) {
	local, err := t.res.resolve(location)
	if err != nil {
		return nil, err
	}
	pf, err := file.OpenParquetFile(local, false)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", location, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		pf.Close()
		return nil, fmt.Errorf("open %s: %w", location, err)
	}
	p := &parquetFile{fr: fr, pf: pf, numRows: pf.NumRows(), byID: map[int]int{}, byName: map[string]int{}, arrays: map[int]arrow.Array{}}
	for i, f := range fr.Manifest.Fields {
		if id, ok := arrowFieldID(*f.Field); ok {
			p.byID[id] = i
			p.hasIDs = true
		}
		p.byName[f.Field.Name] = i
	}
	return p, nil
}

// column finds a top-level column by field id, else by name.
func (p *parquetFile) column(id int, name string) (column, bool) {
	if i, ok := p.byID[id]; ok {
		return column{index: i}, true
	}
	if i, ok := p.byName[name]; ok {
		return column{index: i}, true
	}
	return column{}, false
}

// load reads the file's columns that cols name, then closes the file.
func (p *parquetFile) load(cols []column) error {
	defer p.pf.Close()
	rowGroups := make([]int, p.pf.NumRowGroups())
	for i := range rowGroups {
		rowGroups[i] = i
	}
	for _, c := range cols {
		if c.index < 0 || p.arrays[c.index] != nil {
			continue
		}
		cr, err := p.fr.GetColumn(context.Background(), c.index)
		if err != nil {
			return err
		}
		chunked, err := p.fr.ReadColumn(rowGroups, cr)
		if err != nil {
			return err
		}
		arr, err := array.Concatenate(chunked.Chunks(), memory.DefaultAllocator)
		chunked.Release()
		if err != nil {
			return err
		}
		if int64(arr.Len()) != p.numRows {
			return fmt.Errorf("read %d rows of column %d, footer says %d", arr.Len(), c.index, p.numRows)
		}
		p.arrays[c.index] = arr
	}
	return nil
}

func (p *parquetFile) value(c column, row int) (any, error) {
	if c.index < 0 {
		return canonConstant(c.constant, c.typ)
	}
	return canonArrow(p.arrays[c.index], row, c.typ)
}

package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/iceberg-maintainer/maintainer/internal/testenv/avrofile"
)

// A fixture's paths are its writer's paths (/test-warehouse/..., hdfs://...,
// ./lineitem_iceberg, file://data/...). A copy that iceberg-go can load and
// commit to has every one of them replaced by the copy's own location: in the
// metadata JSON, the manifest lists, the manifests, the position-delete files
// and the deletion vectors' Puffin footers. Everything else is copied byte for
// byte.

// posDeletePathID is the field id of the file_path column of position-delete
// files; manifests keep its lower/upper bounds, which are therefore paths.
const posDeletePathID = 2147483546

var (
	hadoopMetadataName   = regexp.MustCompile(`^v(\d+)\.metadata\.json$`)   // v3.metadata.json
	numberedMetadataName = regexp.MustCompile(`^(\d+)-.+\.metadata\.json$`) // PyIceberg: 00002-<uuid>.metadata.json
	schemeAndAuthority   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/]*`)
)

// relocation is one table being copied; rel paths are slash-separated and
// relative to the table folder.
type relocation struct {
	src, tmp string
	oldLoc   string // the location the writer recorded
	oldBare  string // oldLoc without scheme, authority, "./" and trailing "/"
	newLoc   string
	metas    []metadataDoc     // oldest first; the last is current
	renamed  map[string]string // rel -> rel of metadata files renamed to vN
	sizes    map[string]int64  // rel -> size of files rewritten (-1: missing in the source)
	warnings []string
}

type metadataDoc struct {
	name    string
	version int
	doc     map[string]any // numbers as json.Number: snapshot ids exceed 2^53
}

// relocateTable copies the table folder src to dst (absent or empty) with
// every location rewritten to dst's absolute path, and returns the copy's
// current metadata file and the defects the copy inherits from src. The copy
// is built next to dst and renamed into place when complete.
func relocateTable(src, dst string) (metadataFile string, warnings []string, err error) {
	if dst, err = filepath.Abs(dst); err != nil {
		return "", nil, err
	}
	if entries, err := os.ReadDir(dst); err == nil && len(entries) > 0 {
		return "", nil, fmt.Errorf("relocate %s: destination %s is not empty", src, dst)
	}
	r := &relocation{src: src, newLoc: filepath.ToSlash(dst), renamed: map[string]string{}, sizes: map[string]int64{}}
	if err := r.readMetadata(); err != nil {
		return "", nil, fmt.Errorf("relocate %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", nil, err
	}
	if r.tmp, err = os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".relocating-"); err != nil {
		return "", nil, err
	}
	err = r.write()
	if err == nil {
		err = os.Chmod(r.tmp, 0o755)
	}
	if err == nil {
		if rmErr := os.Remove(dst); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			err = rmErr
		}
	}
	if err == nil {
		err = os.Rename(r.tmp, dst)
	}
	if err != nil {
		os.RemoveAll(r.tmp)
		return "", nil, fmt.Errorf("relocate %s to %s: %w", src, dst, err)
	}
	cur := r.metas[len(r.metas)-1]
	return filepath.Join(dst, "metadata", fmt.Sprintf("v%d.metadata.json", cur.version)), r.warnings, nil
}

// readMetadata loads every metadata file. They become v1, v2, ... in version
// order; the highest is current, as for iceberg-go's hadoop catalog.
func (r *relocation) readMetadata() error {
	entries, err := os.ReadDir(filepath.Join(r.src, "metadata"))
	if err != nil {
		return err
	}
	byVersion := map[int]string{}
	for _, e := range entries {
		var version int
		if m := hadoopMetadataName.FindStringSubmatch(e.Name()); m != nil {
			version, _ = strconv.Atoi(m[1])
		} else if m := numberedMetadataName.FindStringSubmatch(e.Name()); m != nil {
			version, _ = strconv.Atoi(m[1])
			version++ // 00000-<uuid> becomes v1
		} else if strings.HasSuffix(e.Name(), ".metadata.json") {
			return fmt.Errorf("metadata/%s: unsupported metadata file name", e.Name())
		} else {
			continue
		}
		if other, dup := byVersion[version]; dup || version < 1 {
			return fmt.Errorf("metadata/%s: cannot be version %d (also %q)", e.Name(), version, other)
		}
		byVersion[version] = e.Name()
	}
	if len(byVersion) == 0 {
		return errors.New("no *.metadata.json in metadata/")
	}
	for _, v := range slices.Sorted(maps.Keys(byVersion)) {
		name := byVersion[v]
		doc, err := readJSONFile(filepath.Join(r.src, "metadata", name))
		if err != nil {
			return err
		}
		if vn := fmt.Sprintf("v%d.metadata.json", v); vn != name {
			r.renamed["metadata/"+name] = "metadata/" + vn
		}
		r.metas = append(r.metas, metadataDoc{name: name, version: v, doc: doc})
	}
	r.oldLoc, _ = r.metas[len(r.metas)-1].doc["location"].(string)
	if r.oldBare = barePath(r.oldLoc); r.oldBare == "" {
		return fmt.Errorf("table location %q has no path to relocate", r.oldLoc)
	}
	return nil
}

// barePath is the part every spelling of a location shares: without
// "scheme://authority" (also of the malformed "file://data/...", whose first
// segment parses as a host), a "file:" scheme, a leading "./" and trailing
// slashes. "hdfs://nn:8020/wh/t", "file:/wh/t" and "/wh/t" all give "/wh/t".
func barePath(p string) string {
	p = schemeAndAuthority.ReplaceAllString(p, "")
	if strings.HasPrefix(p, "file:/") {
		p = strings.TrimPrefix(p, "file:")
	}
	return strings.TrimRight(strings.TrimPrefix(p, "./"), "/")
}

// rel returns location p relative to the old table location, or an error
// when p lies outside it.
func (r *relocation) rel(p string) (string, error) {
	b := barePath(p)
	if b == r.oldBare {
		return "", nil
	}
	rel, ok := strings.CutPrefix(b, r.oldBare+"/")
	if !ok || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return "", fmt.Errorf("%q is outside the table location %q", p, r.oldLoc)
	}
	if to, ok := r.renamed[rel]; ok {
		rel = to
	}
	return rel, nil
}

func (r *relocation) location(rel string) string {
	if rel == "" {
		return r.newLoc
	}
	return r.newLoc + "/" + rel
}

func (r *relocation) mapPath(p string) (string, error) {
	rel, err := r.rel(p)
	return r.location(rel), err
}

// mapProperty maps a property that is a path inside the table, or an
// ancestor folder of the table such as Impala's iceberg.catalog_location
// (which becomes the same ancestor of the new location). Other values stay.
func (r *relocation) mapProperty(v string) string {
	if mapped, err := r.mapPath(v); err == nil {
		return mapped
	}
	b := barePath(v)
	if b == "" || !strings.Contains(v, "/") || !strings.HasPrefix(r.oldBare, b+"/") {
		return v
	}
	loc := r.newLoc
	for up := strings.Count(r.oldBare[len(b):], "/"); up > 0; up-- {
		loc = path.Dir(loc)
	}
	return loc
}

func (r *relocation) srcFile(rel string) string { return filepath.Join(r.src, filepath.FromSlash(rel)) }
func (r *relocation) tmpFile(rel string) string { return filepath.Join(r.tmp, filepath.FromSlash(rel)) }

// write fills r.tmp: a plain copy first, then, depth first, the files that
// hold locations or the sizes of rewritten files.
func (r *relocation) write() error {
	if err := r.copyTree(); err != nil {
		return err
	}
	for _, m := range r.metas {
		for _, snap := range jsonObjects(m.doc["snapshots"]) {
			if p, ok := snap["manifest-list"].(string); ok {
				if _, err := r.rewriteAvro(p, r.fixManifestList); err != nil {
					return err
				}
			}
			v1Manifests, _ := snap["manifests"].([]any) // v1 snapshots without a manifest list
			for _, p := range v1Manifests {
				s, _ := p.(string)
				if _, err := r.rewriteAvro(s, func(a *avrofile.File) error { return r.fixManifest(a, nil) }); err != nil {
					return err
				}
			}
		}
	}
	for _, m := range r.metas {
		if err := r.fixMetadata(m.doc); err != nil {
			return fmt.Errorf("metadata/%s: %w", m.name, err)
		}
		b, err := marshalJSON(m.doc, "  ")
		if err == nil {
			err = os.WriteFile(r.tmpFile(fmt.Sprintf("metadata/v%d.metadata.json", m.version)), b, 0o644)
		}
		if err != nil {
			return err
		}
	}
	for rel, size := range r.sizes { // a Hadoop checksum of a rewritten file no longer matches it
		if size >= 0 {
			if err := os.Remove(r.tmpFile(path.Join(path.Dir(rel), "."+path.Base(rel)+".crc"))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	hint := strconv.Itoa(r.metas[len(r.metas)-1].version)
	return os.WriteFile(r.tmpFile("metadata/version-hint.text"), []byte(hint), 0o644)
}

// copyTree copies the table folder except its metadata JSON files and
// version hints (and their .crc files), which write replaces.
func (r *relocation) copyTree() error {
	return filepath.WalkDir(r.src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(r.src, p)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(d.Name(), "."), ".crc")
		switch {
		case d.IsDir():
			return os.MkdirAll(filepath.Join(r.tmp, rel), 0o755)
		case filepath.Dir(rel) == "metadata" && (strings.HasSuffix(name, ".metadata.json") || strings.HasPrefix(name, "version-hint.")):
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("copy %s: not a regular file", p)
		}
		return copyFile(p, filepath.Join(r.tmp, rel))
	})
}

// rewriteAvro rewrites the manifest or manifest list at location p with fix,
// once, and returns its rel path. A file the source lacks is a warning: the
// copy is as incomplete as the source.
func (r *relocation) rewriteAvro(p string, fix func(*avrofile.File) error) (string, error) {
	rel, err := r.rel(p)
	if err != nil {
		return "", err
	}
	if _, done := r.sizes[rel]; done {
		return rel, nil
	}
	if _, err := os.Stat(r.srcFile(rel)); errors.Is(err, fs.ErrNotExist) {
		r.warnings = append(r.warnings, rel+" is missing from the fixture; what needs it stays unreadable")
		r.sizes[rel] = -1
		return rel, nil
	}
	a, err := avrofile.Read(r.srcFile(rel))
	if err == nil {
		err = fix(a)
	}
	if err == nil {
		// The sync marker comes from the path, so a copy is reproducible.
		sum := sha256.Sum256([]byte(rel))
		r.sizes[rel], err = a.Write(r.tmpFile(rel), [16]byte(sum[:16]))
	}
	if err != nil {
		return "", fmt.Errorf("rewrite %s: %w", rel, err)
	}
	return rel, nil
}

// fixManifestList rewrites the manifests a manifest list names and maps
// their paths and lengths.
func (r *relocation) fixManifestList(a *avrofile.File) error {
	for _, entry := range a.Records {
		p, _ := entry["manifest_path"].(string)
		rel, err := r.rewriteAvro(p, func(m *avrofile.File) error { return r.fixManifest(m, entry) })
		if err != nil {
			return err
		}
		entry["manifest_path"] = r.location(rel)
		if size := r.sizes[rel]; size >= 0 {
			entry["manifest_length"] = size
		}
	}
	return nil
}

// fixManifest maps the paths in a manifest's entries, rewrites the position
// deletes they name (and records their new sizes), and completes a header
// that lacks the keys the spec requires, from the manifest-list entry (nil
// for a v1 snapshot without a manifest list).
func (r *relocation) fixManifest(a *avrofile.File, listEntry map[string]any) error {
	for _, e := range a.Records {
		df, ok := e["data_file"].(map[string]any)
		if !ok {
			return errors.New("manifest entry without data_file")
		}
		p, _ := df["file_path"].(string)
		rel, err := r.rel(p)
		if err != nil {
			return err
		}
		if avroInt(df["content"]) == 1 { // position deletes or a deletion vector
			format, _ := df["file_format"].(string)
			if err := r.rewriteDeleteFile(rel, strings.ToUpper(format)); err != nil {
				return err
			}
		}
		df["file_path"] = r.location(rel)
		if size, ok := r.sizes[rel]; ok && size >= 0 {
			df["file_size_in_bytes"] = size
		}
		if ref, ok := df["referenced_data_file"].(string); ok {
			if df["referenced_data_file"], err = r.mapPath(ref); err != nil {
				return err
			}
		}
		for _, key := range []string{"lower_bounds", "upper_bounds"} {
			bounds, _ := df[key].([]any)
			for _, b := range bounds {
				kv, _ := b.(map[string]any)
				if avroInt(kv["key"]) != posDeletePathID {
					continue
				}
				v, _ := kv["value"].([]byte)
				mapped, err := r.mapPath(string(v))
				if err != nil {
					return fmt.Errorf("%s of file_path: %w", key, err)
				}
				kv["value"] = []byte(mapped)
			}
		}
	}
	if listEntry != nil {
		r.completeHeader(a.Meta, listEntry)
	}
	return nil
}

// completeHeader adds the manifest header keys the spec requires from v2 on
// where the writer left them out: Impala's test tables have only the Avro
// keys, and iceberg-go rejects a delete manifest without "content".
func (r *relocation) completeHeader(meta map[string][]byte, listEntry map[string]any) {
	doc := r.metas[len(r.metas)-1].doc
	formatVersion, _ := jsonInt(doc["format-version"])
	if formatVersion < 2 {
		return
	}
	specID := int64(avroInt(listEntry["partition_spec_id"]))
	schemaID, ok := jsonInt(findJSONObject(doc["snapshots"], "snapshot-id", int64(avroInt(listEntry["added_snapshot_id"])))["schema-id"])
	if !ok {
		schemaID, _ = jsonInt(doc["current-schema-id"])
	}
	specFields, _ := marshalJSON(findJSONObject(doc["partition-specs"], "spec-id", specID)["fields"], "")
	schema, _ := marshalJSON(findJSONObject(doc["schemas"], "schema-id", schemaID), "")
	content := "data"
	if avroInt(listEntry["content"]) == 1 {
		content = "deletes"
	}
	for key, value := range map[string]string{
		"format-version":    strconv.FormatInt(formatVersion, 10),
		"content":           content,
		"partition-spec-id": strconv.FormatInt(specID, 10),
		"partition-spec":    string(specFields),
		"schema":            string(schema),
	} {
		if _, ok := meta[key]; !ok && value != "null" {
			meta[key] = []byte(value)
		}
	}
}

// rewriteDeleteFile rewrites a position-delete file (Parquet) or deletion
// vector (Puffin) at rel, once.
func (r *relocation) rewriteDeleteFile(rel, format string) error {
	if _, done := r.sizes[rel]; done {
		return nil
	}
	if _, err := os.Stat(r.srcFile(rel)); errors.Is(err, fs.ErrNotExist) {
		r.warnings = append(r.warnings, "delete file "+rel+" is missing from the fixture")
		r.sizes[rel] = -1
		return nil
	}
	var size int64
	var err error
	switch format {
	case "PARQUET":
		size, err = r.rewritePositionDeletes(rel)
	case "PUFFIN":
		size, err = r.rewritePuffin(rel)
	default:
		err = fmt.Errorf("position deletes in %s files are not supported", format)
	}
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", rel, err)
	}
	r.sizes[rel] = size
	return nil
}

// rewritePositionDeletes copies a position-delete file with its file_path
// values mapped; the other columns (pos, the optional row struct), field ids,
// key/value metadata and the compression codec are kept.
func (r *relocation) rewritePositionDeletes(rel string) (int64, error) {
	pf, err := file.OpenParquetFile(r.srcFile(rel), false)
	if err != nil {
		return 0, err
	}
	defer pf.Close()
	var props []parquet.WriterProperty
	if pf.NumRowGroups() > 0 {
		if col, err := pf.MetaData().RowGroup(0).ColumnChunk(0); err == nil {
			props = append(props, parquet.WithCompression(col.Compression()))
		}
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return 0, err
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return 0, err
	}
	defer tbl.Release()
	pathCol := slices.IndexFunc(tbl.Schema().Fields(), func(f arrow.Field) bool {
		id, _ := f.Metadata.GetValue("PARQUET:field_id")
		return id == strconv.Itoa(posDeletePathID)
	})
	if pathCol < 0 {
		return 0, fmt.Errorf("no file_path column (field id %d)", posDeletePathID)
	}
	var keys, values []string // the footer's key/value metadata, e.g. iceberg.schema
	if kv := pf.MetaData().KeyValueMetadata(); kv != nil {
		for i, k := range kv.Keys() {
			if k != "ARROW:schema" {
				keys, values = append(keys, k), append(values, kv.Values()[i])
			}
		}
	}
	md := arrow.NewMetadata(keys, values)
	schema := arrow.NewSchema(tbl.Schema().Fields(), &md)
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		chunks := tbl.Column(i).Data().Chunks()
		if cols[i], err = array.Concatenate(chunks, memory.DefaultAllocator); err != nil {
			return 0, err
		}
		defer cols[i].Release()
	}
	paths, ok := cols[pathCol].(*array.String)
	if !ok {
		return 0, fmt.Errorf("file_path column is %s, want string", cols[pathCol].DataType())
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := range paths.Len() {
		if paths.IsNull(i) {
			b.AppendNull()
			continue
		}
		mapped, err := r.mapPath(paths.Value(i))
		if err != nil {
			return 0, err
		}
		b.Append(mapped)
	}
	cols[pathCol] = b.NewArray()
	defer cols[pathCol].Release()
	rec := array.NewRecordBatch(schema, cols, tbl.NumRows())
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
	if err != nil {
		return 0, err
	}
	if err := w.Write(rec); err != nil {
		return 0, errors.Join(err, w.Close())
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return int64(buf.Len()), os.WriteFile(r.tmpFile(rel), buf.Bytes(), 0o644)
}

// rewritePuffin copies a Puffin file with each blob's referenced-data-file
// property mapped. Blobs precede the footer, so their offsets stay valid.
func (r *relocation) rewritePuffin(rel string) (int64, error) {
	const magic = "PFA1"
	b, err := os.ReadFile(r.srcFile(rel))
	if err != nil {
		return 0, err
	}
	n := len(b)
	if n < 20 || string(b[:4]) != magic || string(b[n-4:]) != magic {
		return 0, errors.New("not a Puffin file")
	}
	// The file ends: footer magic, JSON payload, payload size (4), flags (4), magic.
	size := int(binary.LittleEndian.Uint32(b[n-12:]))
	flags := binary.LittleEndian.Uint32(b[n-8:])
	start := n - 12 - size
	if start < 8 || string(b[start-4:start]) != magic {
		return 0, errors.New("corrupt Puffin footer")
	}
	if flags&1 != 0 {
		return 0, errors.New("compressed Puffin footers are not supported")
	}
	footer, err := decodeJSONObject(b[start : n-12])
	if err != nil {
		return 0, fmt.Errorf("Puffin footer: %w", err)
	}
	for _, blob := range jsonObjects(footer["blobs"]) {
		props, _ := blob["properties"].(map[string]any)
		if p, ok := props["referenced-data-file"].(string); ok {
			if props["referenced-data-file"], err = r.mapPath(p); err != nil {
				return 0, err
			}
		}
	}
	payload, err := marshalJSON(footer, "")
	if err != nil {
		return 0, err
	}
	out := slices.Concat(b[:start], payload)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(payload)))
	out = binary.LittleEndian.AppendUint32(out, flags)
	out = append(out, magic...)
	return int64(len(out)), os.WriteFile(r.tmpFile(rel), out, 0o644)
}

// fixMetadata maps every location in a table metadata document.
func (r *relocation) fixMetadata(doc map[string]any) error {
	var errs []error
	mapKey := func(obj map[string]any, key string) {
		if s, ok := obj[key].(string); ok {
			var err error
			obj[key], err = r.mapPath(s)
			errs = append(errs, err)
		}
	}
	mapKey(doc, "location")
	for _, snap := range jsonObjects(doc["snapshots"]) {
		mapKey(snap, "manifest-list")
		if list, ok := snap["manifests"].([]any); ok {
			for i, p := range list {
				if s, ok := p.(string); ok {
					var err error
					list[i], err = r.mapPath(s)
					errs = append(errs, err)
				}
			}
		}
	}
	for _, entry := range jsonObjects(doc["metadata-log"]) {
		mapKey(entry, "metadata-file")
	}
	for _, stats := range slices.Concat(jsonObjects(doc["statistics"]), jsonObjects(doc["partition-statistics"])) {
		mapKey(stats, "statistics-path")
	}
	if props, ok := doc["properties"].(map[string]any); ok {
		for k, v := range props {
			if s, ok := v.(string); ok {
				props[k] = r.mapProperty(s)
			}
		}
	}
	return errors.Join(errs...)
}

// Helpers for JSON decoded with json.Number and Avro values.

func readJSONFile(name string) (map[string]any, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	doc, err := decodeJSONObject(b)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return doc, nil
}

func decodeJSONObject(b []byte) (map[string]any, error) {
	var doc map[string]any
	return doc, decodeJSON(b, &doc)
}

func marshalJSON(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func jsonInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func jsonObjects(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// findJSONObject returns the object of list whose key is id (nil if none).
func findJSONObject(list any, key string, id int64) map[string]any {
	for _, o := range jsonObjects(list) {
		if n, ok := jsonInt(o[key]); ok && n == id {
			return o
		}
	}
	return nil
}

// avroInt returns an Avro int or long value (0 for anything else).
func avroInt(v any) int {
	n, _ := avrofile.Int(v)
	return int(n)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

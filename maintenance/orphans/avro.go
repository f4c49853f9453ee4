package orphans

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// This file reads the few fields orphan planning needs from Iceberg's Avro
// metadata files, and nothing else: manifest_path and content of each
// manifest-list entry; status, file_path, content and referenced_data_file
// of each manifest entry. On a table of 5,000 fast appends the 5,000
// manifest lists hold 12.5 million entries; decoding them in full with a
// general Avro decoder (iceberg-go's ReadManifestList) is most of the cost
// of orphan planning, and parsing each manifest's writer schema again is
// most of the cost of reading 5,000 one-entry manifests.
//
// It reads the Avro object container format as written by every Iceberg
// implementation: header (magic, metadata map holding avro.schema and
// avro.codec, 16-byte sync marker), then blocks (record count, byte size,
// data compressed with the codec, sync marker). The writer schema is
// compiled once per distinct schema text into a program that captures the
// wanted fields and skips every other one by its type. Anything unexpected
// (bad magic, sync mismatch, unknown codec or type, bytes left in a block, a
// missing field) is an error, and an error deletes nothing. The tests check
// it against iceberg-go's own decoding on every fixture.

var avroMagic = []byte{'O', 'b', 'j', 1}

// maxAvroBlock bounds one block (compressed and uncompressed), as ocf does.
const maxAvroBlock = 256 << 20

// captured holds the fields a program captured from one record. Byte
// slices point into the block buffer: valid until the next record.
type captured struct {
	str    [2][]byte
	strSet [2]bool
	num    [2]int64
}

// Capture slots.
const (
	slotPath = 0 // manifest_path / data_file.file_path
	slotRef  = 1 // data_file.referenced_data_file
	slotCont = 0 // content
	slotStat = 1 // manifest entry status
	slotLen  = 1 // manifest_length
)

// fieldSpec says what to capture from a record field.
type fieldSpec struct {
	kind     int // captureString, captureLong, captureOptString, captureRecord
	slot     int
	required bool
	sub      map[string]fieldSpec // captureRecord
}

const (
	captureString = iota + 1
	captureLong
	captureOptString
	captureRecord
)

// listSpec: the fields of a manifest-list entry.
var listSpec = map[string]fieldSpec{
	"manifest_path":   {kind: captureString, slot: slotPath, required: true},
	"manifest_length": {kind: captureLong, slot: slotLen},
}

// manifestSpec: the fields of a manifest entry.
var manifestSpec = map[string]fieldSpec{
	"status": {kind: captureLong, slot: slotStat, required: true},
	"data_file": {kind: captureRecord, required: true, sub: map[string]fieldSpec{
		"file_path":            {kind: captureString, slot: slotPath, required: true},
		"content":              {kind: captureLong, slot: slotCont},
		"referenced_data_file": {kind: captureOptString, slot: slotRef},
	}},
}

// avroFile reads the records of one Avro container file.
type avroFile struct {
	r     *bufio.Reader
	sync  []byte
	codec string
	prog  step
	raw   []byte
	block []byte
}

var avroFiles = sync.Pool{New: func() any {
	return &avroFile{r: bufio.NewReaderSize(nil, 64<<10), sync: make([]byte, 16)}
}}

// newAvroFile reads the header of an Avro container file; release the
// returned value when done.
func newAvroFile(r io.Reader, name string, spec map[string]fieldSpec) (*avroFile, error) {
	f := avroFiles.Get().(*avroFile)
	f.r.Reset(r)
	magic := make([]byte, len(avroMagic))
	if _, err := io.ReadFull(f.r, magic); err != nil || !bytes.Equal(magic, avroMagic) {
		f.release()
		return nil, errors.New("not an Avro container file (bad magic)")
	}
	meta, err := readMetadata(f.r)
	if err != nil {
		f.release()
		return nil, fmt.Errorf("avro header: %w", err)
	}
	f.codec = string(meta["avro.codec"])
	if _, err := io.ReadFull(f.r, f.sync); err != nil {
		f.release()
		return nil, fmt.Errorf("avro header: %w", err)
	}
	if f.prog, err = compile(meta["avro.schema"], name, spec); err != nil {
		f.release()
		return nil, err
	}
	return f, nil
}

func (f *avroFile) release() {
	f.r.Reset(nil)
	f.prog = nil
	if cap(f.raw) > 4<<20 || cap(f.block) > 16<<20 {
		f.raw, f.block = nil, nil // do not pin a huge buffer
	}
	avroFiles.Put(f)
}

// each calls fn for every record; fn must not keep the byte slices.
func (f *avroFile) each(fn func(*captured) error) error {
	var c captured
	marker := make([]byte, 16)
	for {
		count, err := binary.ReadVarint(f.r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("avro block: %w", err)
		}
		size, err := binary.ReadVarint(f.r)
		if err != nil {
			return fmt.Errorf("avro block: %w", noEOF(err))
		}
		if count < 0 || size < 0 || size > maxAvroBlock {
			return fmt.Errorf("avro block: bad record count %d or size %d", count, size)
		}
		f.raw = grow(f.raw, int(size))
		if _, err := io.ReadFull(f.r, f.raw); err != nil {
			return fmt.Errorf("avro block: %w", noEOF(err))
		}
		if _, err := io.ReadFull(f.r, marker); err != nil || !bytes.Equal(marker, f.sync) {
			return errors.New("avro block: sync marker mismatch")
		}
		block, err := decompress(f.codec, f.raw, f.block[:0])
		if err != nil {
			return fmt.Errorf("avro block (%s): %w", f.codec, err)
		}
		if f.codec != "" && f.codec != "null" {
			f.block = block
		}
		r := avroReader{b: block}
		for range count {
			c = captured{}
			if err := f.prog(&r, &c); err != nil {
				return err
			}
			if err := fn(&c); err != nil {
				return err
			}
		}
		if r.pos != len(r.b) {
			return fmt.Errorf("avro block: %d bytes left after %d records", len(r.b)-r.pos, count)
		}
	}
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func readMetadata(r *bufio.Reader) (map[string][]byte, error) {
	meta := map[string][]byte{}
	readBytes := func() ([]byte, error) {
		n, err := binary.ReadVarint(r)
		if err != nil {
			return nil, noEOF(err)
		}
		if n < 0 || n > maxAvroBlock {
			return nil, fmt.Errorf("bad length %d", n)
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return b, noEOF(err)
	}
	for {
		count, err := binary.ReadVarint(r)
		if err != nil {
			return nil, noEOF(err)
		}
		if count == 0 {
			return meta, nil
		}
		if count < 0 {
			count = -count
			if _, err := binary.ReadVarint(r); err != nil { // block byte size
				return nil, noEOF(err)
			}
		}
		for range count {
			k, err := readBytes()
			if err != nil {
				return nil, err
			}
			v, err := readBytes()
			if err != nil {
				return nil, err
			}
			meta[string(k)] = v
		}
	}
}

var (
	flatePool = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
	zstdDec   = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxAvroBlock))
	})
)

// decompress decodes one block with the file's codec, appending to dst.
func decompress(codec string, src, dst []byte) ([]byte, error) {
	switch codec {
	case "", "null":
		return src, nil
	case "deflate": // raw deflate (RFC 1951), no zlib header
		fr := flatePool.Get().(io.ReadCloser)
		defer flatePool.Put(fr)
		if err := fr.(flate.Resetter).Reset(bytes.NewReader(src), nil); err != nil {
			return nil, err
		}
		w := bytes.NewBuffer(dst)
		if _, err := w.ReadFrom(io.LimitReader(fr, maxAvroBlock+1)); err != nil {
			return nil, err
		}
		if w.Len() > maxAvroBlock {
			return nil, errors.New("block too large")
		}
		return w.Bytes(), nil
	case "snappy": // snappy block followed by the CRC-32 of the uncompressed data
		if len(src) < 4 {
			return nil, errors.New("short snappy block")
		}
		if n, err := snappy.DecodedLen(src[:len(src)-4]); err != nil || n > maxAvroBlock {
			return nil, fmt.Errorf("bad snappy block (%d bytes): %v", n, err)
		}
		return snappy.Decode(dst[:cap(dst)], src[:len(src)-4])
	case "zstandard":
		d, err := zstdDec()
		if err != nil {
			return nil, err
		}
		return d.DecodeAll(src, dst)
	}
	return nil, fmt.Errorf("unsupported avro codec %q", codec)
}

// avroReader reads Avro binary encoding from a byte slice.
type avroReader struct {
	b   []byte
	pos int
}

var errShort = errors.New("record runs past the end of its block")

func (r *avroReader) long() (int64, error) {
	// Inline fast path for one- and two-byte varints.
	if r.pos < len(r.b) {
		if c := r.b[r.pos]; c < 0x80 {
			r.pos++
			return int64(c>>1) ^ -int64(c&1), nil
		}
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		return 0, errShort
	}
	r.pos += n
	return int64(v>>1) ^ -int64(v&1), nil
}

func (r *avroReader) next(n int64) ([]byte, error) {
	if n < 0 || n > int64(len(r.b)-r.pos) {
		return nil, errShort
	}
	out := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return out, nil
}

func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	return r.next(n)
}

// ---------------------------------------------------------------------------
// Schema compilation.

// step reads (captures or skips) one value.
type step func(r *avroReader, c *captured) error

var (
	programs     sync.Map // name + "\x00" + schema text -> step
	programCount atomic.Int32
)

// maxPrograms bounds the cache: a long-running server sees one schema text
// per table schema and partition spec, not an unbounded number.
const maxPrograms = 4096

func compile(schema []byte, name string, spec map[string]fieldSpec) (step, error) {
	if len(schema) == 0 {
		return nil, errors.New("avro header has no schema")
	}
	key := name + "\x00" + string(schema)
	if p, ok := programs.Load(key); ok {
		return p.(step), nil
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	c := schemaCompiler{named: map[string]any{}}
	c.register(root, "")
	rec, ok := c.resolve(root, "")
	if !ok || !isRecord(rec) {
		return nil, fmt.Errorf("%s schema is not a record", name)
	}
	p, err := c.record(rec, "", spec, name)
	if err != nil {
		return nil, err
	}
	if programCount.Add(1) <= maxPrograms {
		programs.Store(key, p)
	}
	return p, nil
}

func isRecord(def map[string]any) bool { return def["type"] == "record" || def["type"] == "error" }

// schemaCompiler turns an Avro schema (as decoded JSON) into steps.
type schemaCompiler struct {
	named map[string]any // full and short name -> definition
}

func namespaceOf(def map[string]any, enclosing string) string {
	if name, ok := def["name"].(string); ok {
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			return name[:i]
		}
	}
	if ns, ok := def["namespace"].(string); ok {
		return ns
	}
	return enclosing
}

func fullName(name, ns string) string {
	if ns == "" || strings.Contains(name, ".") {
		return name
	}
	return ns + "." + name
}

// register records the named types defined in t, so that references by
// name resolve.
func (c *schemaCompiler) register(t any, ns string) {
	switch v := t.(type) {
	case map[string]any:
		inner := namespaceOf(v, ns)
		switch v["type"] {
		case "record", "error", "enum", "fixed":
			if name, ok := v["name"].(string); ok {
				c.named[fullName(name, inner)] = v
				if _, dup := c.named[name]; !dup {
					c.named[name] = v
				}
			}
		}
		if fs, ok := v["fields"].([]any); ok {
			for _, f := range fs {
				if fm, ok := f.(map[string]any); ok {
					c.register(fm["type"], inner)
				}
			}
		}
		for _, k := range []string{"items", "values", "type"} {
			if sub, ok := v[k]; ok {
				if _, isName := sub.(string); !isName {
					c.register(sub, inner)
				}
			}
		}
	case []any:
		for _, b := range v {
			c.register(b, ns)
		}
	}
}

// resolve follows a type name (or {"type": name}) to its definition.
func (c *schemaCompiler) resolve(t any, ns string) (map[string]any, bool) {
	switch v := t.(type) {
	case string:
		def, ok := c.named[fullName(v, ns)]
		if !ok {
			def, ok = c.named[v]
		}
		m, _ := def.(map[string]any)
		return m, ok && m != nil
	case map[string]any:
		if inner, ok := v["type"].(string); ok && !isComplexName(inner) {
			return c.resolve(inner, ns)
		}
		return v, true
	}
	return nil, false
}

func isComplexName(s string) bool {
	switch s {
	case "record", "error", "enum", "fixed", "array", "map":
		return true
	}
	return false
}

// primitive returns the primitive type name of t, bare or {"type": name}.
func primitive(t any) string {
	if m, ok := t.(map[string]any); ok {
		t = m["type"]
	}
	s, _ := t.(string)
	switch s {
	case "null", "boolean", "int", "long", "float", "double", "bytes", "string":
		return s
	}
	return ""
}

// record compiles a record that has fields to capture.
func (c *schemaCompiler) record(def map[string]any, ns string, spec map[string]fieldSpec, what string) (step, error) {
	inner := namespaceOf(def, ns)
	fields, _ := def["fields"].([]any)
	steps := make([]step, 0, len(fields))
	seen := map[string]bool{}
	for _, f := range fields {
		fm, ok := f.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s schema: bad field", what)
		}
		name, _ := fm["name"].(string)
		fs, want := spec[name]
		if !want {
			sk, err := c.skipper(fm["type"], inner)
			if err != nil {
				return nil, fmt.Errorf("%s field %s: %w", what, name, err)
			}
			steps = append(steps, sk)
			continue
		}
		seen[name] = true
		st, err := c.capture(fm["type"], inner, fs, what+"."+name)
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	for name, fs := range spec {
		if fs.required && !seen[name] {
			return nil, fmt.Errorf("%s schema has no field %s", what, name)
		}
	}
	return func(r *avroReader, c *captured) error {
		for _, st := range steps {
			if err := st(r, c); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

func (c *schemaCompiler) capture(t any, ns string, fs fieldSpec, what string) (step, error) {
	slot := fs.slot
	switch fs.kind {
	case captureString:
		if primitive(t) != "string" {
			return nil, fmt.Errorf("%s is %v, not a string", what, t)
		}
		return func(r *avroReader, c *captured) error {
			b, err := r.bytes()
			c.str[slot], c.strSet[slot] = b, true
			return err
		}, nil
	case captureLong:
		if p := primitive(t); p != "int" && p != "long" {
			return nil, fmt.Errorf("%s is %v, not an int", what, t)
		}
		return func(r *avroReader, c *captured) error {
			v, err := r.long()
			c.num[slot] = v
			return err
		}, nil
	case captureOptString:
		switch primitive(t) {
		case "string":
			return c.capture(t, ns, fieldSpec{kind: captureString, slot: slot}, what)
		case "null":
			return func(*avroReader, *captured) error { return nil }, nil
		}
		u, ok := t.([]any)
		if !ok || len(u) != 2 {
			return nil, fmt.Errorf("%s is %v, not an optional string", what, t)
		}
		str := -1
		for i, b := range u {
			switch primitive(b) {
			case "string":
				str = i
			case "null":
			default:
				return nil, fmt.Errorf("%s is %v, not an optional string", what, t)
			}
		}
		if str < 0 {
			return nil, fmt.Errorf("%s is %v, not an optional string", what, t)
		}
		return func(r *avroReader, c *captured) error {
			i, err := r.long()
			if err != nil {
				return err
			}
			switch i {
			case int64(str):
				b, err := r.bytes()
				c.str[slot], c.strSet[slot] = b, true
				return err
			case int64(1 - str):
				return nil
			}
			return fmt.Errorf("%s: union branch %d out of range", what, i)
		}, nil
	case captureRecord:
		def, ok := c.resolve(t, ns)
		if !ok || !isRecord(def) {
			return nil, fmt.Errorf("%s is %v, not a record", what, t)
		}
		return c.record(def, ns, fs.sub, what)
	}
	return nil, fmt.Errorf("%s: bad capture", what)
}

func skipLong(r *avroReader, _ *captured) error { _, err := r.long(); return err }

func skipBytes(r *avroReader, _ *captured) error { _, err := r.bytes(); return err }

func skipFixed(n int64) step {
	return func(r *avroReader, _ *captured) error { _, err := r.next(n); return err }
}

func skipNothing(*avroReader, *captured) error { return nil }

// skipper compiles a step that skips one value of type t.
func (c *schemaCompiler) skipper(t any, ns string) (step, error) {
	switch primitive(t) {
	case "null":
		return skipNothing, nil
	case "boolean":
		return skipFixed(1), nil
	case "int", "long":
		return skipLong, nil
	case "float":
		return skipFixed(4), nil
	case "double":
		return skipFixed(8), nil
	case "string", "bytes":
		return skipBytes, nil
	}
	if u, ok := t.([]any); ok { // union
		branches := make([]step, len(u))
		for i, b := range u {
			sk, err := c.skipper(b, ns)
			if err != nil {
				return nil, err
			}
			branches[i] = sk
		}
		return func(r *avroReader, cp *captured) error {
			i, err := r.long()
			if err != nil {
				return err
			}
			if i < 0 || i >= int64(len(branches)) {
				return fmt.Errorf("union branch %d out of range", i)
			}
			return branches[i](r, cp)
		}, nil
	}
	def, ok := c.resolve(t, ns)
	if !ok {
		return nil, fmt.Errorf("unknown type %v", t)
	}
	inner := namespaceOf(def, ns)
	switch def["type"] {
	case "record", "error":
		fs, _ := def["fields"].([]any)
		skips := make([]step, 0, len(fs))
		for _, f := range fs {
			fm, ok := f.(map[string]any)
			if !ok {
				return nil, errors.New("bad record field")
			}
			sk, err := c.skipper(fm["type"], inner)
			if err != nil {
				return nil, err
			}
			skips = append(skips, sk)
		}
		return func(r *avroReader, cp *captured) error {
			for _, sk := range skips {
				if err := sk(r, cp); err != nil {
					return err
				}
			}
			return nil
		}, nil
	case "enum":
		return skipLong, nil
	case "fixed":
		size, ok := def["size"].(float64)
		if !ok || size < 0 {
			return nil, errors.New("fixed type without a size")
		}
		return skipFixed(int64(size)), nil
	case "array", "map":
		key := "items"
		if def["type"] == "map" {
			key = "values"
		}
		item, err := c.skipper(def[key], inner)
		if err != nil {
			return nil, err
		}
		isMap := def["type"] == "map"
		return func(r *avroReader, cp *captured) error {
			for {
				n, err := r.long()
				if err != nil {
					return err
				}
				if n == 0 {
					return nil
				}
				if n < 0 { // a block that states its byte size: skip it whole
					size, err := r.long()
					if err != nil {
						return err
					}
					if _, err := r.next(size); err != nil {
						return err
					}
					continue
				}
				for range n {
					if isMap {
						if err := skipBytes(r, cp); err != nil {
							return err
						}
					}
					if err := item(r, cp); err != nil {
						return err
					}
				}
			}
		}, nil
	}
	return nil, fmt.Errorf("unsupported type %v", t)
}

// ---------------------------------------------------------------------------
// The two readers.

// readManifestList calls fn with the path and length of every entry of a
// manifest list; path is only valid during the call.
func readManifestList(r io.Reader, fn func(path []byte, length int64) error) error {
	f, err := newAvroFile(r, "manifest list", listSpec)
	if err != nil {
		return err
	}
	defer f.release()
	return f.each(func(c *captured) error {
		if len(c.str[slotPath]) == 0 {
			return errors.New("manifest list entry with an empty manifest_path")
		}
		return fn(c.str[slotPath], c.num[slotLen])
	})
}

// Manifest entry statuses (Iceberg spec).
const (
	statusExisting = 0
	statusAdded    = 1
	statusDeleted  = 2
)

// readManifestPaths calls fn with the file path (and the data file a
// deletion vector points at, or nil) of every live entry (ADDED or
// EXISTING) of a manifest; DELETED entries are not live in any snapshot
// that lists the manifest, as in Java's and iceberg-go's orphan planners.
// When length > 0 (the manifest_length its manifest list records) the file
// must be exactly that long: a truncated manifest would hide live files.
func readManifestPaths(r io.Reader, length int64, fn func(path, referenced []byte) error) error {
	cr := &countingReader{r: r}
	if err := readManifestEntries(cr, fn); err != nil {
		return err
	}
	if length > 0 && cr.n != length {
		return fmt.Errorf("manifest is %d bytes, its manifest list says %d", cr.n, length)
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func readManifestEntries(r io.Reader, fn func(path, referenced []byte) error) error {
	f, err := newAvroFile(r, "manifest", manifestSpec)
	if err != nil {
		return err
	}
	defer f.release()
	return f.each(func(c *captured) error {
		switch c.num[slotStat] {
		case statusExisting, statusAdded:
		case statusDeleted:
			return nil
		default:
			return fmt.Errorf("manifest entry with invalid status %d", c.num[slotStat])
		}
		if len(c.str[slotPath]) == 0 {
			return errors.New("manifest entry with an empty file_path")
		}
		var ref []byte
		if c.strSet[slotRef] && len(c.str[slotRef]) > 0 {
			ref = c.str[slotRef]
		}
		return fn(c.str[slotPath], ref)
	})
}

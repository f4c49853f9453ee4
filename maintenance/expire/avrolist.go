package expire

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// scanList reads only manifest_path and manifest_length from a manifest
// list (an Avro object container file) and skips every other field in place,
// partition summaries included, without allocating for them. Decoding every
// expiring snapshot's list is most of expiry's work: for a table of 5,000
// fast appends that is 12.5 million entries, and a generic decoder spends
// most of its time building values expiry never looks at.
//
// It is deliberately strict: any codec but null and deflate, any schema it
// does not understand, a block not consumed to its last byte or a wrong sync
// marker is an error, and the caller falls back to iceberg-go's decoder.
//
// visit gets each entry's path, valid only during the call: looking it up in
// a map costs no allocation, and most paths of an expiring list are only
// looked up. On an error, visit may already have seen some entries.
func scanList(data []byte, visit func(path []byte, length int64)) error {
	r := &avroReader{b: data}
	if !bytes.HasPrefix(data, []byte("Obj\x01")) {
		return errors.New("not an Avro object container")
	}
	r.i = 4
	meta, err := r.metadata()
	if err != nil {
		return err
	}
	codec := string(meta["avro.codec"])
	if codec != "" && codec != "null" && codec != "deflate" {
		return fmt.Errorf("unsupported codec %q", codec)
	}
	root, err := parseAvroSchema(meta["avro.schema"])
	if err != nil {
		return err
	}
	pathIdx, lenIdx := -1, -1
	for i, f := range root.fields {
		switch {
		case f.name == "manifest_path" && f.t.kind == kString:
			pathIdx = i
		case f.name == "manifest_length" && f.t.kind == kVarint:
			lenIdx = i
		}
	}
	if root.kind != kRecord || pathIdx < 0 || lenIdx < 0 {
		return errors.New("schema lacks manifest_path or manifest_length")
	}
	sync, err := r.take(16)
	if err != nil {
		return err
	}
	for r.i < len(r.b) {
		count, err := r.varint()
		if err != nil {
			return err
		}
		size, err := r.varint()
		if err != nil {
			return err
		}
		if count < 0 || size < 0 || size > int64(len(r.b)-r.i) {
			return errors.New("corrupt block header")
		}
		block, _ := r.take(int(size))
		release := func() {}
		if codec == "deflate" {
			if block, release, err = inflate(block); err != nil {
				return err
			}
		}
		err = readBlock(block, count, root, pathIdx, lenIdx, visit)
		release()
		if err != nil {
			return err
		}
		if m, err := r.take(16); err != nil || !bytes.Equal(m, sync) {
			return errors.New("bad sync marker")
		}
	}
	return nil
}

// readBlock visits the entries of one decompressed block.
func readBlock(block []byte, count int64, root *avroType, pathIdx, lenIdx int, visit func([]byte, int64)) error {
	br := &avroReader{b: block}
	for range count {
		var path []byte
		var length int64
		for i, f := range root.fields {
			var err error
			switch i {
			case pathIdx:
				path, err = br.bytes()
			case lenIdx:
				length, err = br.varint()
			default:
				err = br.skip(f.t, 0)
			}
			if err != nil {
				return err
			}
		}
		if len(path) == 0 {
			return errors.New("manifest list entry without a path")
		}
		visit(path, length)
	}
	if br.i != len(br.b) {
		return errors.New("block not consumed exactly")
	}
	return nil
}

// readList is scanList collecting the entries.
func readList(data []byte) ([]listEntry, error) {
	var out []listEntry
	err := scanList(data, func(path []byte, length int64) {
		out = append(out, listEntry{Path: string(path), Length: length})
	})
	return out, err
}

type avroKind uint8

const (
	kNull avroKind = iota
	kBool
	kVarint // int, long, enum
	kFloat
	kDouble
	kString // string, bytes
	kFixed
	kRecord
	kArray
	kMap
	kUnion
)

type avroType struct {
	kind     avroKind
	size     int         // fixed
	fields   []avroField // record
	items    *avroType   // array items, map values
	branches []*avroType // union
}

type avroField struct {
	name string
	t    *avroType
}

var primitives = map[string]avroKind{
	"null": kNull, "boolean": kBool, "int": kVarint, "long": kVarint,
	"float": kFloat, "double": kDouble, "bytes": kString, "string": kString,
}

// schemaCache holds parsed writer schemas: every list of a table usually
// carries the same one, and parsing it costs more than a small list's
// entries. Parsed types are never modified, so they are shared.
var schemaCache struct {
	sync.Mutex
	m map[string]*avroType
}

func parseAvroSchema(raw []byte) (*avroType, error) {
	schemaCache.Lock()
	t, ok := schemaCache.m[string(raw)]
	schemaCache.Unlock()
	if ok {
		return t, nil
	}
	t, err := parseAvroSchemaJSON(raw)
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	if len(schemaCache.m) >= 64 || schemaCache.m == nil {
		schemaCache.m = map[string]*avroType{}
	}
	schemaCache.m[string(raw)] = t
	schemaCache.Unlock()
	return t, nil
}

func parseAvroSchemaJSON(raw []byte) (*avroType, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	p := schemaParser{named: map[string]*avroType{}}
	return p.parse(v, "")
}

type schemaParser struct{ named map[string]*avroType }

func (p schemaParser) parse(v any, ns string) (*avroType, error) {
	switch s := v.(type) {
	case string:
		if k, ok := primitives[s]; ok {
			return &avroType{kind: k}, nil
		}
		if t := p.named[s]; t != nil {
			return t, nil
		}
		if t := p.named[ns+"."+s]; t != nil {
			return t, nil
		}
		return nil, fmt.Errorf("avro schema: unknown type %q", s)
	case []any:
		u := &avroType{kind: kUnion}
		for _, b := range s {
			t, err := p.parse(b, ns)
			if err != nil {
				return nil, err
			}
			u.branches = append(u.branches, t)
		}
		return u, nil
	case map[string]any:
		typ := s["type"]
		name, _ := s["name"].(string)
		if n, ok := s["namespace"].(string); ok {
			ns = n
		}
		register := func(t *avroType) {
			if name != "" {
				p.named[name] = t
				if ns != "" {
					p.named[ns+"."+name] = t
				}
			}
		}
		switch typ {
		case "record", "error":
			t := &avroType{kind: kRecord}
			register(t) // before the fields: records may refer to themselves
			fields, _ := s["fields"].([]any)
			for _, fv := range fields {
				fm, _ := fv.(map[string]any)
				fname, _ := fm["name"].(string)
				ft, err := p.parse(fm["type"], ns)
				if err != nil {
					return nil, err
				}
				t.fields = append(t.fields, avroField{name: fname, t: ft})
			}
			return t, nil
		case "enum":
			t := &avroType{kind: kVarint}
			register(t)
			return t, nil
		case "fixed":
			size, ok := s["size"].(float64)
			if !ok || size < 0 {
				return nil, errors.New("avro schema: fixed without a size")
			}
			t := &avroType{kind: kFixed, size: int(size)}
			register(t)
			return t, nil
		case "array", "map":
			key := map[any]string{"array": "items", "map": "values"}[typ]
			items, err := p.parse(s[key], ns)
			if err != nil {
				return nil, err
			}
			kind := kArray
			if typ == "map" {
				kind = kMap
			}
			return &avroType{kind: kind, items: items}, nil
		default: // a primitive with attributes (logicalType), or a nested type
			return p.parse(typ, ns)
		}
	}
	return nil, fmt.Errorf("avro schema: unexpected %T", v)
}

type avroReader struct {
	b []byte
	i int
}

func (r *avroReader) varint() (int64, error) {
	u, n := binary.Uvarint(r.b[r.i:])
	if n <= 0 {
		return 0, errors.New("bad varint")
	}
	r.i += n
	return int64(u>>1) ^ -int64(u&1), nil // zig-zag
}

func (r *avroReader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.i {
		return nil, io.ErrUnexpectedEOF
	}
	r.i += n
	return r.b[r.i-n : r.i], nil
}

func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.varint()
	if err != nil {
		return nil, err
	}
	return r.take(int(n))
}

// maxDepth bounds nesting, so a self-referencing schema cannot recurse
// without end.
const maxDepth = 32

func (r *avroReader) skip(t *avroType, depth int) error {
	if depth > maxDepth {
		return errors.New("avro value nested too deep")
	}
	var err error
	switch t.kind {
	case kNull:
	case kBool:
		_, err = r.take(1)
	case kVarint:
		_, err = r.varint()
	case kFloat:
		_, err = r.take(4)
	case kDouble:
		_, err = r.take(8)
	case kString:
		_, err = r.bytes()
	case kFixed:
		_, err = r.take(t.size)
	case kRecord:
		for _, f := range t.fields {
			if err = r.skip(f.t, depth+1); err != nil {
				return err
			}
		}
	case kUnion:
		var b int64
		if b, err = r.varint(); err == nil {
			if b < 0 || b >= int64(len(t.branches)) {
				return errors.New("bad union branch")
			}
			err = r.skip(t.branches[b], depth+1)
		}
	case kArray, kMap:
		for {
			n, err := r.varint()
			if err != nil || n == 0 {
				return err
			}
			if n < 0 { // a block that carries its byte size
				size, err := r.varint()
				if err != nil {
					return err
				}
				if _, err := r.take(int(size)); err != nil {
					return err
				}
				continue
			}
			for range n {
				if t.kind == kMap {
					if _, err := r.bytes(); err != nil {
						return err
					}
				}
				if err := r.skip(t.items, depth+1); err != nil {
					return err
				}
			}
		}
	}
	return err
}

// metadata reads the container header's map of metadata.
func (r *avroReader) metadata() (map[string][]byte, error) {
	meta := map[string][]byte{}
	for {
		n, err := r.varint()
		if err != nil || n == 0 {
			return meta, err
		}
		if n < 0 {
			n = -n
			if _, err := r.varint(); err != nil { // block byte size
				return nil, err
			}
		}
		for range n {
			k, err := r.bytes()
			if err != nil {
				return nil, err
			}
			v, err := r.bytes()
			if err != nil {
				return nil, err
			}
			meta[string(k)] = v
		}
	}
}

// maxBlock bounds an inflated block, so a corrupt list cannot exhaust memory.
const maxBlock = 256 << 20

var (
	inflaters = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
	blockBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// inflate decompresses a raw deflate block with a pooled decompressor (each
// carries a 32 KiB window) into a pooled buffer; release returns the buffer
// once the block is read (scanList copies what it keeps).
func inflate(src []byte) (_ []byte, release func(), err error) {
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(src), nil); err != nil {
		return nil, nil, err
	}
	buf := blockBufs.Get().(*bytes.Buffer)
	buf.Reset()
	release = func() { blockBufs.Put(buf) }
	if _, err := buf.ReadFrom(io.LimitReader(r, maxBlock+1)); err != nil {
		release()
		return nil, nil, fmt.Errorf("inflate block: %w", err)
	}
	if buf.Len() > maxBlock {
		release()
		return nil, nil, fmt.Errorf("inflated block exceeds %d bytes", maxBlock)
	}
	return buf.Bytes(), release, nil
}

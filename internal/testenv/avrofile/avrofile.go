// Package avrofile reads and writes Avro object container files (Iceberg
// manifests and manifest lists) as generic records with their raw Avro
// values, for the test harness's relocation and independent verifier.
//
// Records are decoded with a copy of the writer's schema from which every
// logicalType was removed, so a date stays an int and a decimal stays bytes:
// the verifier needs the raw values (partition tuples), and the relocation
// re-encodes them unchanged. Binary Avro does not depend on logical types, so
// encoding with that copy gives the bytes the original schema would.
package avrofile

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/twmb/avro"
	"github.com/twmb/avro/ocf"
)

// File is a decoded Avro object container file.
type File struct {
	// Meta is the header metadata, including avro.schema (the writer's schema
	// text, written back unchanged) and avro.codec.
	Meta map[string][]byte
	// Records are the file's records in order: map[string]any per record,
	// []any for arrays, nil for a null union branch, and int, int64,
	// float32, float64, bool, string or []byte for primitives.
	Records []map[string]any

	raw  *avro.Schema // the writer's schema without logical types
	tree any          // raw's JSON, for FieldNames
}

// Read decodes the container file at path.
func Read(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := &File{}
	rd, err := ocf.NewReader(bufio.NewReader(f),
		ocf.WithSchemaOpts(avro.WithLaxNames(nil)),
		ocf.WithReaderSchemaFunc(func(rd *ocf.Reader) (*avro.Schema, error) {
			var perr error
			out.raw, out.tree, perr = rawSchema(rd.Metadata()["avro.schema"])
			return out.raw, perr
		}))
	if err != nil {
		return nil, fmt.Errorf("read Avro file %s: %w", path, err)
	}
	defer rd.Close()
	out.Meta = rd.Metadata()
	for {
		var v any
		if err := rd.Decode(&v); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode record %d of %s: %w", len(out.Records), path, err)
		}
		rec, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("record %d of %s is a %T, not an Avro record", len(out.Records), path, v)
		}
		out.Records = append(out.Records, rec)
	}
}

// rawSchema parses schema text after removing every logicalType.
func rawSchema(text []byte) (*avro.Schema, any, error) {
	var tree any
	if err := json.Unmarshal(text, &tree); err != nil {
		return nil, nil, fmt.Errorf("parse avro.schema: %w", err)
	}
	tree = stripLogicalTypes(tree)
	b, err := json.Marshal(tree)
	if err != nil {
		return nil, nil, err
	}
	s, err := avro.Parse(string(b), avro.WithLaxNames(nil))
	if err != nil {
		return nil, nil, fmt.Errorf("parse avro.schema: %w", err)
	}
	return s, tree, nil
}

func stripLogicalTypes(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k != "logicalType" {
				out[k] = stripLogicalTypes(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = stripLogicalTypes(e)
		}
		return out
	}
	return v
}

// FieldNames returns, in schema order, the field names of the record reached
// from the top-level record through the named fields (a union with null is
// looked through), e.g. FieldNames("data_file", "partition"). Generic
// records are maps, so this is the only way to know their field order.
func (f *File) FieldNames(path ...string) ([]string, error) {
	node := f.tree
	for _, name := range append(slices.Clone(path), "") {
		rec := recordOf(node)
		if rec == nil {
			return nil, fmt.Errorf("no record at %v in the Avro schema", path)
		}
		fields, _ := rec["fields"].([]any)
		if name == "" {
			names := make([]string, 0, len(fields))
			for _, fl := range fields {
				n, _ := fl.(map[string]any)["name"].(string)
				names = append(names, n)
			}
			return names, nil
		}
		node = nil
		for _, fl := range fields {
			if m, _ := fl.(map[string]any); m["name"] == name {
				node = m["type"]
			}
		}
	}
	panic("unreachable")
}

func recordOf(node any) map[string]any {
	switch x := node.(type) {
	case map[string]any:
		if x["type"] == "record" {
			return x
		}
		return recordOf(x["type"])
	case []any: // a union: its record branch
		for _, b := range x {
			if r := recordOf(b); r != nil {
				return r
			}
		}
	}
	return nil
}

// Write encodes f.Records into a new container file at path with f's schema
// text, codec and header metadata, and returns the file's size. sync is the
// block sync marker (fixed by the caller, so output is reproducible).
func (f *File) Write(path string, sync [16]byte) (int64, error) {
	opts := []ocf.WriterOpt{ocf.WithSyncMarker(sync), ocf.WithSchema(string(f.Meta["avro.schema"]))}
	switch codec := string(f.Meta["avro.codec"]); codec {
	case "", "null":
	case "deflate":
		opts = append(opts, ocf.WithCodec(ocf.DeflateCodec(flate.DefaultCompression)))
	case "snappy":
		opts = append(opts, ocf.WithCodec(ocf.SnappyCodec()))
	default:
		return 0, fmt.Errorf("write Avro file %s: unsupported codec %q", path, codec)
	}
	meta := map[string][]byte{}
	for k, v := range f.Meta {
		if k != "avro.schema" && k != "avro.codec" {
			meta[k] = v
		}
	}
	opts = append(opts, ocf.WithMetadata(meta))
	// The schema comes from Meta, so that a test may write a changed one.
	raw, _, err := rawSchema(f.Meta["avro.schema"])
	if err != nil {
		return 0, fmt.Errorf("write Avro file %s: %w", path, err)
	}
	var buf bytes.Buffer
	w, err := ocf.NewWriter(&buf, raw, opts...)
	if err != nil {
		return 0, fmt.Errorf("write Avro file %s: %w", path, err)
	}
	for i, rec := range f.Records {
		if err := w.Encode(rec); err != nil {
			return 0, fmt.Errorf("write Avro file %s: record %d: %w", path, i, err)
		}
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("write Avro file %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}

// Int returns an Avro int or long value as decoded into a record.
func Int(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

package compact

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Table properties that shape Parquet output, as iceberg-go's writer reads
// them (Iceberg Java's names). The direct path writes the same files only
// if it reads every such property the same way, so it knows this set
// exactly and leaves any table carrying another one, or a value it cannot
// parse, to iceberg-go's writer.
const (
	propDictEnabled       = "parquet.enable.dictionary"
	propDictColumnPrefix  = "write.parquet.dict-encoding-enabled.column."
	propBloomColumnPrefix = table.ParquetBloomFilterColumnEnabledKeyPrefix + "."
)

var positiveIntProps = map[string]int64{
	table.ParquetRowGroupSizeBytesKey:   table.ParquetRowGroupSizeBytesDefault,
	table.ParquetRowGroupLimitKey:       table.ParquetRowGroupLimitDefault,
	table.ParquetPageSizeBytesKey:       table.ParquetPageSizeBytesDefault,
	table.ParquetPageRowLimitKey:        table.ParquetPageRowLimitDefault,
	table.ParquetDictSizeBytesKey:       table.ParquetDictSizeBytesDefault,
	table.ParquetBloomFilterMaxBytesKey: table.ParquetBloomFilterMaxBytesDefault,
}

// positiveIntProp is the table's value of key, one of positiveIntProps, or
// its default when unset; false when it is set to anything but a positive
// integer.
func positiveIntProp(props iceberg.Properties, key string) (int64, bool) {
	raw, ok := props[key]
	if !ok {
		return positiveIntProps[key], true
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	return v, err == nil && v > 0
}

// parquetOutput is how the direct path writes a table's Parquet files.
type parquetOutput struct {
	arrow         *arrow.Schema // the table schema as the files hold it
	parquet       *schema.Schema
	writer        []parquet.WriterProperty // built anew for each file, as iceberg-go does
	rowGroupBytes int64                    // write.parquet.row-group-size-bytes
	rowGroupRows  int64                    // write.parquet.row-group-limit
}

// props returns the Parquet and pqarrow writer properties of one file,
// whose buffers come from mem.
func (o *parquetOutput) props(mem memory.Allocator) (*parquet.WriterProperties, pqarrow.ArrowWriterProperties) {
	return parquet.NewWriterProperties(append(slices.Clip(o.writer), parquet.WithAllocator(mem))...),
		pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema())
}

// parquetOutputFor maps the table's write properties to writer properties
// as iceberg-go v0.7.0 does (table/internal/parquet_files.go:
// GetWriteProperties and getWriteProperties), or says why it cannot.
func parquetOutputFor(sc *iceberg.Schema, props iceberg.Properties) (*parquetOutput, string) {
	ints := map[string]int64{}
	for key := range positiveIntProps {
		v, ok := positiveIntProp(props, key)
		if !ok {
			return nil, fmt.Sprintf("table property %s=%q", key, props[key])
		}
		ints[key] = v
	}
	if b := ints[table.ParquetBloomFilterMaxBytesKey]; b < 32 || b > 128<<20 {
		return nil, fmt.Sprintf("table property %s=%d", table.ParquetBloomFilterMaxBytesKey, b)
	}
	var pageVersion parquet.DataPageVersion
	switch v := props.Get(table.ParquetPageVersionKey, table.ParquetPageVersionDefault); v {
	case "1":
		pageVersion = parquet.DataPageV1
	case "2":
		pageVersion = parquet.DataPageV2
	default:
		return nil, fmt.Sprintf("table property %s=%q", table.ParquetPageVersionKey, v)
	}
	codecName := props.Get(table.ParquetCompressionKey, table.ParquetCompressionDefault)
	codec, lo, hi := compress.Codecs.Uncompressed, 0, 0
	switch codecName {
	case "zstd":
		codec, lo, hi = compress.Codecs.Zstd, -5, 22
	case "snappy":
		codec = compress.Codecs.Snappy
	case "gzip":
		codec, lo, hi = compress.Codecs.Gzip, -3, 9
	case "uncompressed":
	case "lz4raw":
		codec = compress.Codecs.Lz4Raw
	default:
		// brotli, lz4 and lzo have quirks of their own in iceberg-go.
		return nil, fmt.Sprintf("compression codec %q", codecName)
	}
	level := table.ParquetCompressionLevelDefault
	if raw, ok := props[table.ParquetCompressionLevelKey]; ok {
		v, err := strconv.Atoi(raw)
		if err != nil || (hi > lo && v != table.ParquetCompressionLevelDefault && (v < lo || v > hi)) {
			return nil, fmt.Sprintf("table property %s=%q", table.ParquetCompressionLevelKey, raw)
		}
		level = v
	}
	wp := []parquet.WriterProperty{
		parquet.WithMaxRowGroupLength(ints[table.ParquetRowGroupLimitKey]),
		parquet.WithDataPageSize(ints[table.ParquetPageSizeBytesKey]),
		parquet.WithDataPageVersion(pageVersion),
		parquet.WithBatchSize(ints[table.ParquetPageRowLimitKey]),
		parquet.WithDictionaryPageSizeLimit(ints[table.ParquetDictSizeBytesKey]),
		parquet.WithCompression(codec),
		parquet.WithCompressionLevel(level),
		parquet.WithMaxBloomFilterBytes(ints[table.ParquetBloomFilterMaxBytesKey]),
	}
	dictDefault := true
	if raw, ok := props[propDictEnabled]; ok {
		dictDefault = strings.EqualFold(raw, "true")
	}
	wp = append(wp, parquet.WithDictionaryDefault(dictDefault))
	for key, raw := range props {
		switch {
		case strings.HasPrefix(key, propBloomColumnPrefix) && len(key) > len(propBloomColumnPrefix):
			wp = append(wp, parquet.WithBloomFilterEnabledFor(key[len(propBloomColumnPrefix):], strings.EqualFold(raw, "true")))
		case strings.HasPrefix(key, propDictColumnPrefix) && len(key) > len(propDictColumnPrefix):
			wp = append(wp, parquet.WithDictionaryFor(key[len(propDictColumnPrefix):], strings.EqualFold(raw, "true")))
		case strings.HasPrefix(key, "write.parquet.") || strings.HasPrefix(key, "parquet."):
			if _, known := positiveIntProps[key]; !known && !knownParquetProp[key] {
				return nil, fmt.Sprintf("table property %s", key)
			}
		}
	}

	asc, err := table.SchemaToArrowSchemaWithOptions(sc, table.ArrowSchemaOptions{IncludeFieldIDs: true, TableProperties: props})
	if err != nil {
		return nil, fmt.Sprintf("arrow schema: %v", err)
	}
	psc, err := pqarrow.ToParquet(asc, parquet.NewWriterProperties(wp...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, fmt.Sprintf("parquet schema: %v", err)
	}
	// Iceberg Java's rule, which iceberg-go applies to every leaf: drop a
	// dictionary that does not pay for itself (parquet-mr's fallback).
	for i := range psc.NumColumns() {
		wp = append(wp, parquet.WithDictionaryCostFallbackFor(psc.Column(i).Path(), true))
	}
	return &parquetOutput{
		arrow: asc, parquet: psc, writer: wp,
		rowGroupBytes: ints[table.ParquetRowGroupSizeBytesKey],
		rowGroupRows:  ints[table.ParquetRowGroupLimitKey],
	}, ""
}

// Write properties read above other than the positive integers.
var knownParquetProp = map[string]bool{
	table.ParquetPageVersionKey:      true,
	table.ParquetCompressionKey:      true,
	table.ParquetCompressionLevelKey: true,
	propDictEnabled:                  true,
}

// sameParquetSchema reports whether a file's columns have the output's
// shape: the same names, repetition and field ids, nested groups included.
// Annotations and physical types may differ (Spark writes an int column
// without iceberg-go's Int(32) annotation, a decimal as INT64 rather than
// fixed bytes): what the values decode to is checked on the Arrow types
// (sameArrowTypes), and the output is written in its own encoding anyway.
// The root's name (Spark writes spark_schema) does not matter.
func sameParquetSchema(file, out *schema.Schema) bool {
	return sameChildren(file.Root(), out.Root())
}

func sameChildren(a, b *schema.GroupNode) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name() != fb.Name() || fa.RepetitionType() != fb.RepetitionType() ||
			fa.FieldID() != fb.FieldID() || fa.Type() != fb.Type() {
			return false
		}
		if ga, ok := fa.(*schema.GroupNode); ok && !sameChildren(ga, fb.(*schema.GroupNode)) {
			return false
		}
	}
	return true
}

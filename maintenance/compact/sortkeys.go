package compact

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
)

// The keys a sort group is ordered by. An identity key is the column
// itself; a transformed key is a column of the transformed values, which
// the rows are ordered by as Iceberg's Java writers order them (bucket by
// its number, truncate by the truncated value, a time transform by its
// ordinal), computed with iceberg-go's own transform functions, the ones
// its partitioned writer uses. A void key is null in every row: it orders
// nothing and is left out. The key columns only order the rows; the files
// get the original columns.

// keyTable is the sort keys of tbl's rows as the columns of a table, and
// the sort keys over it; no keys when every key is void. The table is the
// caller's to release.
func (s *sortSpec) keyTable(tbl arrow.Table, mem memory.Allocator) (arrow.Table, []compute.SortKey, error) {
	var fields []arrow.Field
	var cols []arrow.Column
	defer func() {
		for i := range cols {
			cols[i].Release()
		}
	}()
	keys := make([]compute.SortKey, 0, len(s.keys))
	for _, k := range s.keys {
		if _, void := k.transform.(iceberg.VoidTransform); void {
			continue
		}
		idx := tbl.Schema().FieldIndices(k.name)
		if len(idx) != 1 {
			return nil, nil, fmt.Errorf("sort column %q is not in the rows read", k.name)
		}
		src := tbl.Column(idx[0])
		var data *arrow.Chunked
		if k.transform == nil {
			data = src.Data()
			data.Retain()
		} else {
			var err error
			if data, err = transformChunks(k, src.Data(), mem); err != nil {
				return nil, nil, err
			}
		}
		f := arrow.Field{Name: fmt.Sprintf("key%d", len(fields)), Type: data.DataType(), Nullable: true}
		cols = append(cols, *arrow.NewColumn(f, data))
		data.Release()
		fields = append(fields, f)
		key := compute.SortKey{ColumnIndex: len(keys), Order: compute.SortOrderAscending, NullPlacement: compute.SortNullsAtEnd}
		if k.desc {
			key.Order = compute.SortOrderDescending
		}
		if k.nullsFirst {
			key.NullPlacement = compute.SortNullsAtStart
		}
		keys = append(keys, key)
	}
	return array.NewTable(arrow.NewSchema(fields, nil), cols, tbl.NumRows()), keys, nil
}

// transformChunks is k's transform of every value of data, chunk by chunk.
func transformChunks(k sortKey, data *arrow.Chunked, mem memory.Allocator) (*arrow.Chunked, error) {
	apply, err := bindTransform(k.transform, k.typ)
	if err != nil {
		return nil, fmt.Errorf("sort key %s: %w", k.term(), err)
	}
	out := make([]arrow.Array, 0, len(data.Chunks()))
	defer func() {
		for _, a := range out {
			a.Release()
		}
	}()
	var typ arrow.DataType
	for _, c := range data.Chunks() {
		a, err := transformArray(apply, k.transform, k.typ, c, mem)
		if err != nil {
			return nil, fmt.Errorf("sort key %s: %w", k.term(), err)
		}
		out, typ = append(out, a), a.DataType()
	}
	if typ == nil {
		if typ, err = keyArrowType(k.transform, data.DataType()); err != nil {
			return nil, fmt.Errorf("sort key %s: %w", k.term(), err)
		}
	}
	return arrow.NewChunked(typ, out), nil
}

// bindTransform is tr as a function of one non-null value of type src, as
// iceberg-go's transforms take it; nil is a null result.
func bindTransform(tr iceberg.Transform, src iceberg.Type) (func(any) any, error) {
	optional := func(fn func(any) iceberg.Optional[int32]) func(any) any {
		return func(v any) any {
			if o := fn(v); o.Valid {
				return o.Val
			}
			return nil
		}
	}
	if !tr.CanTransform(src) {
		return nil, fmt.Errorf("transform %s does not apply to type %s", tr, src)
	}
	switch t := tr.(type) {
	case iceberg.BucketTransform:
		return optional(t.Transformer(src)), nil
	case iceberg.TruncateTransform:
		return t.Transformer(src)
	case iceberg.TimeTransform: // years, months, days, hours
		fn, err := t.Transformer(src)
		if err != nil {
			return nil, err
		}
		return optional(fn), nil
	}
	return nil, fmt.Errorf("transform %s is not supported", tr)
}

// keyArrowType is the Arrow type of tr's results over a column of type
// src: int32 for bucket and the time transforms (their ordinals), the
// column's own type for truncate.
func keyArrowType(tr iceberg.Transform, src arrow.DataType) (arrow.DataType, error) {
	if _, ok := tr.(iceberg.TruncateTransform); !ok {
		return arrow.PrimitiveTypes.Int32, nil
	}
	switch src.ID() {
	case arrow.INT32, arrow.INT64, arrow.DECIMAL128:
		return src, nil
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return arrow.BinaryTypes.String, nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return arrow.BinaryTypes.Binary, nil
	}
	return nil, fmt.Errorf("truncate of Arrow type %s is not supported", src)
}

// transformArray applies apply, tr bound to the column type src, to every
// value of arr; nulls stay null.
func transformArray(apply func(any) any, tr iceberg.Transform, src iceberg.Type, arr arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	typ, err := keyArrowType(tr, arr.DataType())
	if err != nil {
		return nil, err
	}
	value, err := icebergValues(arr, src)
	if err != nil {
		return nil, err
	}
	b := array.NewBuilder(mem, typ)
	defer b.Release()
	b.Reserve(arr.Len())
	for i := range arr.Len() {
		if arr.IsNull(i) {
			b.AppendNull()
			continue
		}
		switch v := apply(value(i)).(type) {
		case nil:
			b.AppendNull()
		case int32:
			b.(*array.Int32Builder).Append(v)
		case int64:
			b.(*array.Int64Builder).Append(v)
		case string:
			b.(*array.StringBuilder).Append(v)
		case []byte:
			b.(*array.BinaryBuilder).Append(v)
		case iceberg.Decimal:
			b.(*array.Decimal128Builder).Append(v.Val)
		default:
			return nil, fmt.Errorf("transform %s gave a %T", tr, v)
		}
	}
	return b.NewArray(), nil
}

// icebergValues reads the values of arr, a column of Iceberg type src, as
// the Go values iceberg-go's transforms take: int32, int64, iceberg.Date,
// Time (µs), Timestamp (µs) or TimestampNano, Decimal, string or []byte.
func icebergValues(arr arrow.Array, src iceberg.Type) (func(int) any, error) {
	switch a := arr.(type) {
	case *array.Int32:
		return func(i int) any { return a.Value(i) }, nil
	case *array.Int64:
		return func(i int) any { return a.Value(i) }, nil
	case *array.Date32:
		return func(i int) any { return iceberg.Date(a.Value(i)) }, nil
	case *array.Time64:
		unit := a.DataType().(*arrow.Time64Type).Unit
		return func(i int) any { return iceberg.Time(toUnit(int64(a.Value(i)), unit, arrow.Microsecond)) }, nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		switch src.(type) {
		case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
			return func(i int) any { return iceberg.TimestampNano(toUnit(int64(a.Value(i)), unit, arrow.Nanosecond)) }, nil
		}
		return func(i int) any { return iceberg.Timestamp(toUnit(int64(a.Value(i)), unit, arrow.Microsecond)) }, nil
	case *array.Decimal128:
		scale := int(a.DataType().(*arrow.Decimal128Type).Scale)
		return func(i int) any { return iceberg.Decimal{Val: a.Value(i), Scale: scale} }, nil
	case interface{ Value(int) string }: // string, large and view
		return func(i int) any { return a.Value(i) }, nil
	case interface{ Value(int) []byte }: // binary, large, view and fixed
		return func(i int) any { return a.Value(i) }, nil
	case array.ExtensionArray: // uuid: its bytes, which bucket hashes
		return icebergValues(a.Storage(), src)
	}
	return nil, fmt.Errorf("values of Arrow type %s (Iceberg %s) are not supported", arr.DataType(), src)
}

// toUnit converts v from one time unit to another, rounding down.
func toUnit(v int64, from, to arrow.TimeUnit) int64 {
	f, t := from.Multiplier().Nanoseconds(), to.Multiplier().Nanoseconds()
	if f >= t {
		return v * (f / t)
	}
	d := t / f
	q := v / d
	if v%d < 0 {
		q--
	}
	return q
}

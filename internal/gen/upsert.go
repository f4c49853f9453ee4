package gen

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
)

// What an upsert writer commits to a generated table, for the tests and the
// upsertwriter bench that run compaction beside one.

// UpsertRows builds new versions of rows: user_id and session_id say which
// version, the other columns are empty or null.
func UpsertRows(tbl *table.Table, ids []int64, times []arrow.Timestamp, version int64) (arrow.RecordBatch, error) {
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, f := range sc.Fields() {
		fb := b.Field(i)
		for r := range ids {
			switch f.Name {
			case ColEventID:
				fb.(*array.Int64Builder).Append(ids[r])
			case ColEventTime:
				fb.(*array.TimestampBuilder).Append(times[r])
			case ColUserID:
				fb.(*array.Int64Builder).Append(version)
			case ColSessionID:
				fb.(*array.StringBuilder).Append(fmt.Sprintf("v%d", version))
			default:
				if f.Nullable {
					fb.AppendNull()
				} else {
					fb.AppendEmptyValue()
				}
			}
		}
	}
	return b.NewRecordBatch(), nil
}

// KeyRows builds the rows of an equality-delete file: event_id, and
// event_time when the table is partitioned by it.
func KeyRows(tbl *table.Table, cols []string, ids []int64, times []arrow.Timestamp) (arrow.RecordBatch, error) {
	sub, err := tbl.Schema().Select(true, cols...)
	if err != nil {
		return nil, err
	}
	sc, err := table.SchemaToArrowSchema(sub, nil, true, false)
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	if len(cols) > 1 {
		b.Field(1).(*array.TimestampBuilder).AppendValues(times, nil)
	}
	return b.NewRecordBatch(), nil
}

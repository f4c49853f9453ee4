package gen

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/commitconflict"
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

// WriteUpsert writes the files of one upsert commit to tbl: a data file of
// new versions (UpsertRows) of rows ids at times, none when ids is empty,
// and an equality-delete file (KeyRows) of keys at keyTimes, on event_id,
// with event_time when the table is partitioned.
func WriteUpsert(ctx context.Context, tbl *table.Table, ids []int64, times []arrow.Timestamp, version int64, keys []int64, keyTimes []arrow.Timestamp) (data, dels []iceberg.DataFile, err error) {
	delCols := []string{ColEventID}
	if spec := tbl.Spec(); spec.NumFields() > 0 {
		delCols = append(delCols, ColEventTime)
	}
	delRec, err := KeyRows(tbl, delCols, keys, keyTimes)
	if err != nil {
		return nil, nil, err
	}
	defer delRec.Release()
	dels, err = tbl.NewTransaction().WriteEqualityDeletes(ctx, []int{tbl.Schema().Field(0).ID},
		func(yield func(arrow.RecordBatch, error) bool) { yield(delRec, nil) })
	if err != nil || len(ids) == 0 {
		return nil, dels, err
	}
	dataRec, err := UpsertRows(tbl, ids, times, version)
	if err != nil {
		return nil, nil, err
	}
	defer dataRec.Release()
	for df, err := range table.WriteRecords(ctx, tbl, dataRec.Schema(), func(yield func(arrow.RecordBatch, error) bool) { yield(dataRec, nil) }) {
		if err != nil {
			return nil, nil, err
		}
		data = append(data, df)
	}
	return data, dels, nil
}

// CommitRowDelta commits data and dels in one row delta on tbl. A commit
// that loses to another writer is tried again on the table reload gives,
// up to 50 times, as a writer beside maintenance would; it returns the
// attempts made.
func CommitRowDelta(ctx context.Context, tbl *table.Table, reload func() (*table.Table, error), data, dels []iceberg.DataFile) (int, error) {
	for attempt := 1; ; attempt++ {
		txn := tbl.NewTransaction()
		if err := txn.NewRowDelta(nil).AddRows(data...).AddDeletes(dels...).Commit(ctx); err != nil {
			return attempt, err
		}
		_, err := txn.Commit(ctx)
		if err == nil {
			return attempt, nil
		}
		if !commitconflict.Is(err) || attempt > 50 {
			return attempt, err
		}
		if tbl, err = reload(); err != nil {
			return attempt, err
		}
	}
}

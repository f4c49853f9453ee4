package gen

import (
	"context"
	"hash/fnv"

	"github.com/apache/iceberg-go/table"
)

// Checksum scans the current snapshot of tbl and returns its row count and an
// order-independent checksum of the row contents (the wrapping sum of a
// 64-bit FNV-1a hash of each row's values). Two tables with the same rows,
// however they are split into files, have the same checksum; use it to check
// that a rewrite/compaction preserved the data.
func Checksum(ctx context.Context, tbl *table.Table) (rows int64, sum uint64, err error) {
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return 0, 0, err
	}
	h := fnv.New64a()
	var buf []byte
	for rec, err := range recs {
		if err != nil {
			return 0, 0, err
		}
		cols := rec.Columns()
		for i := range int(rec.NumRows()) {
			buf = buf[:0]
			for _, c := range cols {
				if c.IsNull(i) {
					buf = append(buf, 0)
				} else {
					buf = append(buf, 1)
					buf = append(buf, c.ValueStr(i)...)
				}
				buf = append(buf, 0x1f)
			}
			h.Reset()
			_, _ = h.Write(buf)
			sum += h.Sum64()
		}
		rows += rec.NumRows()
		rec.Release()
	}

	return rows, sum, nil
}

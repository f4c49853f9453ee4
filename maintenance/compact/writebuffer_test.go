package compact

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go/table"
)

// rowGroupBytes lists the encoded bytes of each row group of a file.
func rowGroupBytes(t *testing.T, p string) []int64 {
	t.Helper()
	r, err := file.OpenParquetFile(strings.TrimPrefix(p, "file://"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []int64
	for i := range r.NumRowGroups() {
		out = append(out, r.MetaData().RowGroup(i).TotalCompressedSize())
	}
	return out
}

// write_buffer_size bounds what the writers of a run buffer together: each
// of the run's concurrent writers closes its row group at its share of it,
// on every path. A 1GiB buffer leaves the table's row-group size in force
// (one row group a file here); a small one cuts row groups at budget/2 with
// two groups at once, and at the whole budget when one group runs alone.
func TestWriteBufferSizeBoundsRowGroups(t *testing.T) {
	const budget = 2 << 20
	// Slack past the share: the check runs before each batch of 1000
	// rows, and counts encoded pages as iceberg-go's writer does, not the
	// columns' dictionaries (written when the row group closes) nor the
	// pages still open.
	const slack = 700_000
	for _, mode := range writeModes {
		for _, parts := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d partitions", mode.path, parts), func(t *testing.T) {
				t.Parallel()
				share := int64(budget / parts)
				for _, buffer := range []int64{1 << 30, budget} {
					f := newTable(t, 12, 8000, parts)
					setProps(t, f, map[string]string{table.ParquetPageSizeBytesKey: "16384"})
					cfg := testConfig()
					cfg.WriteBufferSize = buffer
					ctx := context.Background()
					plan, err := PlanTable(ctx, f.reload(t), cfg, time.Now())
					if err != nil {
						t.Fatal(err)
					}
					if len(plan.Groups) != parts {
						t.Fatalf("%d groups planned, want %d", len(plan.Groups), parts)
					}
					var log pathLog
					opts := guarded(t, Options{ArrowBatchRows: 1000})
					if _, err := execute(ctx, f.cat, f.reload(t), plan, cfg, opts, log.watch(mode.paths)); err != nil {
						t.Fatal(err)
					}
					if got := log.all(); len(got) != parts || got[0] != mode.path {
						t.Fatalf("paths %v (why %v), want %s", got, log.whys, mode.path)
					}
					tbl := f.reload(t)
					if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
						t.Fatalf("%d rows checksum %x after, %d rows %x before", rows, sum, f.rows, f.sum)
					}
					var largest int64
					for _, df := range liveDataFiles(t, tbl) {
						rgs := rowGroupBytes(t, df.FilePath())
						t.Logf("buffer %d: %s: row groups of %v bytes", buffer, df.FilePath(), rgs)
						if buffer > budget {
							if len(rgs) != 1 {
								t.Fatalf("buffer %d: %d row groups, want 1 (the table's row-group size)", buffer, len(rgs))
							}
							continue
						}
						if len(rgs) < 3 {
							t.Fatalf("buffer %d: %d row groups, want the file cut at %d bytes", buffer, len(rgs), share)
						}
						for _, n := range rgs {
							if n > share+slack {
								t.Fatalf("buffer %d: a row group of %d bytes, over the writer's share %d", buffer, n, share)
							}
							largest = max(largest, n)
						}
					}
					// One group alone has the whole buffer.
					if buffer == budget && parts == 1 && largest <= budget/2 {
						t.Fatalf("largest row group %d bytes, want over %d: a lone writer has the whole buffer", largest, budget/2)
					}
				}
			})
		}
	}
}

func TestWriteBufferSizeValidation(t *testing.T) {
	for _, n := range []int64{-1, 1000} {
		cfg := DefaultConfig()
		cfg.WriteBufferSize = n
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "write_buffer_size") {
			t.Errorf("write_buffer_size %d: %v, want an error naming it", n, err)
		}
	}
	cfg := DefaultConfig()
	if got := cfg.rowGroupCap(10); got != DefaultWriteBufferSize/2 {
		t.Errorf("default cap with 2 concurrent groups: %d, want %d", got, DefaultWriteBufferSize/2)
	}
	if got := cfg.rowGroupCap(1); got != DefaultWriteBufferSize {
		t.Errorf("default cap with 1 group: %d, want %d", got, DefaultWriteBufferSize)
	}
}

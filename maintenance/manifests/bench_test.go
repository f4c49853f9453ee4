package manifests

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// BenchmarkScanPlanning plans a full scan of a table a streaming writer
// left with 300 single-append manifests over 10 day partitions, then
// rewrites its manifests and plans the same scan again:
//
//	go test -run '^$' -bench ScanPlanning -benchtime 20x ./maintenance/manifests/
//
// The manifests metric is the current snapshot's manifest count.
func BenchmarkScanPlanning(b *testing.B) {
	ctx := context.Background()
	cat, tbl, _ := testenv.GeneratedTable(b, gen.Options{Appends: 300, RowsPerAppend: 10, Partitions: 10})
	planScan := func(b *testing.B, tbl *table.Table) {
		fs, err := tbl.FS(ctx)
		if err != nil {
			b.Fatal(err)
		}
		list, err := tbl.CurrentSnapshot().Manifests(fs)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			tasks, err := tbl.Scan().PlanFiles(ctx)
			if err != nil || len(tasks) != 300 {
				b.Fatalf("%d tasks, %v", len(tasks), err)
			}
		}
		b.ReportMetric(float64(len(list)), "manifests")
	}
	b.Run("before", func(b *testing.B) { planScan(b, tbl) })

	plan, err := PlanTable(ctx, tbl, DefaultConfig())
	if err != nil || plan.Empty() {
		b.Fatalf("plan %+v, %v", plan, err)
	}
	if _, err := Execute(ctx, cat, tbl, plan, DefaultConfig(), Options{}); err != nil {
		b.Fatal(err)
	}
	if tbl, err = cat.LoadTable(ctx, tbl.Identifier()); err != nil {
		b.Fatal(err)
	}
	b.Run("after", func(b *testing.B) { planScan(b, tbl) })
}

package gen

import (
	"context"
	"path/filepath"
	"sort"
	"testing"
)

func TestZZCols(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, tbl, err := CreateWarehouseForBenchmark(ctx, filepath.Join(dir, "x"), Options{Appends: 3, RowsPerAppend: 2000, Partitions: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tasks, _ := tbl.Scan().PlanFiles(ctx)
	for _, task := range tasks[:1] {
		cs := task.File.ColumnSizes()
		ids := []int{}
		for id := range cs {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			t.Logf("col %d %s: %d B (%.1f B/row)", id, func() string { n, _ := tbl.Schema().FindColumnName(id); return n }(), cs[id], float64(cs[id])/2000)
		}
		t.Logf("file %d B", task.File.FileSizeBytes())
	}
}

package gen

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/apache/iceberg-go/table"
)

func heapMB() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc >> 20
}

func TestZZRetention(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := OpenSQLiteCatalog(ctx, "x", filepath.Join(dir, "c.db"), filepath.Join(dir, "wh"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	opt := Options{Appends: 1, RowsPerAppend: 10, Partitions: 3}
	tbl, err := Create(ctx, cat, opt)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 400; i++ {
		tbl, err = Append(ctx, tbl, opt, 1, i)
		if err != nil {
			t.Fatal(err)
		}
		tbl = table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, cat)
		if i%100 == 0 {
			t.Logf("after %d appends heap %d MB", i, heapMB())
			re, _ := cat.LoadTable(ctx, opt.Identifier())
			_ = re
			t.Logf("   reloaded: heap %d MB", heapMB())
		}
	}
}

package gen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
)

type sqlCatalog = sqlcat.Catalog

type tableStats struct {
	snapshots, dataFiles, partitions int
	recordCount                      int64 // from manifests
	rows                             int64 // from a scan
	distinctIDs                      int
	checksum                         uint64
	fileSizes                        []int64
}

func collectStats(t *testing.T, ctx context.Context, tbl *table.Table) tableStats {
	t.Helper()
	var st tableStats
	st.snapshots = len(tbl.Metadata().Snapshots())

	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]bool{}
	for _, task := range tasks {
		st.dataFiles++
		st.recordCount += task.File.Count()
		st.fileSizes = append(st.fileSizes, task.File.FileSizeBytes())
		if task.File.FileFormat() != iceberg.ParquetFile {
			t.Errorf("file format %v", task.File.FileFormat())
		}
		parts[fmt.Sprint(task.File.Partition())] = true
	}
	st.partitions = len(parts)

	_, recs, err := tbl.Scan(table.WithSelectedFields(ColEventID)).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]bool{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := rec.Column(0).(*array.Int64)
		for i := range col.Len() {
			ids[col.Value(i)] = true
		}
		rec.Release()
	}
	st.distinctIDs = len(ids)

	st.rows, st.checksum, err = Checksum(ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}

	return st
}

func TestCreate(t *testing.T) {
	ctx := context.Background()
	sc, err := OpenSQLiteCatalog(ctx, "test", filepath.Join(t.TempDir(), "catalog.db"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	opt := Options{Namespace: "ns", Table: "events", Appends: 12, RowsPerAppend: 100, Partitions: 3, Seed: 42,
		Start: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}
	tbl, err := Create(ctx, sc, opt)
	if err != nil {
		t.Fatal(err)
	}
	st := collectStats(t, ctx, tbl)
	if st.snapshots != 12 || st.dataFiles != 12 || st.partitions != 3 {
		t.Fatalf("snapshots=%d files=%d partitions=%d, want 12/12/3", st.snapshots, st.dataFiles, st.partitions)
	}
	if st.rows != 1200 || st.recordCount != 1200 || st.distinctIDs != 1200 {
		t.Fatalf("rows=%d records=%d distinct ids=%d, want 1200", st.rows, st.recordCount, st.distinctIDs)
	}

	// Every snapshot is an append of one data file, tagged with its index.
	for i, s := range tbl.Metadata().Snapshots() {
		if s.Summary == nil || s.Summary.Operation != table.OpAppend {
			t.Fatalf("snapshot %d: summary %+v", i, s.Summary)
		}
		if got := s.Summary.Properties["added-data-files"]; got != "1" {
			t.Errorf("snapshot %d: added-data-files=%s", i, got)
		}
		if got := s.Summary.Properties[SummaryAppendIndex]; got != strconv.Itoa(i) {
			t.Errorf("snapshot %d: %s=%s", i, SummaryAppendIndex, got)
		}
	}

	// Partition values are the 3 consecutive days from Start, 4 files each.
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	startDay := int(opt.Start.Unix() / 86400)
	perDay := map[int]int{}
	for _, task := range tasks {
		p := task.File.Partition()
		if len(p) != 1 {
			t.Fatalf("partition %v", p)
		}
		for _, v := range p {
			d, ok := v.(iceberg.Date)
			if !ok {
				t.Fatalf("partition value %T %v", v, v)
			}
			perDay[int(d)-startDay]++
		}
	}
	if len(perDay) != 3 || perDay[0] != 4 || perDay[1] != 4 || perDay[2] != 4 {
		t.Fatalf("files per day offset: %v", perDay)
	}
	if got := NextAppendIndex(tbl); got != 12 {
		t.Fatalf("NextAppendIndex = %d, want 12", got)
	}

	// Reload through the catalog (metadata round-trip).
	loaded, err := sc.LoadTable(ctx, opt.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.CurrentSnapshot().SnapshotID; got != tbl.CurrentSnapshot().SnapshotID {
		t.Fatalf("reloaded snapshot %d != %d", got, tbl.CurrentSnapshot().SnapshotID)
	}

	// Determinism: same seed -> same rows, different seed -> different rows.
	opt2 := opt
	opt2.Table = "events_again"
	opt2.Workers = 1 // generation order must not matter
	tbl2, err := Create(ctx, sc, opt2)
	if err != nil {
		t.Fatal(err)
	}
	st2 := collectStats(t, ctx, tbl2)
	if st2.checksum != st.checksum || st2.rows != st.rows {
		t.Fatalf("same seed: checksum %x/%d != %x/%d", st2.checksum, st2.rows, st.checksum, st.rows)
	}
	opt3 := opt
	opt3.Table, opt3.Seed = "events_other", 43
	tbl3, err := Create(ctx, sc, opt3)
	if err != nil {
		t.Fatal(err)
	}
	if _, sum3, err := Checksum(ctx, tbl3); err != nil || sum3 == st.checksum {
		t.Fatalf("different seed: checksum %x (err %v) == %x", sum3, err, st.checksum)
	}

	// Append continues the data set: Create(12) + Append(4, from 12) has the
	// same rows as Create(16).
	tbl, err = Append(ctx, tbl, opt, 4, 12)
	if err != nil {
		t.Fatal(err)
	}
	st = collectStats(t, ctx, tbl)
	if st.snapshots != 16 || st.dataFiles != 16 || st.rows != 1600 || st.distinctIDs != 1600 {
		t.Fatalf("after Append: %+v", st)
	}
	opt4 := opt
	opt4.Table, opt4.Appends = "events16", 16
	tbl4, err := Create(ctx, sc, opt4)
	if err != nil {
		t.Fatal(err)
	}
	if _, sum4, err := Checksum(ctx, tbl4); err != nil || sum4 != st.checksum {
		t.Fatalf("Create(16) checksum %x (err %v) != Create(12)+Append(4) %x", sum4, err, st.checksum)
	}
}

// TestRoundTrip checks that every column reads back exactly as generated.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	cat, err := OpenSQLiteCatalog(ctx, "test", filepath.Join(t.TempDir(), "c.db"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	opt := Options{Appends: 1, RowsPerAppend: 3000, Partitions: 5, Seed: 99}
	tbl, err := Create(ctx, cat, opt)
	if err != nil {
		t.Fatal(err)
	}
	arrowSc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	o := opt.withDefaults()
	want := buildBatch(memory.DefaultAllocator, arrowSc, &o, 0, opt.RowsPerAppend)
	defer want.Release()

	got, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if got.NumRows() != want.NumRows() || got.NumCols() != want.NumCols() {
		t.Fatalf("got %dx%d, want %dx%d", got.NumRows(), got.NumCols(), want.NumRows(), want.NumCols())
	}
	nulls := map[string]int{}
	for c := range int(want.NumCols()) {
		name := want.ColumnName(c)
		if g := got.Schema().Field(c).Name; g != name {
			t.Fatalf("column %d: %s != %s", c, g, name)
		}
		chunks := got.Column(c).Data().Chunks()
		w := want.Column(c)
		row := 0
		for _, ch := range chunks {
			for i := range ch.Len() {
				if ch.IsNull(i) != w.IsNull(row) || ch.ValueStr(i) != w.ValueStr(row) {
					t.Fatalf("column %s row %d: got %q, want %q", name, row, ch.ValueStr(i), w.ValueStr(row))
				}
				if w.IsNull(row) {
					nulls[name]++
				}
				row++
			}
		}
	}
	t.Logf("types: %v; nulls: %v", got.Schema(), nulls)
	if nulls[ColAmount] == 0 || nulls[ColAmount] == opt.RowsPerAppend || nulls[ColEventID] != 0 {
		t.Fatalf("unexpected null counts %v", nulls)
	}

	// event_time lies within the partition day, ingest_date on that day or
	// the next one.
	ts := want.Column(1).(*array.Timestamp)
	dates := want.Column(10).(*array.Date32)
	day := DefaultStart.UnixMicro()
	for i := range ts.Len() {
		v := int64(ts.Value(i))
		if v < day || v >= day+86400e6 {
			t.Fatalf("row %d: event_time %d outside day %d", i, v, day)
		}
		if d := int64(dates.Value(i)) - day/86400e6; d != 0 && d != 1 {
			t.Fatalf("row %d: ingest_date offset %d", i, d)
		}
	}
}

func TestAppendRejectsForeignSchema(t *testing.T) {
	ctx := context.Background()
	cat, err := OpenSQLiteCatalog(ctx, "test", filepath.Join(t.TempDir(), "c.db"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if err := cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	other, err := cat.CreateTable(ctx, table.Identifier{"ns", "other"}, iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Append(ctx, other, Options{}, 1, 0); err == nil {
		t.Fatal("Append to a foreign table succeeded")
	}
}

func TestCreateUnpartitionedV1SmallTarget(t *testing.T) {
	ctx := context.Background()
	cat, err := OpenSQLiteCatalog(ctx, "test", filepath.Join(t.TempDir(), "c.db"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	// A target file size far below the file size must still give one file
	// per append.
	tbl, err := Create(ctx, cat, Options{Appends: 5, RowsPerAppend: 500, Seed: 1, FormatVersion: 1,
		Properties: map[string]string{table.WriteTargetFileSizeBytesKey: "1024"}})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Metadata().Version() != 1 || !tbl.Spec().IsUnpartitioned() {
		t.Fatalf("version %d, spec %v", tbl.Metadata().Version(), tbl.Spec())
	}
	if got := tbl.Properties()[table.WriteTargetFileSizeBytesKey]; got != "1024" {
		t.Fatalf("target file size property %q", got)
	}
	st := collectStats(t, ctx, tbl)
	if st.snapshots != 5 || st.dataFiles != 5 || st.rows != 2500 || st.distinctIDs != 2500 || st.partitions != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFilesPerCommit(t *testing.T) {
	ctx := context.Background()
	cat, err := OpenSQLiteCatalog(ctx, "test", filepath.Join(t.TempDir(), "c.db"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	// 10 appends 4 to a commit: snapshots of 4, 4 and the 2 left.
	tbl, err := Create(ctx, cat, Options{Appends: 10, RowsPerAppend: 50, Partitions: 1, Seed: 1, FilesPerCommit: 4})
	if err != nil {
		t.Fatal(err)
	}
	st := collectStats(t, ctx, tbl)
	if st.snapshots != 3 || st.dataFiles != 10 || st.rows != 500 || st.distinctIDs != 500 {
		t.Fatalf("stats %+v", st)
	}
	if got := NextAppendIndex(tbl); got != 10 {
		t.Fatalf("NextAppendIndex = %d, want 10", got)
	}
}

func TestCreateV3(t *testing.T) {
	ctx := context.Background()
	cat, err := OpenSQLiteCatalog(ctx, "test", filepath.Join(t.TempDir(), "c.db"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := Create(ctx, cat, Options{Appends: 4, RowsPerAppend: 500, Partitions: 2, Seed: 1, FormatVersion: 3,
		Properties: map[string]string{table.WriteTargetFileSizeBytesKey: "1024"}})
	if err != nil {
		t.Fatal(err)
	}
	st := collectStats(t, ctx, tbl)
	if st.snapshots != 4 || st.dataFiles != 4 || st.rows != 2000 || st.distinctIDs != 2000 || st.partitions != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Row lineage: first_row_ids 0, 500, 1000, 1500 and next-row-id 2000.
	if got := tbl.Metadata().NextRowID(); got != 2000 {
		t.Fatalf("next-row-id %d", got)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, task := range tasks {
		if id := task.File.FirstRowID(); id != nil {
			seen[*id] = true
		}
	}
	for _, id := range []int64{0, 500, 1000, 1500} {
		if !seen[id] {
			t.Fatalf("first_row_ids %v, missing %d", seen, id)
		}
	}
}

// TestConcurrentWriters runs two Append calls on the same table through two
// catalogs sharing one SQLite file: conflicts must be retried, no append lost.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *sqlCatalog {
		c, err := OpenSQLiteCatalog(ctx, "test", filepath.Join(dir, "c.db"), filepath.Join(dir, "wh"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })

		return c
	}
	c1, c2 := open(), open()
	opt := Options{Appends: 2, RowsPerAppend: 50, Partitions: 2, Seed: 7}
	if _, err := Create(ctx, c1, opt); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for i, c := range []*sqlCatalog{c1, c2} {
		go func() {
			tbl, err := c.LoadTable(ctx, opt.Identifier())
			if err == nil {
				_, err = Append(ctx, tbl, opt, 10, 2+10*i)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := c1.LoadTable(ctx, opt.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	st := collectStats(t, ctx, tbl)
	if st.snapshots != 22 || st.dataFiles != 22 || st.rows != 1100 || st.distinctIDs != 1100 {
		t.Fatalf("stats %+v", st)
	}
	// No orphaned data files left behind by retries.
	var n int
	err = filepath.Walk(filepath.Join(dir, "wh"), func(p string, info os.FileInfo, err error) error {
		if err == nil && filepath.Ext(p) == ".parquet" {
			n++
		}

		return err
	})
	if err != nil || n != 22 {
		t.Fatalf("%d parquet files on disk (err %v), want 22", n, err)
	}
}

// TestMeasure reports file sizes and generation speed. Run with
// GEN_MEASURE=appends[,rows[,partitions]] e.g. GEN_MEASURE=1000,2000,30.
func TestMeasure(t *testing.T) {
	spec := os.Getenv("GEN_MEASURE")
	if spec == "" {
		t.Skip("set GEN_MEASURE=appends[,rows]")
	}
	appends, rows, parts := 0, 2000, 30
	for i, f := range strings.Split(spec, ",") {
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		*[]*int{&appends, &rows, &parts}[i] = v
	}
	ctx := context.Background()
	dir := t.TempDir()
	if d := os.Getenv("GEN_MEASURE_DIR"); d != "" {
		dir = d
	}
	start := time.Now()
	cat, tbl, err := CreateWarehouseForBenchmark(ctx, dir, Options{Appends: appends, RowsPerAppend: rows, Partitions: parts, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	elapsed := time.Since(start)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, task := range tasks {
		total += task.File.FileSizeBytes()
	}
	t.Logf("%d appends x %d rows (%d partitions): %v (%.1f appends/s), %d files, avg file %d B (%.1f B/row)",
		appends, rows, parts, elapsed, float64(appends)/elapsed.Seconds(), len(tasks),
		total/int64(len(tasks)), float64(total)/float64(int64(len(tasks))*int64(rows)))
}

// BenchmarkAppend measures one generated append (2,000 rows, one file, one
// commit) on a table with b.N snapshots.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	cat, tbl, err := CreateWarehouseForBenchmark(ctx, b.TempDir(), Options{Partitions: 30, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	b.ResetTimer()
	tbl, err = Append(ctx, tbl, Options{Partitions: 30, Seed: 1}, b.N, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, t := range tasks {
		size += t.File.FileSizeBytes()
	}
	b.ReportMetric(float64(size)/float64(len(tasks)), "B/file")
}

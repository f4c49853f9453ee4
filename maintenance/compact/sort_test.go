package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

func TestSortOrderParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []SortColumn
		err  string
	}{
		{in: "id", want: []SortColumn{{Name: "id", NullsFirst: true}}},
		{in: "id DESC NULLS LAST, ts", want: []SortColumn{{Name: "id", Desc: true}, {Name: "ts", NullsFirst: true}}},
		{in: "id desc", want: []SortColumn{{Name: "id", Desc: true}}},
		{in: "id DESC NULLS FIRST", want: []SortColumn{{Name: "id", Desc: true, NullsFirst: true}}},
		{in: "id asc nulls last ,  `odd, name` DESC", want: []SortColumn{{Name: "id"}, {Name: "odd, name", Desc: true}}},
		{in: "`a``b`", want: []SortColumn{{Name: "a`b", NullsFirst: true}}},
		{in: "", err: "empty sort order"},
		{in: "id,", err: "term 2 is empty"},
		{in: "id DESC NULLS", err: "want column"},
		{in: "id NULLS MIDDLE", err: "FIRST or LAST"},
		{in: "id SIDEWAYS", err: "want column"},
		{in: "id, id DESC", err: `"id" appears twice`},
		{in: "bucket(16, id)", want: []SortColumn{{Name: "id", Transform: iceberg.BucketTransform{NumBuckets: 16}, NullsFirst: true}}},
		{in: "BUCKET(4,`odd, name`) DESC", want: []SortColumn{{Name: "odd, name", Transform: iceberg.BucketTransform{NumBuckets: 4}, Desc: true}}},
		{in: "truncate(name, 4) NULLS LAST", want: []SortColumn{{Name: "name", Transform: iceberg.TruncateTransform{Width: 4}}}},
		{in: "truncate(4, name)", want: []SortColumn{{Name: "name", Transform: iceberg.TruncateTransform{Width: 4}, NullsFirst: true}}},
		{in: "years(ts), month(d) DESC, days(e), date(f), hours(g) NULLS LAST, date_hour(h), identity(i)", want: []SortColumn{
			{Name: "ts", Transform: iceberg.YearTransform{}, NullsFirst: true}, {Name: "d", Transform: iceberg.MonthTransform{}, Desc: true},
			{Name: "e", Transform: iceberg.DayTransform{}, NullsFirst: true}, {Name: "f", Transform: iceberg.DayTransform{}, NullsFirst: true},
			{Name: "g", Transform: iceberg.HourTransform{}}, {Name: "h", Transform: iceberg.HourTransform{}, NullsFirst: true},
			{Name: "i", NullsFirst: true}}},
		{in: "bucket(4, id), id DESC", want: []SortColumn{{Name: "id", Transform: iceberg.BucketTransform{NumBuckets: 4}, NullsFirst: true}, {Name: "id", Desc: true}}},
		{in: "id, identity(id)", err: `"id" appears twice`},
		{in: "bucket(4, id), bucket(4, id) DESC", err: `bucket[4] of column "id" appears twice`},
		{in: "zorder(a, b)", err: `unknown transform "zorder"`},
		{in: "bucket(0, id)", err: "positive integer"},
		{in: "bucket(id, 16)", err: "positive integer"},
		{in: "bucket(99999999999, id)", err: "positive integer"},
		{in: "bucket(16)", err: "bucket takes"},
		{in: "truncate(name, -1)", err: "positive integer"},
		{in: "truncate(name, x)", err: "positive integer"},
		{in: "truncate(4, 5)", err: "want a column"},
		{in: "days(ts, 2)", err: "takes one column"},
		{in: "days()", err: "takes one column"},
		{in: "days(ts,)", err: "argument missing"},
		{in: "days(ts", err: "unclosed parenthesis"},
		{in: "days(ts) DESC x", err: "want column"},
		{in: "`days`(ts)", err: "not quoted"},
		{in: "bucket(4, f(x))", err: "arguments must be"},
		{in: "`id", err: "unterminated backquote"},
	} {
		got, err := ParseSortOrder(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSortOrder(%q): error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSortOrder(%q): %v", tc.in, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("ParseSortOrder(%q) = %+v, want %+v", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseSortOrder(%q) = %+v, want %+v", tc.in, got, tc.want)
				break
			}
		}
	}
}

func TestSortConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(*Config)
		field string
	}{
		{"sort needs sort_order", func(c *Config) { c.Strategy = StrategySort }, "sort_order"},
		{"bad sort_order", func(c *Config) { c.Strategy, c.SortOrder = StrategySort, "id NULLS" }, "sort_order"},
		{"sort_order without sort", func(c *Config) { c.SortOrder = "id" }, "sort_order"},
		{"zorder", func(c *Config) { c.Strategy = "zorder" }, "strategy"},
		{"unknown transform", func(c *Config) { c.Strategy, c.SortOrder = StrategySort, "id, zorder(a, b)" }, "sort_order"},
		{"bad width", func(c *Config) { c.Strategy, c.SortOrder = StrategySort, "truncate(name, 0)" }, "sort_order"},
		{"tiny sort_memory", func(c *Config) { c.SortMemory = 1000 }, "sort_memory"},
		{"negative sort_memory", func(c *Config) { c.SortMemory = -1 }, "sort_memory"},
	} {
		c := DefaultConfig()
		tc.set(&c)
		err := c.Validate()
		var fe *validate.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Validate() = %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
	for _, order := range []string{"event_id DESC", "bucket(16, user_id), truncate(country, 2) DESC NULLS FIRST, days(event_time)"} {
		c := DefaultConfig()
		c.Strategy, c.SortOrder = StrategySort, order
		if err := c.Validate(); err != nil {
			t.Errorf("valid sort config %q: %v", order, err)
		}
	}
}

// compactWith plans and executes a compaction of f by cfg.
func compactWith(t *testing.T, f *fixture, cfg Config) {
	t.Helper()
	ctx := context.Background()
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{}); err != nil {
		t.Fatal(err)
	}
}

// setSortOrder gives the table a default sort order of fields.
func setSortOrder(t *testing.T, f *fixture, fields ...table.SortField) int {
	t.Helper()
	order, err := table.NewSortOrder(1, fields)
	if err != nil {
		t.Fatal(err)
	}
	tx := f.tbl.NewTransaction()
	if err := tx.ReplaceSortOrder(order); err != nil {
		t.Fatal(err)
	}
	if f.tbl, err = tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := f.tbl.Metadata().DefaultSortOrder()
	if id == table.UnsortedSortOrderID {
		t.Fatal("the table has no sort order after ReplaceSortOrder")
	}
	return id
}

// wantOrder is a sort order checked on files read back.
type wantOrder []sortKey

// readFile reads every row of one data file.
func readFile(t *testing.T, tbl *table.Table, path string) arrow.Table {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	at, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// checkSorted fails unless every row of at follows the one before it in
// order, comparing row by row.
func checkSorted(t *testing.T, path string, at arrow.Table, order wantOrder) {
	t.Helper()
	cols := make([]arrow.Array, len(order))
	for i, k := range order {
		idx := at.Schema().FieldIndices(k.name)
		if len(idx) != 1 {
			t.Fatalf("%s: no column %s", path, k.name)
		}
		chunks := at.Column(idx[0]).Data().Chunks()
		c, err := array.Concatenate(chunks, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		cols[i] = c
	}
	for r := 1; r < int(at.NumRows()); r++ {
		for i, k := range order {
			var c int
			if k.transform != nil {
				c = compareTransformed(t, cols[i], r-1, r, k)
			} else {
				c = compareCell(t, cols[i], r-1, r, k)
			}
			if c < 0 {
				break
			}
			if c > 0 {
				t.Fatalf("%s: row %d comes before row %d against the order on %s", path, r-1, r, k.name)
			}
		}
	}
}

// compareCell is the order of rows a and b of c under key k: negative when
// a comes first.
func compareCell(t *testing.T, c arrow.Array, a, b int, k sortKey) int {
	na, nb := c.IsNull(a), c.IsNull(b)
	switch {
	case na && nb:
		return 0
	case na || nb:
		if na == k.nullsFirst {
			return -1
		}
		return 1
	}
	var v int
	switch arr := c.(type) {
	case *array.Int64:
		v = cmp3(arr.Value(a), arr.Value(b))
	case *array.Int32:
		v = cmp3(arr.Value(a), arr.Value(b))
	case *array.Float32:
		v = cmp3(arr.Value(a), arr.Value(b))
	case *array.Float64:
		v = cmp3(arr.Value(a), arr.Value(b))
	case *array.Date32:
		v = cmp3(arr.Value(a), arr.Value(b))
	case *array.Time64:
		v = cmp3(arr.Value(a), arr.Value(b))
	case *array.Boolean:
		v = cmp3(b2i(arr.Value(a)), b2i(arr.Value(b)))
	case *array.Binary:
		v = bytes.Compare(arr.Value(a), arr.Value(b))
	case *array.FixedSizeBinary:
		v = bytes.Compare(arr.Value(a), arr.Value(b))
	case *array.Timestamp:
		v = cmp3(arr.Value(a), arr.Value(b))
	case *array.String:
		v = strings.Compare(arr.Value(a), arr.Value(b))
	case *array.Decimal128:
		x, y := arr.Value(a), arr.Value(b)
		switch {
		case x.Less(y):
			v = -1
		case y.Less(x):
			v = 1
		}
	default:
		t.Fatalf("compareCell: type %s", c.DataType())
	}
	if k.desc {
		v = -v
	}
	return v
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func cmp3[T int32 | int64 | float32 | float64 | arrow.Timestamp | arrow.Date32 | arrow.Time64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkCompacted checks rows and checksum against the fixture and every
// live data file's order and sort_order_id; it returns the live files.
func checkCompacted(t *testing.T, f *fixture, order wantOrder, orderID *int) []iceberg.DataFile {
	t.Helper()
	tbl := f.reload(t)
	if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
	}
	files := liveDataFiles(t, tbl)
	for _, df := range files {
		got := df.SortOrderID()
		switch {
		case orderID == nil && got != nil:
			t.Errorf("%s: sort_order_id %d, want none", df.FilePath(), *got)
		case orderID != nil && (got == nil || *got != *orderID):
			t.Errorf("%s: sort_order_id %v, want %d", df.FilePath(), got, *orderID)
		}
		at := readFile(t, tbl, df.FilePath())
		if at.NumRows() != df.Count() {
			t.Errorf("%s: %d rows read, %d recorded", df.FilePath(), at.NumRows(), df.Count())
		}
		checkSorted(t, df.FilePath(), at, order)
		at.Release()
	}
	return files
}

func TestSortTableOrderCompactsIntoSortedFiles(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 12, 400, 2)
	id := setSortOrder(t, f,
		table.SortField{SourceIDs: []int{3}, Transform: iceberg.IdentityTransform{}, Direction: table.SortASC, NullOrder: table.NullsFirst},
		table.SortField{SourceIDs: []int{2}, Transform: iceberg.IdentityTransform{}, Direction: table.SortDESC, NullOrder: table.NullsLast})
	cfg := testConfig()
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.sort == nil || plan.sort.orderID == nil || *plan.sort.orderID != id {
		t.Fatalf("plan sort %+v, want the table's order %d", plan.sort, id)
	}
	if got, want := plan.SortOrder(), "user_id, event_time DESC (table sort order 1)"; got != want {
		t.Fatalf("plan sort order %q, want %q", got, want)
	}
	var paths pathLog
	res, err := execute(ctx, f.cat, f.tbl, plan, cfg, Options{}, paths.watch(defaultPaths()))
	if err != nil {
		t.Fatal(err)
	}
	if res.GroupsCommitted != 2 || res.RowsWritten != f.rows {
		t.Fatalf("result %+v", res)
	}
	for _, p := range paths.all() {
		if p != "sort" {
			t.Fatalf("groups went through %v, want the sort path", paths.all())
		}
	}
	order := wantOrder{{name: gen.ColUserID, nullsFirst: true}, {name: gen.ColEventTime, desc: true}}
	if files := checkCompacted(t, f, order, &id); len(files) != 2 {
		t.Fatalf("%d files after compaction, want 2", len(files))
	}
}

func TestSortStrategyWithConfigOrderOnUnsortedTable(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 12, 400, 2)
	cfg := testConfig()
	cfg.Strategy, cfg.SortOrder = StrategySort, "country DESC NULLS LAST, amount, event_id"
	cfg.MinInputFiles = 2
	compactWith(t, f, cfg)
	order := wantOrder{{name: gen.ColCountry, desc: true}, {name: gen.ColAmount, nullsFirst: true}, {name: gen.ColEventID, nullsFirst: true}}
	sorted := checkCompacted(t, f, order, nil)

	// More small files: a sort rewrites every file of the partitions it
	// chooses, the sorted ones too, which are not candidates themselves
	// (min_file_size at their size).
	cfg.MinFileSize = min(sorted[0].FileSizeBytes(), sorted[1].FileSizeBytes())
	f.tbl = f.reload(t)
	tbl, err := gen.Append(ctx, f.tbl, f.opt, 6, gen.NextAppendIndex(f.tbl))
	if err != nil {
		t.Fatal(err)
	}
	f.tbl = tbl
	f.rows, f.sum = checksum(t, tbl)
	plan, err := PlanTable(ctx, tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.InputFiles() != 8 {
		t.Fatalf("plan takes %d files, want all 8 (2 sorted + 6 new)", plan.InputFiles())
	}
	binpack := testConfig()
	binpack.MinInputFiles, binpack.MinFileSize = 2, cfg.MinFileSize
	if bp, err := PlanTable(ctx, tbl, binpack, time.Now()); err != nil || bp.InputFiles() != 6 {
		t.Fatalf("binpack plan takes %d files (%v), want the 6 small ones", bp.InputFiles(), err)
	}
	if _, err := Execute(ctx, f.cat, tbl, plan, cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	if files := checkCompacted(t, f, order, nil); len(files) != 2 {
		t.Fatalf("%d files, want 2", len(files))
	}
}

func TestSortMemoryBudgetSplitsGroups(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 8, 1000, 1)
	cfg := testConfig()
	cfg.Strategy, cfg.SortOrder = StrategySort, "user_id DESC, event_id"
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.sort.memory != DefaultSortMemory {
		t.Fatalf("sort memory %d, want the default", plan.sort.memory)
	}
	// Below the 1MiB a config may set: a few batches' worth per sort group.
	plan.sort.memory = 400 << 10
	opts := Options{ArrowBatchRows: 500}
	if _, err := Execute(ctx, f.cat, f.tbl, plan, cfg, opts); err != nil {
		t.Fatal(err)
	}
	order := wantOrder{{name: gen.ColUserID, desc: true}, {name: gen.ColEventID, nullsFirst: true}}
	files := checkCompacted(t, f, order, nil)
	if len(files) < 3 {
		t.Fatalf("%d files, want one per sort group, at least 3", len(files))
	}
}

func TestSortOrderColumnErrors(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 2, 50, 1)
	for _, tc := range []struct{ order, want string }{
		{"no_such_column DESC", `column "no_such_column" does not exist`},
		{"event_id, properties", `column "properties": sorting by type`},
	} {
		cfg := testConfig()
		cfg.Strategy, cfg.SortOrder = StrategySort, tc.order
		_, err := PlanTable(ctx, f.tbl, cfg, time.Now())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sort_order %q: plan error %v, want %q", tc.order, err, tc.want)
		}
	}
}

func TestSortOrderString(t *testing.T) {
	s := &sortSpec{keys: []sortKey{{name: "id", desc: true}, {name: "ts", nullsFirst: true}, {name: "x", nullsFirst: false}, {name: "y", desc: true, nullsFirst: true}}}
	if got, want := s.String(), "id DESC, ts, x NULLS LAST, y DESC NULLS FIRST"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

// Every primitive type Iceberg uses sorts both ways with nulls either
// side, across the batches of one sort group.
func TestSortStreamOrdersEveryType(t *testing.T) {
	mem := memory.DefaultAllocator
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "l", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "d", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "x", Type: &arrow.FixedSizeBinaryType{ByteWidth: 2}, Nullable: true},
		{Name: "dt", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "tm", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "bo", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	batch := func(seed int) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		for r := range 7 {
			v := (r*37 + seed*11) % 13
			for c := range sc.NumFields() {
				fb := b.Field(c)
				if (r+c+seed)%5 == 0 {
					fb.AppendNull()
					continue
				}
				w := (v + c) % 9
				switch fb := fb.(type) {
				case *array.Int32Builder:
					fb.Append(int32(w - 4))
				case *array.Int64Builder:
					fb.Append(int64(w) << 40)
				case *array.Float32Builder:
					fb.Append(float32(w) / 3)
				case *array.Float64Builder:
					fb.Append(-float64(w) / 7)
				case *array.StringBuilder:
					fb.Append(strings.Repeat("z", w%3) + string(rune('a'+w)))
				case *array.BinaryBuilder:
					fb.Append([]byte{byte(w), byte(9 - w)})
				case *array.FixedSizeBinaryBuilder:
					fb.Append([]byte{byte(w * 20), 1})
				case *array.Date32Builder:
					fb.Append(arrow.Date32(19000 + w))
				case *array.Time64Builder:
					fb.Append(arrow.Time64(w * 1000))
				case *array.TimestampBuilder:
					fb.Append(arrow.Timestamp(int64(w) * 1e6))
				case *array.Decimal128Builder:
					fb.Append(decimal128FromInt(int64(w*100 - 300)))
				case *array.BooleanBuilder:
					fb.Append(w%2 == 0)
				}
			}
		}
		return b.NewRecordBatch()
	}
	for c := range sc.NumFields() {
		for _, k := range []sortKey{{}, {desc: true}, {nullsFirst: true}, {desc: true, nullsFirst: true}} {
			k.name = sc.Field(c).Name
			spec := &sortSpec{keys: []sortKey{k, {name: "l"}}, memory: 1 << 30}
			st := spec.stream(4)
			in := func(yield func(arrow.RecordBatch, error) bool) {
				for i := range 3 {
					if !yield(batch(i), nil) {
						return
					}
				}
			}
			var out []arrow.RecordBatch
			for rec, err := range st.sorted(context.Background(), in) {
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, rec)
			}
			at := array.NewTableFromRecords(sc, out)
			if at.NumRows() != 21 || st.groups != 1 {
				t.Fatalf("%s: %d rows in %d sort groups, want 21 in 1", k.name, at.NumRows(), st.groups)
			}
			checkSorted(t, fmt.Sprintf("%+v", k), at, wantOrder{k})
			at.Release()
			for _, r := range out {
				r.Release()
			}
		}
	}
}

func decimal128FromInt(v int64) decimal128.Num { return decimal128.FromI64(v) }

// A v3 table's rows keep their lineage through the sort: every row's
// _row_id stays with its row.
func TestSortKeepsRowLineageOnV3(t *testing.T) {
	ctx := context.Background()
	opt := gen.Options{Appends: 6, RowsPerAppend: 300, Partitions: 1, Seed: 7, FormatVersion: 3}
	cat, tbl, dir := testenv.GeneratedTable(t, opt)
	f := &fixture{cat: cat, tbl: tbl, opt: opt, dir: dir}
	f.rows, f.sum = checksum(t, tbl)
	before := rowIDs(t, tbl)
	if int64(len(before)) != f.rows {
		t.Fatalf("%d distinct row ids over %d rows", len(before), f.rows)
	}
	cfg := testConfig()
	cfg.Strategy, cfg.SortOrder = StrategySort, "user_id DESC"
	plan, err := PlanTable(ctx, tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, cat, tbl, plan, cfg, Options{})
	if err != nil || res.FilesRewritten != 6 {
		t.Fatalf("result %+v, %v; want 6 files rewritten", res, err)
	}
	checkCompacted(t, f, wantOrder{{name: gen.ColUserID, desc: true}}, nil)
	after := rowIDs(t, f.reload(t))
	if len(after) != len(before) {
		t.Fatalf("%d row ids after, %d before", len(after), len(before))
	}
	for id, ev := range before {
		if after[id] != ev {
			t.Fatalf("row id %d: event %d after, %d before", id, after[id], ev)
		}
	}
}

// rowIDs maps each row's _row_id to its event_id.
func rowIDs(t *testing.T, tbl *table.Table) map[int64]int64 {
	t.Helper()
	at, err := tbl.Scan(table.WithRowLineage()).ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	ids, evs := at.Schema().FieldIndices(iceberg.RowIDColumnName), at.Schema().FieldIndices(gen.ColEventID)
	if len(ids) != 1 || len(evs) != 1 {
		t.Fatalf("no %s or %s column", iceberg.RowIDColumnName, gen.ColEventID)
	}
	out := map[int64]int64{}
	idc, evc := at.Column(ids[0]).Data().Chunks(), at.Column(evs[0]).Data().Chunks()
	for i := range idc {
		a, b := idc[i].(*array.Int64), evc[i].(*array.Int64)
		for r := range a.Len() {
			out[a.Value(r)] = b.Value(r)
		}
	}
	return out
}

package compact

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// compareTransformed is the order of rows a and b of c under k, a key with
// a transform: both cells are transformed one by one, as literals, through
// the transform's Apply (not the code under test, which transforms whole
// arrays), and the results compared.
func compareTransformed(t *testing.T, c arrow.Array, a, b int, k sortKey) int {
	t.Helper()
	x, y := transformedCell(t, c, a, k.transform), transformedCell(t, c, b, k.transform)
	switch {
	case x == nil && y == nil:
		return 0
	case x == nil || y == nil:
		if (x == nil) == k.nullsFirst {
			return -1
		}
		return 1
	}
	var v int
	switch xv := x.(type) {
	case int32:
		v = cmp3(xv, y.(int32))
	case int64:
		v = cmp3(xv, y.(int64))
	case iceberg.Date:
		v = cmp3(int32(xv), int32(y.(iceberg.Date)))
	case string:
		v = strings.Compare(xv, y.(string))
	case []byte:
		v = bytes.Compare(xv, y.([]byte))
	case iceberg.Decimal:
		v = xv.Val.Cmp(y.(iceberg.Decimal).Val)
	default:
		t.Fatalf("compareTransformed: %s gave a %T", k.transform, x)
	}
	if k.desc {
		v = -v
	}
	return v
}

// transformedCell is tr applied to row i of c as a literal; nil when the
// cell or the result is null.
func transformedCell(t *testing.T, c arrow.Array, i int, tr iceberg.Transform) any {
	t.Helper()
	if c.IsNull(i) {
		return nil
	}
	var lit iceberg.Literal
	switch arr := c.(type) {
	case *array.Int32:
		lit = iceberg.NewLiteral(arr.Value(i))
	case *array.Int64:
		lit = iceberg.NewLiteral(arr.Value(i))
	case *array.Date32:
		lit = iceberg.NewLiteral(iceberg.Date(arr.Value(i)))
	case *array.Timestamp:
		if arr.DataType().(*arrow.TimestampType).Unit != arrow.Microsecond {
			t.Fatalf("timestamp unit %s", arr.DataType())
		}
		lit = iceberg.NewLiteral(iceberg.Timestamp(arr.Value(i)))
	case *array.String:
		lit = iceberg.NewLiteral(arr.Value(i))
	case *array.LargeString:
		lit = iceberg.NewLiteral(arr.Value(i))
	case *array.Binary:
		lit = iceberg.NewLiteral(arr.Value(i))
	case *array.Decimal128:
		lit = iceberg.NewLiteral(iceberg.Decimal{Val: arr.Value(i), Scale: int(arr.DataType().(*arrow.Decimal128Type).Scale)})
	default:
		t.Fatalf("transformedCell: type %s", c.DataType())
	}
	out := tr.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: lit})
	if !out.Valid {
		return nil
	}
	return out.Val.Any()
}

// The literal check itself: bucket of a long is Iceberg's murmur3 bucket
// (the spec's example: 34 hashes to 2017239379), truncate and the time
// transforms as the spec says.
func TestTransformedCellFollowsTheSpec(t *testing.T) {
	mem := memory.DefaultAllocator
	ib := array.NewInt64Builder(mem)
	ib.AppendValues([]int64{34, -1, 7}, nil)
	ints := ib.NewArray()
	defer ints.Release()
	if got := transformedCell(t, ints, 0, iceberg.BucketTransform{NumBuckets: 1 << 30}); got != int32(2017239379%(1<<30)) {
		t.Fatalf("bucket of 34: %v", got)
	}
	if got := transformedCell(t, ints, 1, iceberg.TruncateTransform{Width: 10}); got != int64(-10) {
		t.Fatalf("truncate[10] of -1: %v", got)
	}
	tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})
	tb.Append(arrow.Timestamp(time.Date(2017, 12, 1, 10, 0, 0, 0, time.UTC).UnixMicro()))
	ts := tb.NewArray()
	defer ts.Release()
	if got := transformedCell(t, ts, 0, iceberg.MonthTransform{}); got != int32(47*12+11) {
		t.Fatalf("month of 2017-12-01: %v", got)
	}
	if got := transformedCell(t, ts, 0, iceberg.VoidTransform{}); got != nil {
		t.Fatalf("void: %v", got)
	}
}

// sortField is a table sort order field over column id.
func sortField(id int, tr iceberg.Transform, desc, nullsFirst bool) table.SortField {
	f := table.SortField{SourceIDs: []int{id}, Transform: tr, Direction: table.SortASC, NullOrder: table.NullsLast}
	if desc {
		f.Direction = table.SortDESC
	}
	if nullsFirst {
		f.NullOrder = table.NullsFirst
	}
	return f
}

// Every transform Iceberg knows, as a table's sort order and as a
// sort_order: each output file, read back, is in the order of the
// transformed values, checked row by row against the transform applied
// literal by literal; rows and checksum are unchanged; each file records
// the table's sort order.
func TestSortByTransformsCompactsIntoSortedFiles(t *testing.T) {
	// Columns of the generated table, resolved to their ids in the test.
	const eventID, eventTime, userID, sessionID, country, amount, ingestDate, url = gen.ColEventID, gen.ColEventTime,
		gen.ColUserID, gen.ColSessionID, gen.ColCountry, gen.ColAmount, gen.ColIngestDate, gen.ColURL
	type field struct {
		col              string
		tr               iceberg.Transform
		desc, nullsFirst bool
	}
	sf := func(col string, tr iceberg.Transform, desc, nullsFirst bool) field {
		return field{col, tr, desc, nullsFirst}
	}
	for _, tc := range []struct {
		name   string
		fields []field // the table's order; else order
		order  string
		want   wantOrder
	}{
		{name: "bucket long", fields: []field{sf(userID, iceberg.BucketTransform{NumBuckets: 4}, false, true), sf(eventID, iceberg.IdentityTransform{}, false, true)},
			want: wantOrder{{name: gen.ColUserID, transform: iceberg.BucketTransform{NumBuckets: 4}, nullsFirst: true}, {name: gen.ColEventID, nullsFirst: true}}},
		{name: "bucket string desc", fields: []field{sf(sessionID, iceberg.BucketTransform{NumBuckets: 7}, true, false)},
			want: wantOrder{{name: gen.ColSessionID, transform: iceberg.BucketTransform{NumBuckets: 7}, desc: true}}},
		{name: "bucket decimal nulls first", fields: []field{sf(amount, iceberg.BucketTransform{NumBuckets: 5}, false, true), sf(eventID, iceberg.IdentityTransform{}, true, false)},
			want: wantOrder{{name: gen.ColAmount, transform: iceberg.BucketTransform{NumBuckets: 5}, nullsFirst: true}, {name: gen.ColEventID, desc: true}}},
		{name: "truncate string nulls last", fields: []field{sf(country, iceberg.TruncateTransform{Width: 1}, false, false), sf(eventTime, iceberg.IdentityTransform{}, true, false)},
			want: wantOrder{{name: gen.ColCountry, transform: iceberg.TruncateTransform{Width: 1}}, {name: gen.ColEventTime, desc: true}}},
		{name: "truncate long desc", fields: []field{sf(eventID, iceberg.TruncateTransform{Width: 100}, true, false), sf(userID, iceberg.IdentityTransform{}, false, true)},
			want: wantOrder{{name: gen.ColEventID, transform: iceberg.TruncateTransform{Width: 100}, desc: true}, {name: gen.ColUserID, nullsFirst: true}}},
		{name: "truncate decimal", fields: []field{sf(amount, iceberg.TruncateTransform{Width: 5000}, true, true), sf(eventID, iceberg.IdentityTransform{}, false, true)},
			want: wantOrder{{name: gen.ColAmount, transform: iceberg.TruncateTransform{Width: 5000}, desc: true, nullsFirst: true}, {name: gen.ColEventID, nullsFirst: true}}},
		{name: "year date", fields: []field{sf(ingestDate, iceberg.YearTransform{}, true, false), sf(eventID, iceberg.IdentityTransform{}, false, true)},
			want: wantOrder{{name: gen.ColIngestDate, transform: iceberg.YearTransform{}, desc: true}, {name: gen.ColEventID, nullsFirst: true}}},
		{name: "month timestamp", fields: []field{sf(eventTime, iceberg.MonthTransform{}, false, true), sf(userID, iceberg.IdentityTransform{}, true, false)},
			want: wantOrder{{name: gen.ColEventTime, transform: iceberg.MonthTransform{}, nullsFirst: true}, {name: gen.ColUserID, desc: true}}},
		{name: "day timestamp desc", fields: []field{sf(eventTime, iceberg.DayTransform{}, true, false), sf(userID, iceberg.IdentityTransform{}, false, true)},
			want: wantOrder{{name: gen.ColEventTime, transform: iceberg.DayTransform{}, desc: true}, {name: gen.ColUserID, nullsFirst: true}}},
		{name: "hour timestamp", fields: []field{sf(eventTime, iceberg.HourTransform{}, false, true), sf(userID, iceberg.IdentityTransform{}, true, false)},
			want: wantOrder{{name: gen.ColEventTime, transform: iceberg.HourTransform{}, nullsFirst: true}, {name: gen.ColUserID, desc: true}}},
		{name: "void then id", fields: []field{sf(url, iceberg.VoidTransform{}, false, true), sf(userID, iceberg.IdentityTransform{}, false, true)},
			want: wantOrder{{name: gen.ColUserID, nullsFirst: true}}},
		{name: "sort_order bucket then ts desc", order: "bucket(4, user_id), event_time DESC",
			want: wantOrder{{name: gen.ColUserID, transform: iceberg.BucketTransform{NumBuckets: 4}, nullsFirst: true}, {name: gen.ColEventTime, desc: true}}},
		{name: "sort_order truncate days hours", order: "truncate(2, country) DESC NULLS FIRST, days(event_time), hours(event_time) DESC, event_id",
			want: wantOrder{{name: gen.ColCountry, transform: iceberg.TruncateTransform{Width: 2}, desc: true, nullsFirst: true},
				{name: gen.ColEventTime, transform: iceberg.DayTransform{}, nullsFirst: true}, {name: gen.ColEventTime, transform: iceberg.HourTransform{}, desc: true},
				{name: gen.ColEventID, nullsFirst: true}}},
		{name: "sort_order years months", order: "years(ingest_date) NULLS LAST, months(event_time) DESC, bucket(3, amount), user_id",
			want: wantOrder{{name: gen.ColIngestDate, transform: iceberg.YearTransform{}}, {name: gen.ColEventTime, transform: iceberg.MonthTransform{}, desc: true},
				{name: gen.ColAmount, transform: iceberg.BucketTransform{NumBuckets: 3}, nullsFirst: true}, {name: gen.ColUserID, nullsFirst: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newTable(t, 6, 300, 1)
			cfg := testConfig()
			var orderID *int
			if tc.fields != nil {
				var fields []table.SortField
				for _, fl := range tc.fields {
					col, ok := f.tbl.Schema().FindFieldByName(fl.col)
					if !ok {
						t.Fatalf("no column %s", fl.col)
					}
					fields = append(fields, sortField(col.ID, fl.tr, fl.desc, fl.nullsFirst))
				}
				id := setSortOrder(t, f, fields...)
				orderID = &id
			} else {
				cfg.Strategy, cfg.SortOrder = StrategySort, tc.order
			}
			plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if plan.sort == nil || len(plan.Groups) != 1 {
				t.Fatalf("plan: sort %v, %d groups; want a sort of one group", plan.sort, len(plan.Groups))
			}
			// Batches of 128 rows: a file holds many, and the order must hold
			// across them.
			res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{ArrowBatchRows: 128})
			if err != nil {
				t.Fatal(err)
			}
			if res.RowsWritten != f.rows {
				t.Fatalf("wrote %d rows of %d", res.RowsWritten, f.rows)
			}
			files := checkCompacted(t, f, tc.want, orderID)
			if len(files) != 1 {
				t.Fatalf("%d files, want 1", len(files))
			}
		})
	}
}

// The order is the transformed value's, not the column's: a file sorted by
// bucket(4, user_id) is not sorted by user_id (else the test above could
// pass with the wrong key).
func TestSortByBucketIsNotByColumn(t *testing.T) {
	f := newTable(t, 4, 300, 1)
	cfg := testConfig()
	cfg.Strategy, cfg.SortOrder = StrategySort, "bucket(4, user_id), event_id"
	cfg.MinInputFiles = 2
	compactWith(t, f, cfg)
	files := checkCompacted(t, f, wantOrder{{name: gen.ColUserID, transform: iceberg.BucketTransform{NumBuckets: 4}, nullsFirst: true}, {name: gen.ColEventID, nullsFirst: true}}, nil)
	at := readFile(t, f.reload(t), files[0].FilePath())
	defer at.Release()
	col, err := array.Concatenate(at.Column(at.Schema().FieldIndices(gen.ColUserID)[0]).Data().Chunks(), memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Release()
	ids := col.(*array.Int64)
	for r := 1; r < ids.Len(); r++ {
		if ids.Value(r) < ids.Value(r-1) {
			return
		}
	}
	t.Fatal("the file is sorted by user_id itself")
}

func TestSortTransformErrors(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 2, 50, 1)
	for _, tc := range []struct{ order, want string }{
		{"truncate(event_time, 4)", `column "event_time": transform truncate[4] does not apply to type timestamptz`},
		{"hours(ingest_date)", `column "ingest_date": transform hour does not apply to type date`},
		{"days(no_such)", `column "no_such" does not exist`},
		{"bucket(4, properties)", "does not apply to type map"},
	} {
		cfg := testConfig()
		cfg.Strategy, cfg.SortOrder = StrategySort, tc.order
		_, err := PlanTable(ctx, f.tbl, cfg, time.Now())
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "sort_order") {
			t.Errorf("sort_order %q: plan error %v, want %q", tc.order, err, tc.want)
		}
	}
}

// The plan shows a table's transform order in Spark's syntax.
func TestSortTransformOrderString(t *testing.T) {
	s := &sortSpec{keys: []sortKey{
		{name: "id", transform: iceberg.BucketTransform{NumBuckets: 16}},
		{name: "name", transform: iceberg.TruncateTransform{Width: 4}, desc: true},
		{name: "ts", transform: iceberg.YearTransform{}, nullsFirst: true},
		{name: "ts", transform: iceberg.MonthTransform{}, nullsFirst: true},
		{name: "ts", transform: iceberg.DayTransform{}, nullsFirst: true},
		{name: "ts", transform: iceberg.HourTransform{}, nullsFirst: true},
		{name: "x", transform: iceberg.VoidTransform{}, nullsFirst: true},
	}}
	want := "bucket(16, id) NULLS LAST, truncate(name, 4) DESC, years(ts), months(ts), days(ts), hours(ts), void(x)"
	if got := s.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	back, err := ParseSortOrder(strings.TrimSuffix(want, ", void(x)"))
	if err != nil || len(back) != len(s.keys)-1 {
		t.Fatalf("the plan's order does not parse back: %+v, %v", back, err)
	}
	for i, c := range back {
		k := s.keys[i]
		if c.Name != k.name || c.Transform != k.transform || c.Desc != k.desc || c.NullsFirst != k.nullsFirst {
			t.Errorf("term %d parses back as %+v, want %+v", i+1, c, k)
		}
	}
}

// fixtureOrder is a sort order over a fixture's schema, as fields of a
// table order and as the same terms in Spark's syntax: a bucket of its first
// int or long, a truncate of its first string and decimal, a time transform
// of its first date or timestamp, then the first int or long itself; desc
// flips every direction.
func fixtureOrder(sc *iceberg.Schema, desc bool) ([]table.SortField, string, wantOrder) {
	var fields []table.SortField
	var terms []string
	var want wantOrder
	add := func(f iceberg.NestedField, tr iceberg.Transform, term string, d, nullsFirst bool) {
		d = d != desc
		fields = append(fields, sortField(f.ID, tr, d, nullsFirst))
		k := sortKey{name: f.Name, desc: d, nullsFirst: nullsFirst}
		if _, ident := tr.(iceberg.IdentityTransform); !ident {
			k.transform = tr
		}
		want = append(want, k)
		if d {
			term += " DESC"
		} else {
			term += " ASC"
		}
		if nullsFirst {
			term += " NULLS FIRST"
		} else {
			term += " NULLS LAST"
		}
		terms = append(terms, term)
	}
	var firstInt *iceberg.NestedField
	seen := map[string]bool{}
	for _, f := range sc.Fields() {
		q := "`" + f.Name + "`"
		switch f.Type.(type) {
		case iceberg.Int32Type, iceberg.Int64Type:
			if firstInt == nil {
				firstInt = &f
				add(f, iceberg.BucketTransform{NumBuckets: 3}, "bucket(3, "+q+")", false, true)
			}
		case iceberg.StringType:
			if !seen["string"] {
				seen["string"] = true
				add(f, iceberg.TruncateTransform{Width: 1}, "truncate("+q+", 1)", true, true)
			}
		case iceberg.DecimalType:
			if !seen["decimal"] {
				seen["decimal"] = true
				add(f, iceberg.TruncateTransform{Width: 1000}, "truncate(1000, "+q+")", false, false)
			}
		case iceberg.DateType:
			if !seen["time"] {
				seen["time"] = true
				add(f, iceberg.MonthTransform{}, "months("+q+")", true, false)
			}
		case iceberg.TimestampType, iceberg.TimestampTzType:
			if !seen["time"] {
				seen["time"] = true
				add(f, iceberg.HourTransform{}, "hours("+q+")", false, true)
			}
		}
	}
	if firstInt != nil {
		add(*firstInt, iceberg.IdentityTransform{}, "`"+firstInt.Name+"`", false, false)
	}
	return fields, strings.Join(terms, ", "), want
}

// Sort compaction on the tables Spark, Flink, Hive, Impala and PyIceberg
// wrote (equality deletes, position deletes, deletion vectors, partition
// and schema evolution): with strategy sort and a sort_order of transforms,
// and with a table sort order of transforms set on the copy, every data
// file is rewritten and read back sorted, the rows and checksum equal
// expected.json, and every snapshot still reads.
func TestSortFixtures(t *testing.T) {
	for _, tableOrder := range []bool{false, true} {
		t.Run(map[bool]string{false: "sort_order", true: "table_order"}[tableOrder], func(t *testing.T) {
			testenv.EachFixture(t, func(t *testing.T, name string, want testenv.FixtureExpect) {
				ctx := context.Background()
				cat, tbl, dir := testenv.FixtureTable(t, name)
				before := testenv.Verify(t, dir)
				fields, terms, order := fixtureOrder(tbl.Schema(), tableOrder)
				cfg := DefaultConfig()
				cfg.TargetFileSize = 64 << 20
				cfg.RewriteAll, cfg.DeleteFileThreshold = true, 1
				var orderID *int
				if tableOrder {
					f := &fixture{cat: cat, tbl: tbl}
					id := setSortOrder(t, f, fields...)
					tbl, orderID = f.tbl, &id
				} else {
					cfg.Strategy, cfg.SortOrder = StrategySort, terms
				}
				plan, err := PlanTable(ctx, tbl, cfg, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				if plan.sort == nil {
					t.Fatalf("no sort planned for %q", terms)
				}
				res, err := Execute(ctx, cat, tbl, plan, cfg, guarded(t, Options{ArrowBatchRows: 64}))
				if err != nil {
					t.Fatalf("sort compaction by %s: %v", plan.SortOrder(), err)
				}
				if res.FilesRewritten != before.DataFiles {
					t.Errorf("%d of %d data files rewritten", res.FilesRewritten, before.DataFiles)
				}
				after := testenv.Verify(t, dir)
				if after.LiveRows != want.LiveRows || after.Checksum != want.Checksum {
					t.Fatalf("after sort compaction by %s: %d rows checksum %s; expected %d rows checksum %s",
						plan.SortOrder(), after.LiveRows, after.Checksum, want.LiveRows, want.Checksum)
				}
				testenv.ExpectSnapshotsRead(t, dir, want, after.SnapshotID)
				reloaded, err := cat.LoadTable(ctx, tbl.Identifier())
				if err != nil {
					t.Fatal(err)
				}
				files := liveDataFiles(t, reloaded)
				for _, df := range files {
					at := readFile(t, reloaded, df.FilePath())
					checkSorted(t, df.FilePath(), at, order)
					at.Release()
					if got := df.SortOrderID(); orderID != nil && (got == nil || *got != *orderID) {
						t.Errorf("%s: sort_order_id %v, want %d", df.FilePath(), got, *orderID)
					}
				}
				t.Logf("sorted by %s: %d files -> %d files, %d live", plan.SortOrder(), res.FilesRewritten, res.FilesWritten, len(files))
			})
		})
	}
}

// A table order by a transform iceberg-go does not know is left to
// iceberg-go's writer under binpack, and fails a sort naming the column.
func TestSortUnknownTransformTableOrder(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 50, 1)
	unknown, err := iceberg.ParseTransform("zorder")
	if err != nil {
		t.Fatal(err)
	}
	col, _ := f.tbl.Schema().FindFieldByName(gen.ColUserID)
	setSortOrder(t, f, sortField(col.ID, unknown, false, true))
	plan, err := PlanTable(ctx, f.tbl, testConfig(), time.Now())
	if err != nil || plan.sort != nil {
		t.Fatalf("binpack plan: sort %v, %v; want none", plan, err)
	}
	cfg := testConfig()
	cfg.Strategy, cfg.SortOrder = StrategySort, "event_id"
	_, err = PlanTable(ctx, f.tbl, cfg, time.Now())
	if err == nil || !strings.Contains(err.Error(), `column "user_id": transform zorder is not supported`) {
		t.Fatalf("sort plan error %v, want one naming user_id's transform", err)
	}
}

// Each source type a transform takes, through the array path the sort uses,
// gives what the transform's Apply gives for the same value as a literal;
// nulls stay null.
func TestTransformKeysMatchApplyForEveryType(t *testing.T) {
	mem := memory.DefaultAllocator
	ts := time.Date(2024, 2, 29, 23, 59, 1, 0, time.UTC)
	uid := []byte("0123456789abcdef")
	for _, tc := range []struct {
		typ  iceberg.Type
		arr  func(array.Builder) // appends one value, then a null
		lit  iceberg.Literal     // the same value
		trs  []iceberg.Transform
		name string
	}{
		{name: "int", typ: iceberg.PrimitiveTypes.Int32, arr: func(b array.Builder) { b.(*array.Int32Builder).Append(-17) }, lit: iceberg.NewLiteral(int32(-17)),
			trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}, iceberg.TruncateTransform{Width: 5}}},
		{name: "long", typ: iceberg.PrimitiveTypes.Int64, arr: func(b array.Builder) { b.(*array.Int64Builder).Append(1 << 40) }, lit: iceberg.NewLiteral(int64(1 << 40)),
			trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}, iceberg.TruncateTransform{Width: 7}}},
		{name: "date", typ: iceberg.PrimitiveTypes.Date, arr: func(b array.Builder) { b.(*array.Date32Builder).Append(-400) }, lit: iceberg.NewLiteral(iceberg.Date(-400)),
			trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}, iceberg.YearTransform{}, iceberg.MonthTransform{}, iceberg.DayTransform{}}},
		{name: "time", typ: iceberg.PrimitiveTypes.Time, arr: func(b array.Builder) { b.(*array.Time64Builder).Append(arrow.Time64(3723000001)) }, lit: iceberg.NewLiteral(iceberg.Time(3723000001)),
			trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}}},
		{name: "timestamp", typ: iceberg.PrimitiveTypes.Timestamp, arr: func(b array.Builder) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro())) },
			lit: iceberg.NewLiteral(iceberg.Timestamp(ts.UnixMicro())),
			trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}, iceberg.YearTransform{}, iceberg.MonthTransform{}, iceberg.DayTransform{}, iceberg.HourTransform{}}},
		{name: "timestamp_ns", typ: iceberg.PrimitiveTypes.TimestampTzNs, arr: func(b array.Builder) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(-ts.UnixNano())) },
			lit: iceberg.NewLiteral(iceberg.TimestampNano(-ts.UnixNano())),
			trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}, iceberg.YearTransform{}, iceberg.MonthTransform{}, iceberg.DayTransform{}, iceberg.HourTransform{}}},
		{name: "decimal", typ: iceberg.DecimalTypeOf(9, 2), arr: func(b array.Builder) { b.(*array.Decimal128Builder).Append(decimal128FromInt(-12345)) },
			lit: iceberg.NewLiteral(iceberg.Decimal{Val: decimal128FromInt(-12345), Scale: 2}),
			trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}, iceberg.TruncateTransform{Width: 100}}},
		{name: "string", typ: iceberg.PrimitiveTypes.String, arr: func(b array.Builder) { b.(*array.LargeStringBuilder).Append("żółw-turtle") },
			lit: iceberg.NewLiteral("żółw-turtle"), trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}, iceberg.TruncateTransform{Width: 3}}},
		{name: "binary", typ: iceberg.PrimitiveTypes.Binary, arr: func(b array.Builder) { b.(*array.BinaryBuilder).Append([]byte{1, 2, 3, 4}) },
			lit: iceberg.NewLiteral([]byte{1, 2, 3, 4}), trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}, iceberg.TruncateTransform{Width: 2}}},
		{name: "fixed", typ: iceberg.FixedTypeOf(16), arr: func(b array.Builder) { b.(*array.FixedSizeBinaryBuilder).Append(uid) },
			lit: iceberg.NewLiteral(uid), trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}}},
		{name: "uuid", typ: iceberg.PrimitiveTypes.UUID, arr: func(b array.Builder) { b.(*extensions.UUIDBuilder).Append(uuid.UUID(uid)) },
			lit: iceberg.NewLiteral(uuid.UUID(uid)), trs: []iceberg.Transform{iceberg.BucketTransform{NumBuckets: 9}}},
	} {
		atyp, err := table.TypeToArrowType(tc.typ, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if tc.name == "string" {
			atyp = arrow.BinaryTypes.LargeString
		}
		b := array.NewBuilder(mem, atyp)
		tc.arr(b)
		b.AppendNull()
		arr := b.NewArray()
		b.Release()
		data := arrow.NewChunked(atyp, []arrow.Array{arr})
		for _, tr := range tc.trs {
			keys, err := transformChunks(sortKey{name: tc.name, transform: tr, typ: tc.typ}, data, mem)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.name, tr, err)
			}
			got := keys.Chunk(0)
			want := tr.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: tc.lit})
			if !want.Valid || got.IsNull(0) || !got.IsNull(1) {
				t.Fatalf("%s %s: %v from Apply, nulls %v %v", tc.name, tr, want, got.IsNull(0), got.IsNull(1))
			}
			var v any
			switch a := got.(type) {
			case *array.Int32:
				v = a.Value(0)
			case *array.Int64:
				v = a.Value(0)
			case *array.String:
				v = a.Value(0)
			case *array.Binary:
				v = string(a.Value(0))
			case *array.Decimal128:
				v = a.Value(0)
			}
			w := want.Val.Any()
			switch x := w.(type) {
			case iceberg.Date:
				w = int32(x)
			case []byte:
				w = string(x)
			case iceberg.Decimal:
				w = x.Val
			}
			if v != w {
				t.Errorf("%s %s: key %v (%T), Apply %v (%T)", tc.name, tr, v, v, w, w)
			}
			keys.Release()
		}
		data.Release()
		arr.Release()
	}
}

// The cost of the transformed keys of a sort group of a million rows, per
// transform (go test -run '^$' -bench SortTransformKeys ./maintenance/compact/).
func BenchmarkSortTransformKeys(b *testing.B) {
	mem := memory.DefaultAllocator
	const rows = 1 << 20
	lb, sb := array.NewInt64Builder(mem), array.NewStringBuilder(mem)
	tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})
	for i := range int64(rows) {
		lb.Append(i * 7919)
		sb.Append(fmt.Sprintf("user-%d", i%5000))
		tb.Append(arrow.Timestamp(i * 1e6))
	}
	cols := map[string]arrow.Array{"long": lb.NewArray(), "string": sb.NewArray(), "timestamp": tb.NewArray()}
	types := map[string]iceberg.Type{"long": iceberg.PrimitiveTypes.Int64, "string": iceberg.PrimitiveTypes.String, "timestamp": iceberg.PrimitiveTypes.TimestampTz}
	for _, tc := range []struct {
		col string
		tr  iceberg.Transform
	}{
		{"long", iceberg.BucketTransform{NumBuckets: 16}},
		{"string", iceberg.BucketTransform{NumBuckets: 16}},
		{"string", iceberg.TruncateTransform{Width: 4}},
		{"timestamp", iceberg.DayTransform{}},
	} {
		data := arrow.NewChunked(cols[tc.col].DataType(), []arrow.Array{cols[tc.col]})
		b.Run(tc.tr.String()+"/"+tc.col, func(b *testing.B) {
			for b.Loop() {
				keys, err := transformChunks(sortKey{name: tc.col, transform: tc.tr, typ: types[tc.col]}, data, mem)
				if err != nil {
					b.Fatal(err)
				}
				keys.Release()
			}
		})
		data.Release()
	}
}

// The transformed keys a sort group builds count against sort_memory: a
// truncate of a wide string column copies it, so a budget of 2.5 batches
// of rows holds one batch with its keys, not two (which with their keys
// would be twice the budget).
func TestSortMemoryCountsTransformedKeys(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	batch := func(i int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer b.Release()
		for r := range 50 {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%03d", (r*7+i)%50) + strings.Repeat("x", 2000))
		}
		return b.NewRecordBatch()
	}
	probe := batch(0)
	perBatch := recordBytes(probe)
	probe.Release()
	spec := &sortSpec{keys: []sortKey{{name: "s", transform: iceberg.TruncateTransform{Width: 3000}, typ: iceberg.PrimitiveTypes.String}},
		memory: perBatch * 5 / 2}
	st := spec.stream(16)
	in := func(yield func(arrow.RecordBatch, error) bool) {
		for i := range 4 {
			if !yield(batch(i), nil) {
				return
			}
		}
	}
	rows := 0
	for rec, err := range st.sorted(context.Background(), in) {
		if err != nil {
			t.Fatal(err)
		}
		rows += int(rec.NumRows())
		rec.Release()
	}
	if rows != 200 || st.groups != 4 {
		t.Fatalf("%d rows in %d sort groups, want 200 in 4 (one batch with its keys each)", rows, st.groups)
	}
}

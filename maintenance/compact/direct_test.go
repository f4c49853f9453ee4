package compact

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/offheap"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// compareModes checks that each mode's files are what iceberg-go (the last
// mode) writes, partition by partition; files is how many each partition
// must have (0: more than one; -1: as many as iceberg-go writes).
func compareModes(t *testing.T, out []map[string][]iceberg.DataFile, files int) {
	t.Helper()
	scan := out[len(out)-1]
	for m, got := range out[:len(out)-1] {
		name := writeModes[m].path
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(scan))) {
			t.Fatalf("partitions %v %s, %v through iceberg-go", slices.Sorted(maps.Keys(got)), name, slices.Sorted(maps.Keys(scan)))
		}
		for part, dfs := range got {
			other := scan[part]
			if len(dfs) != len(other) || (files > 0 && len(dfs) != files) || (files == 0 && len(dfs) < 2) {
				t.Fatalf("partition %s: %d files %s, %d through iceberg-go, want %d (0: several)", part, len(dfs), name, len(other), files)
			}
			for j := range dfs {
				compareDataFiles(t, name, dfs[j], other[j])
			}
		}
	}
}

// guarded gives opts a writer allocator as the binary's, in guard mode: a
// buffer an arrow-go writer uses after freeing it faults (the test binary
// crashes), and one never freed by the end of the test fails it.
func guarded(t *testing.T, opts Options) Options {
	t.Helper()
	if opts.Allocator != nil {
		return opts
	}
	// Buffers from 16 KiB are mapped (the binary maps from 256 KiB), so
	// that the small tables of the tests exercise mapped writer buffers.
	a := offheap.New(offheap.Guard(), offheap.MinSize(16<<10))
	t.Cleanup(func() {
		if m := a.Mapped(); m != 0 {
			t.Errorf("%d bytes of writer buffers never freed", m)
		}
	})
	opts.Allocator = a.ScopeFunc
	return opts
}

// update commits one change to the fixture's table.
func update(t testing.TB, f *fixture, change func(*table.Transaction) error) {
	t.Helper()
	tx := f.tbl.NewTransaction()
	if err := change(tx); err != nil {
		t.Fatal(err)
	}
	tbl, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.tbl = tbl
}

// deleteEventIDs commits an equality delete of the given event ids.
func deleteEventIDs(t testing.TB, f *fixture, ids ...int64) {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(iceberg.NewSchema(0, f.tbl.Schema().Field(0)), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(ids, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{b.NewArray()}, int64(len(ids)))
	update(t, f, func(tx *table.Transaction) error {
		return tx.CommitEqualityDeletes(context.Background(), []int{f.tbl.Schema().Field(0).ID},
			func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }, nil)
	})
}

// setProps commits table properties.
func setProps(t testing.TB, f *fixture, props map[string]string) {
	t.Helper()
	if len(props) > 0 {
		update(t, f, func(tx *table.Transaction) error { return tx.SetProperties(props) })
	}
}

// compactAll plans and runs a compaction through paths and checks the rows
// are unchanged.
func compactAll(t *testing.T, f *fixture, cfg Config, paths []rewritePath) *Result {
	t.Helper()
	ctx := context.Background()
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Empty() {
		t.Fatal("nothing planned")
	}
	res, err := execute(ctx, f.cat, f.tbl, plan, cfg, guarded(t, Options{}), paths)
	if err != nil {
		t.Fatal(err)
	}
	if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
	}
	return res
}

// The direct path must write what iceberg-go's writer writes for the same
// group: the same rows, files in the same place, with the same partition,
// column statistics, row groups, codecs and encodings, under each table
// setting it handles.
func TestDirectPathWritesWhatIcebergGoWrites(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		files int // output files per partition; 0: more than one
		parts int
	}{
		{name: "defaults", files: 1},
		{name: "snappy, page v1, no dictionary for two columns", files: 1, props: map[string]string{
			table.ParquetCompressionKey:     "snappy",
			table.ParquetPageVersionKey:     "1",
			propDictColumnPrefix + "url":    "false",
			propDictColumnPrefix + "device": "false",
		}},
		{name: "gzip level 1, no dictionaries, small pages", files: 1, props: map[string]string{
			table.ParquetCompressionKey:      "gzip",
			table.ParquetCompressionLevelKey: "1",
			propDictEnabled:                  "false",
			table.ParquetPageSizeBytesKey:    "8192",
			table.ParquetPageRowLimitKey:     "500",
		}},
		{name: "rolls over at the target with small row groups", parts: 1, props: map[string]string{
			table.ParquetRowGroupSizeBytesKey:          "150000",
			table.ParquetRowGroupLimitKey:              "1000",
			"write.metadata.metrics.column.event_type": "counts",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			parts := 2
			if tc.files == 0 {
				cfg.TargetFileSize = MinTargetFileSize
				parts = tc.parts
			}
			var out []map[string][]iceberg.DataFile
			for _, mode := range writeModes {
				f := newTable(t, 24, 1500, parts)
				setProps(t, f, tc.props)
				before := verifyTable(t, f.tbl)
				var log pathLog
				compactAll(t, f, cfg, log.watch(mode.paths))
				// The independent reader reads the same rows from the new files.
				if after := verifyTable(t, f.reload(t)); after.LiveRows != before.LiveRows || after.Checksum != before.Checksum {
					t.Fatalf("%s: verifier: %d rows %s after, %d rows %s before", mode.path, after.LiveRows, after.Checksum, before.LiveRows, before.Checksum)
				}
				if got := log.all(); len(got) < parts || slices.ContainsFunc(got, func(p string) bool { return p != mode.path }) {
					t.Fatalf("paths %v (why %v), want %s for all %d groups", got, log.whys, mode.path, parts)
				}
				out = append(out, filesByPartition(t, f))
			}
			compareModes(t, out, tc.files)
		})
	}
}

// verifyTable reads a table's current snapshot with the independent verifier.
func verifyTable(t *testing.T, tbl *table.Table) testenv.VerifyResult {
	t.Helper()
	return testenv.Verify(t, strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
}

// filesByPartition lists the live data files per partition.
func filesByPartition(t *testing.T, f *fixture) map[string][]iceberg.DataFile {
	t.Helper()
	out := map[string][]iceberg.DataFile{}
	tbl := f.reload(t)
	for _, df := range liveDataFiles(t, tbl) {
		key := partitionName(tbl.Metadata(), df.SpecID(), df.Partition())
		out[key] = append(out[key], df)
	}
	for _, dfs := range out {
		// In row order: by the smallest event id (field 1).
		sort.Slice(dfs, func(i, j int) bool {
			return string(dfs[i].LowerBoundValues()[1]) < string(dfs[j].LowerBoundValues()[1])
		})
	}
	return out
}

func compareDataFiles(t *testing.T, name string, a, b iceberg.DataFile) {
	t.Helper()
	t.Logf("comparing %s's %s with iceberg-go's %s", name, path.Base(a.FilePath()), path.Base(b.FilePath()))
	// Same folder relative to the table: data/<partition path>.
	rel := func(p string) string {
		dir := path.Dir(p)
		return dir[strings.Index(dir, "/data"):]
	}
	if rel(a.FilePath()) != rel(b.FilePath()) {
		t.Errorf("%s: written under %s, iceberg-go writes under %s", name, rel(a.FilePath()), rel(b.FilePath()))
	}
	if a.Count() != b.Count() || a.SpecID() != b.SpecID() || !maps.Equal(a.Partition(), b.Partition()) {
		t.Errorf("%s: %d rows spec %d partition %v; iceberg-go: %d rows spec %d partition %v", name,
			a.Count(), a.SpecID(), a.Partition(), b.Count(), b.SpecID(), b.Partition())
	}
	if a.SortOrderID() != nil || b.SortOrderID() != nil {
		t.Errorf("%s: sort order ids %v %v, want none", name, a.SortOrderID(), b.SortOrderID())
	}
	for what, pair := range map[string][2]map[int]int64{
		"value counts":      {a.ValueCounts(), b.ValueCounts()},
		"null value counts": {a.NullValueCounts(), b.NullValueCounts()},
		"NaN value counts":  {a.NaNValueCounts(), b.NaNValueCounts()},
	} {
		if !maps.Equal(pair[0], pair[1]) {
			t.Errorf("%s: %s %v, iceberg-go %v", name, what, pair[0], pair[1])
		}
	}
	for what, pair := range map[string][2]map[int][]byte{
		"lower bounds": {a.LowerBoundValues(), b.LowerBoundValues()},
		"upper bounds": {a.UpperBoundValues(), b.UpperBoundValues()},
	} {
		if !maps.EqualFunc(pair[0], pair[1], func(x, y []byte) bool { return string(x) == string(y) }) {
			t.Errorf("%s: %s %v, iceberg-go %v", name, what, pair[0], pair[1])
		}
	}
	if !slices.Equal(a.SplitOffsets(), b.SplitOffsets()) {
		t.Errorf("%s: split offsets %v, iceberg-go %v", name, a.SplitOffsets(), b.SplitOffsets())
	}
	la, lb := parquetLayout(t, a.FilePath()), parquetLayout(t, b.FilePath())
	if !slices.Equal(la, lb) {
		t.Errorf("%s: parquet layout\n%v\niceberg-go writes\n%v", name, la, lb)
	}
}

// parquetLayout describes a file's footer metadata (key-value pairs and
// writer), row groups and column chunks: rows, codec, encodings, and
// whether the chunk has a dictionary page and a bloom filter.
func parquetLayout(t *testing.T, p string) []string {
	t.Helper()
	r, err := file.OpenParquetFile(strings.TrimPrefix(p, "file://"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := []string{"created by " + r.MetaData().GetCreatedBy()}
	kv := r.MetaData().KeyValueMetadata()
	for i, k := range kv.Keys() {
		out = append(out, k+"="+kv.Values()[i])
	}
	for i := range r.NumRowGroups() {
		rg := r.MetaData().RowGroup(i)
		out = append(out, fmt.Sprintf("row group rows=%d", rg.NumRows()))
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			var encs []string
			for _, e := range cc.Encodings() {
				encs = append(encs, e.String())
			}
			slices.Sort(encs)
			out = append(out, fmt.Sprintf("%s %s %s dict=%t bloom=%t", cc.PathInSchema(), cc.Compression(),
				strings.Join(encs, "+"), cc.HasDictionaryPage(), cc.BloomFilterOffset() > 0))
		}
	}
	return out
}

// Groups the direct path cannot write as iceberg-go would go through
// iceberg-go, which says why, and every row survives.
func TestDirectPathLeavesOtherGroupsToIcebergGo(t *testing.T) {
	cases := []struct {
		name    string
		opt     gen.Options
		prepare func(t *testing.T, f *fixture)
		why     string
	}{
		{name: "format v3", opt: gen.Options{FormatVersion: 3}, why: "format version 3"},
		// An order by a transform iceberg-go does not know, which the sort
		// path does not apply (sortorder.go).
		{name: "sort order", why: "sort order", prepare: func(t *testing.T, f *fixture) {
			unknown, err := iceberg.ParseTransform("zorder")
			if err != nil {
				t.Fatal(err)
			}
			order, err := table.NewSortOrder(1, []table.SortField{{SourceIDs: []int{1}, Transform: unknown,
				Direction: table.SortASC, NullOrder: table.NullsFirst}})
			if err != nil {
				t.Fatal(err)
			}
			update(t, f, func(tx *table.Transaction) error { return tx.ReplaceSortOrder(order) })
		}},
		{name: "a write property it does not know", why: "write.parquet.bloom-filter-fpp.column.url", prepare: func(t *testing.T, f *fixture) {
			setProps(t, f, map[string]string{"write.parquet.bloom-filter-fpp.column.url": "0.05"})
		}},
		{name: "brotli", why: `compression codec "brotli"`, prepare: func(t *testing.T, f *fixture) {
			setProps(t, f, map[string]string{table.ParquetCompressionKey: "brotli"})
		}},
		{name: "files older than a new column", why: "other columns than the current schema", prepare: func(t *testing.T, f *fixture) {
			update(t, f, func(tx *table.Transaction) error {
				return tx.UpdateSchema(true, false).AddColumn([]string{"note"}, iceberg.PrimitiveTypes.String, "", false, nil).Commit()
			})
			f.rows, f.sum = checksum(t, f.tbl)
		}},
		// Same name, new field id: the old values must not come back.
		{name: "a column dropped and added again", why: "other columns than the current schema", prepare: func(t *testing.T, f *fixture) {
			update(t, f, func(tx *table.Transaction) error {
				return tx.UpdateSchema(true, false).DeleteColumn([]string{"url"}).Commit()
			})
			update(t, f, func(tx *table.Transaction) error {
				return tx.UpdateSchema(true, false).AddColumn([]string{"url"}, iceberg.PrimitiveTypes.String, "", false, nil).Commit()
			})
			f.rows, f.sum = checksum(t, f.tbl)
		}},
		{name: "equality deletes", why: "deletes to apply", prepare: func(t *testing.T, f *fixture) {
			deleteEventIDs(t, f, gen.EventID(0, 0))
			f.rows, f.sum = checksum(t, f.tbl)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opt := tc.opt
			opt.Appends, opt.RowsPerAppend, opt.Seed = 6, 100, 7
			cat, tbl, dir := testenv.GeneratedTable(t, opt)
			f := &fixture{cat: cat, tbl: tbl, opt: opt, dir: dir}
			f.rows, f.sum = checksum(t, tbl)
			if tc.prepare != nil {
				tc.prepare(t, f)
			}
			cfg := testConfig()
			cfg.DeleteFileThreshold = 1
			var log pathLog
			compactAll(t, f, cfg, log.watch(defaultPaths()))
			if got := log.all(); len(got) != 1 || got[0] != "iceberg-go" {
				t.Fatalf("paths %v, want iceberg-go", got)
			}
			if len(log.whys) == 0 || !strings.Contains(log.whys[0], tc.why) {
				t.Fatalf("why %q, want it to name %q", log.whys, tc.why)
			}
		})
	}
}

// A failure after the direct path has written part of a group (here, a
// file that cannot be read) fails that group: nothing is committed, every
// row stays, and what it wrote is deleted, the finished row groups of its
// open file included.
func TestDirectPathFailureMidGroupLeavesNoFiles(t *testing.T) {
	copyMode, arrowMode := writeModes[0], writeModes[1]
	cases := []struct {
		name string
		mode writeMode
		// a column failing mid-batch leaves the row group's columns with
		// unequal rows: its writer cannot close, and the buffers it holds
		// must be freed all the same (the guard allocator checks).
		column bool
	}{
		{"copy", copyMode, false},
		{"direct", arrowMode, false},
		// Read by ranges, so that a column chunk is a read of its own.
		{"copy, a column failing mid-batch", writeMode{"copy", []rewritePath{copyPath(-1), arrowPath(-1), scanPath}}, true},
	}
	for _, tc := range cases {
		mode := tc.mode
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newTable(t, 16, 1500, 1)
			setProps(t, f, map[string]string{table.ParquetRowGroupSizeBytesKey: "150000"})
			f.rows, f.sum = checksum(t, f.reload(t))
			before := parquetFiles(t, f.dir)
			cfg := testConfig() // one group of all 16 files
			plan, err := PlanTable(ctx, f.reload(t), cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var log pathLog
			var written []string
			fail := func(i int) error {
				if i < 12 {
					return nil
				}
				// By now row groups of the open file are flushed to it.
				for p := range parquetFiles(t, f.dir) {
					if !before[p] {
						written = append(written, p)
					}
				}
				return errors.New("unreadable (test)")
			}
			index := map[string]int{} // the group's files
			for i, task := range plan.Groups[0].files.tasks() {
				index[task.File.FilePath()] = i
			}
			fs := &faultyIO{}
			if tc.column {
				// Fails the read of leaf 5 of the i-th file.
				fs.readFails = func(p string, off int64, n int) error {
					i := index[p]
					if i < 12 {
						return nil
					}
					for _, c := range columnChunks(t, p, 5) {
						if off < c[1] && off+int64(n) > c[0] {
							return fail(i)
						}
					}
					return nil
				}
			} else {
				// Fails the opening of the i-th file (each is opened once,
				// its footer checked as its rows are read).
				fs.openFails = func(p string, opened int) error {
					if i, ok := index[p]; ok {
						return fail(i)
					}
					return nil
				}
			}
			tbl := withIO(t, f.reload(t), f.cat.(table.CatalogIO), func(real iceio.WriteFileIO) iceio.IO {
				fs.WriteFileIO = real
				return fs
			})
			res, err := execute(ctx, f.cat, tbl, plan, cfg, guarded(t, Options{}), log.watch(mode.paths))
			if err == nil || !strings.Contains(err.Error(), "unreadable (test)") || len(res.GroupsFailed) != 1 || res.GroupsCommitted != 0 {
				t.Fatalf("err %v result %+v; want the group failed", err, res)
			}
			if got := log.all(); len(got) != 1 || got[0] != mode.path {
				t.Fatalf("paths %v, want %s", got, mode.path)
			}
			if len(written) != 1 {
				t.Fatalf("%d files written when the read failed, want the open one", len(written))
			}
			if after := f.reload(t); after.CurrentSnapshot().SnapshotID != f.tbl.CurrentSnapshot().SnapshotID {
				t.Fatal("a snapshot was committed")
			}
			if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
				t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
			}
			for p := range parquetFiles(t, f.dir) {
				if !before[p] {
					t.Errorf("stray file %s", p)
				}
			}
		})
	}
}

// columnChunks returns the byte ranges, [start, end), of column col's
// chunks in a Parquet file.
func columnChunks(t *testing.T, p string, col int) [][2]int64 {
	t.Helper()
	r, err := file.OpenParquetFile(strings.TrimPrefix(p, "file://"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out [][2]int64
	for i := range r.NumRowGroups() {
		cc, err := r.MetaData().RowGroup(i).ColumnChunk(col)
		if err != nil {
			t.Fatal(err)
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() < start {
			start = cc.DictionaryPageOffset()
		}
		out = append(out, [2]int64{start, start + cc.TotalCompressedSize()})
	}
	return out
}

// Files written by Spark and PyIceberg carry other Parquet annotations than
// iceberg-go's (an int column without an Int(32) annotation, for one) but
// decode to the same values: the direct path takes them and writes what
// iceberg-go writes from them, and the independent reader agrees.
func TestDirectPathOnForeignFilesWritesWhatIcebergGoWrites(t *testing.T) {
	for _, name := range []string{"spark_v1_partitioned_20files", "spark_v1_unpartitioned_20files", "pyiceberg_v2_appends"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.MinInputFiles = 2
			var out []map[string][]iceberg.DataFile
			for _, mode := range writeModes {
				cat, tbl, dir := testenv.FixtureTable(t, name)
				f := &fixture{cat: cat, tbl: tbl, dir: dir}
				f.rows, f.sum = checksum(t, tbl)
				before := testenv.Verify(t, dir)
				var log pathLog
				compactAll(t, f, cfg, log.watch(mode.paths))
				// Their files store some leaves otherwise than iceberg-go's
				// output: they cannot be copied leaf by leaf.
				want := mode.path
				if want == "copy" {
					want = "direct"
				}
				if got := log.all(); len(got) == 0 || slices.ContainsFunc(got, func(p string) bool { return p != want }) {
					t.Fatalf("paths %v (why %v), want %s for every group", got, log.whys, want)
				}
				if after := testenv.Verify(t, dir); after.LiveRows != before.LiveRows || after.Checksum != before.Checksum {
					t.Fatalf("verifier: %d rows %s after, %d rows %s before", after.LiveRows, after.Checksum, before.LiveRows, before.Checksum)
				}
				out = append(out, filesByPartition(t, f))
			}
			if len(out[0]) == 0 {
				t.Fatal("no partitions")
			}
			compareModes(t, out, 1)
		})
	}
}

func mustNode(t *testing.T, n schema.Node, err error) schema.Node {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSameParquetSchema(t *testing.T) {
	must := func(n schema.Node, err error) schema.Node { return mustNode(t, n, err) }
	plainInt := func(id int32) schema.Node {
		return must(schema.NewPrimitiveNode("id", parquet.Repetitions.Optional, parquet.Types.Int32, id, -1))
	}
	annotatedInt := must(schema.NewPrimitiveNodeLogical("id", parquet.Repetitions.Optional, schema.NewIntLogicalType(32, true), parquet.Types.Int32, -1, 1))
	str := func(name string, rep parquet.Repetition, id int32) schema.Node {
		return must(schema.NewPrimitiveNodeLogical(name, rep, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, id))
	}
	sc := func(root string, fields ...schema.Node) *schema.Schema {
		g, err := schema.NewGroupNode(root, parquet.Repetitions.Required, fields, -1)
		if err != nil {
			t.Fatal(err)
		}
		return schema.NewSchema(g)
	}
	out := sc("schema", annotatedInt, str("name", parquet.Repetitions.Required, 2))
	cases := []struct {
		name string
		file *schema.Schema
		same bool
	}{
		{"identical", sc("schema", annotatedInt, str("name", parquet.Repetitions.Required, 2)), true},
		{"Spark's root name and an int without annotation", sc("spark_schema", plainInt(1), str("name", parquet.Repetitions.Required, 2)), true},
		{"another field id", sc("schema", plainInt(1), str("name", parquet.Repetitions.Required, 3)), false},
		{"another name", sc("schema", plainInt(1), str("title", parquet.Repetitions.Required, 2)), false},
		{"optional for required", sc("schema", plainInt(1), str("name", parquet.Repetitions.Optional, 2)), false},
		{"a column fewer", sc("schema", plainInt(1)), false},
		{"a group for a primitive", sc("schema", plainInt(1), must(schema.NewGroupNode("name", parquet.Repetitions.Required,
			schema.FieldList{str("x", parquet.Repetitions.Required, 5)}, 2))), false},
	}
	for _, tc := range cases {
		if got := sameParquetSchema(tc.file, out); got != tc.same {
			t.Errorf("%s: same %v, want %v", tc.name, got, tc.same)
		}
	}
}

// Bucket and truncate values cannot be read off column bounds: the direct
// path takes them from the group and writes them where iceberg-go does.
func TestDirectPathBucketAndTruncatePartitions(t *testing.T) {
	ctx := context.Background()
	var out []map[string][]iceberg.DataFile
	for _, mode := range writeModes {
		f := newTable(t, 3, 200, 0) // three files: too few to compact
		rows, err := f.tbl.Scan().ToArrowTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Release()
		update(t, f, func(tx *table.Transaction) error {
			return tx.UpdateSpec(true).AddField("user_id", iceberg.BucketTransform{NumBuckets: 3}, "user_bucket").
				AddField("event_type", iceberg.TruncateTransform{Width: 1}, "event_type_trunc").Commit()
		})
		// Six appends of the same rows: six files in every partition.
		for range 6 {
			update(t, f, func(tx *table.Transaction) error { return tx.AppendTable(ctx, rows, 1<<20, nil) })
		}
		f.rows, f.sum = checksum(t, f.tbl)
		var log pathLog
		compactAll(t, f, testConfig(), log.watch(mode.paths))
		if got := log.all(); len(got) < 3 || slices.ContainsFunc(got, func(p string) bool { return p != mode.path }) {
			t.Fatalf("paths %v (why %v), want %s for the groups of every bucket", got, log.whys, mode.path)
		}
		out = append(out, filesByPartition(t, f))
	}
	compareModes(t, out, -1)
}

// Copy mode gathers each leaf's values across pages and row groups before
// it writes them; byte arrays read from one page must survive the reading
// of the next. Inputs of many row groups and small pages, their strings
// stored plain or in dictionaries that fall back to plain mid-chunk, come
// out as iceberg-go writes them, rows and layout alike.
func TestCopyModeReadsAcrossPagesAndRowGroups(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
	}{
		{"plain strings", map[string]string{propDictEnabled: "false"}},
		{"dictionaries falling back", map[string]string{table.ParquetDictSizeBytesKey: "4096"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			props := map[string]string{
				table.ParquetRowGroupLimitKey:     "300",
				table.ParquetPageSizeBytesKey:     "2048",
				table.ParquetPageRowLimitKey:      "100",
				table.ParquetCompressionKey:       "snappy",
				table.ParquetRowGroupSizeBytesKey: "40000",
			}
			maps.Copy(props, tc.props)
			var out []map[string][]iceberg.DataFile
			for _, mode := range writeModes {
				opt := gen.Options{Appends: 12, RowsPerAppend: 1500, Partitions: 2, Seed: 7, Properties: props}
				cat, tbl, dir := testenv.GeneratedTable(t, opt)
				f := &fixture{cat: cat, tbl: tbl, opt: opt, dir: dir}
				out = append(out, compactInMode(t, f, mode, 2, "properties.key_value.value", 5, 3))
			}
			compareModes(t, out, 1)
		})
	}
}

// compactInMode compacts f's table in one write mode, after checking that
// its first input has at least minRowGroups row groups and minPages pages
// of column per row group, and that every group takes the mode; the rows
// and the independent reader's checksum must not change. It returns the
// files written, by partition.
func compactInMode(t *testing.T, f *fixture, mode writeMode, groups int, column string, minRowGroups, minPages int) map[string][]iceberg.DataFile {
	t.Helper()
	path := mode.path
	f.rows, f.sum = checksum(t, f.tbl)
	if path == "copy" {
		in := liveDataFiles(t, f.tbl)[0].FilePath()
		if rgs, pages := pageCount(t, in, column); rgs < minRowGroups || pages < minPages*rgs {
			t.Fatalf("input %s: %d row groups, %d pages of %s; want several of each", in, rgs, pages, column)
		}
	}
	before := verifyTable(t, f.tbl)
	var log pathLog
	compactAll(t, f, testConfig(), log.watch(mode.paths))
	if got := log.all(); len(got) != groups || slices.ContainsFunc(got, func(p string) bool { return p != path }) {
		t.Fatalf("paths %v (why %v), want %s for %d groups", got, log.whys, path, groups)
	}
	if after := verifyTable(t, f.reload(t)); after.LiveRows != before.LiveRows || after.Checksum != before.Checksum {
		t.Fatalf("%s: verifier: %d rows %s after, %d rows %s before", path, after.LiveRows, after.Checksum, before.LiveRows, before.Checksum)
	}
	return filesByPartition(t, f)
}

// pageCount counts the row groups of a Parquet file and the data pages of
// one of its columns.
func pageCount(t *testing.T, p, column string) (rowGroups, pages int) {
	t.Helper()
	r, err := file.OpenParquetFile(strings.TrimPrefix(p, "file://"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	col := r.MetaData().Schema.ColumnIndexByName(column)
	if col < 0 {
		t.Fatalf("no column %s in %s", column, p)
	}
	for i := range r.NumRowGroups() {
		pr, err := r.RowGroup(i).GetColumnPageReader(col)
		if err != nil {
			t.Fatal(err)
		}
		for pr.Next() {
			if _, dict := pr.Page().(*file.DictionaryPage); !dict {
				pages++
			}
		}
		if err := pr.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return r.NumRowGroups(), pages
}

func TestSamePhysicalLeaves(t *testing.T) {
	must := func(n schema.Node, err error) schema.Node { return mustNode(t, n, err) }
	sc := func(fields ...schema.Node) *schema.Schema {
		g, err := schema.NewGroupNode("schema", parquet.Repetitions.Required, fields, -1)
		if err != nil {
			t.Fatal(err)
		}
		return schema.NewSchema(g)
	}
	ts := func(utc bool, unit schema.TimeUnitType, forceConverted bool) schema.Node {
		lt := schema.NewTimestampLogicalTypeWithOpts(schema.WithTSIsAdjustedToUTC(), schema.WithTSTimeUnitType(unit))
		if !utc {
			lt = schema.NewTimestampLogicalTypeWithOpts(schema.WithTSTimeUnitType(unit))
		}
		if forceConverted {
			lt = schema.NewTimestampLogicalTypeWithOpts(schema.WithTSIsAdjustedToUTC(), schema.WithTSTimeUnitType(unit), schema.WithTSForceConverted())
		}
		return must(schema.NewPrimitiveNodeLogical("ts", parquet.Repetitions.Required, lt, parquet.Types.Int64, -1, 1))
	}
	dec := func(physical parquet.Type, length, precision int) schema.Node {
		return must(schema.NewPrimitiveNodeLogical("amount", parquet.Repetitions.Optional,
			schema.NewDecimalLogicalType(int32(precision), 2), physical, length, 2))
	}
	out := sc(ts(true, schema.TimeUnitMicros, true), dec(parquet.Types.FixedLenByteArray, 5, 10))
	cases := []struct {
		name string
		file *schema.Schema
		same bool
	}{
		{"identical", sc(ts(true, schema.TimeUnitMicros, true), dec(parquet.Types.FixedLenByteArray, 5, 10)), true},
		{"a timestamp read back from a file (no force flag)", sc(ts(true, schema.TimeUnitMicros, false), dec(parquet.Types.FixedLenByteArray, 5, 10)), true},
		{"nanoseconds", sc(ts(true, schema.TimeUnitNanos, false), dec(parquet.Types.FixedLenByteArray, 5, 10)), false},
		{"a local timestamp", sc(ts(false, schema.TimeUnitMicros, false), dec(parquet.Types.FixedLenByteArray, 5, 10)), false},
		{"a decimal in INT64", sc(ts(true, schema.TimeUnitMicros, false), dec(parquet.Types.Int64, -1, 10)), false},
		{"a decimal of another length", sc(ts(true, schema.TimeUnitMicros, false), dec(parquet.Types.FixedLenByteArray, 6, 10)), false},
		{"another precision", sc(ts(true, schema.TimeUnitMicros, false), dec(parquet.Types.FixedLenByteArray, 5, 9)), false},
	}
	for _, tc := range cases {
		if got := samePhysicalLeaves(tc.file, out); got != tc.same {
			t.Errorf("%s: same %v, want %v", tc.name, got, tc.same)
		}
	}
}

// Lists, structs and lists of structs, with nulls and empty lists at every
// level, long lists that span pages, and several row groups per input:
// copy mode carries their levels as they are and writes what iceberg-go
// writes.
func TestCopyModeNestedColumns(t *testing.T) {
	ctx := context.Background()
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "tags", Type: &iceberg.ListType{ElementID: 3, Element: iceberg.PrimitiveTypes.String}},
		iceberg.NestedField{ID: 4, Name: "point", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 5, Name: "x", Type: iceberg.PrimitiveTypes.Float64, Required: true},
			{ID: 6, Name: "label", Type: iceberg.PrimitiveTypes.String},
		}}},
		iceberg.NestedField{ID: 7, Name: "events", Type: &iceberg.ListType{ElementID: 8, ElementRequired: true, Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 9, Name: "kind", Type: iceberg.PrimitiveTypes.String, Required: true},
			{ID: 10, Name: "scores", Type: &iceberg.ListType{ElementID: 11, Element: iceberg.PrimitiveTypes.Int32}},
		}}}},
	)
	props := iceberg.Properties{
		table.ParquetRowGroupLimitKey: "150",
		table.ParquetPageSizeBytesKey: "1024",
		table.ParquetPageRowLimitKey:  "64",
		propDictEnabled:               "false",
	}
	row := func(i int) string {
		var tags, events []string
		for j := range i % 7 * (1 + i%3*20) { // up to 246 tags: lists that span pages
			if j%5 == 4 {
				tags = append(tags, "null")
			} else {
				tags = append(tags, fmt.Sprintf("%q", fmt.Sprintf("tag-%d-%d", i, j)))
			}
		}
		for j := range i % 4 {
			scores := "null"
			if (i+j)%3 != 0 {
				var s []string
				for k := range (i + j) % 5 {
					s = append(s, fmt.Sprint(i*k-j))
				}
				scores = "[" + strings.Join(s, ",") + "]"
			}
			events = append(events, fmt.Sprintf(`{"kind":"k%d","scores":%s}`, j, scores))
		}
		tagsJSON, point, eventsJSON := "null", "null", "null"
		if i%6 != 0 {
			tagsJSON = "[" + strings.Join(tags, ",") + "]"
		}
		if i%5 != 0 {
			label := fmt.Sprintf("%q", fmt.Sprintf("p%d", i))
			if i%3 == 0 {
				label = "null"
			}
			point = fmt.Sprintf(`{"x":%d.5,"label":%s}`, i, label)
		}
		if i%8 != 0 {
			eventsJSON = "[" + strings.Join(events, ",") + "]"
		}
		return fmt.Sprintf(`{"id":%d,"tags":%s,"point":%s,"events":%s}`, i, tagsJSON, point, eventsJSON)
	}
	var out []map[string][]iceberg.DataFile
	for _, mode := range writeModes {
		dir := t.TempDir()
		cat, err := gen.OpenSQLiteCatalog(ctx, "nested", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cat.Close() })
		if err := cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil); err != nil {
			t.Fatal(err)
		}
		tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "nested"}, sc, catalog.WithProperties(props))
		if err != nil {
			t.Fatal(err)
		}
		asc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
		if err != nil {
			t.Fatal(err)
		}
		for a := range 8 {
			var lines []string
			for i := a * 400; i < (a+1)*400; i++ {
				lines = append(lines, row(i))
			}
			rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, asc, strings.NewReader("["+strings.Join(lines, ",")+"]"))
			if err != nil {
				t.Fatal(err)
			}
			arrTbl := array.NewTableFromRecords(asc, []arrow.RecordBatch{rec})
			tx := tbl.NewTransaction()
			if err := tx.AppendTable(ctx, arrTbl, 1<<20, nil); err != nil {
				t.Fatal(err)
			}
			if tbl, err = tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			arrTbl.Release()
			rec.Release()
		}
		f := &fixture{cat: cat, tbl: tbl, dir: dir}
		out = append(out, compactInMode(t, f, mode, 1, "tags.list.element", 2, 2))
		if f.rows != 3200 {
			t.Fatalf("%d rows; want the 3,200 appended", f.rows)
		}
	}
	compareModes(t, out, 1)
}

// countingMem is a Go allocator that counts its allocations.
type countingMem struct {
	memory.Allocator
	n atomic.Int64
}

func (m *countingMem) Allocate(n int) []byte {
	m.n.Add(1)
	return m.Allocator.Allocate(n)
}

// The direct path's writers take their buffers from the allocator in the
// options, one per output file; without one (the binary's
// MAINTAINER_OFFHEAP_BUFFERS=off) they use the Go heap.
func TestWriterBuffersComeFromTheAllocator(t *testing.T) {
	f := newTable(t, 6, 200, 1)
	d, why := newDirectTable(f.tbl, nil)
	if d == nil {
		t.Fatal(why)
	}
	if mem, reclaim := d.writerMem(); reclaim != nil {
		t.Errorf("a reclaim without an allocator")
	} else if _, ok := mem.(*memory.GoAllocator); !ok {
		t.Errorf("writers allocate from %T without an allocator; want the Go heap", mem)
	}
	for _, mode := range writeModes[:2] {
		t.Run(mode.path, func(t *testing.T) {
			f := newTable(t, 6, 200, 1)
			var files atomic.Int64
			mem := &countingMem{Allocator: memory.NewGoAllocator()}
			alloc := func() (memory.Allocator, func()) { files.Add(1); return mem, func() {} }
			ctx := context.Background()
			plan, err := PlanTable(ctx, f.tbl, testConfig(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var log pathLog
			res, err := execute(ctx, f.cat, f.tbl, plan, testConfig(), Options{Allocator: alloc}, log.watch(mode.paths))
			if err != nil {
				t.Fatal(err)
			}
			if got := log.all(); len(got) != 1 || got[0] != mode.path {
				t.Fatalf("paths %v, want %s", got, mode.path)
			}
			if files.Load() != int64(res.FilesWritten) || mem.n.Load() == 0 {
				t.Errorf("%d files written, %d allocators taken, %d allocations; want one allocator per file, used",
					res.FilesWritten, files.Load(), mem.n.Load())
			}
		})
	}
}

// The direct path checks each input as it opens it: a group whose first
// file fits and a later one does not (written before a column was added)
// is declined after the direct path wrote rows of the first, and what it
// wrote is removed. iceberg-go's path rewrites the group; every row stays
// and no stray file is left.
func TestDirectPathDeclinedMidGroupLeavesNoFiles(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 300, 1)
	old := map[string]bool{}
	for _, df := range liveDataFiles(t, f.tbl) {
		old[df.FilePath()] = true
	}
	update(t, f, func(tx *table.Transaction) error {
		return tx.UpdateSchema(true, false).AddColumn([]string{"note"}, iceberg.PrimitiveTypes.String, "", false, nil).Commit()
	})
	// A file of the new schema: the old files' rows again, note null.
	rows, err := f.tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Release()
	update(t, f, func(tx *table.Transaction) error { return tx.AppendTable(ctx, rows, 1<<20, nil) })
	f.rows, f.sum = checksum(t, f.tbl)
	before := parquetFiles(t, f.dir)

	cfg := testConfig()
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 1 || plan.Groups[0].files.len() != 7 {
		t.Fatalf("plan %+v; want one group of 7 files", plan.Groups)
	}
	// Files of 64 KiB, so that the new file's rows fill some before the
	// old files are reached.
	plan.TargetFileSize, plan.MinFileSize, plan.MaxFileSize = 64<<10, 48<<10, 96<<10
	// The new file first: it fits, the old ones after it do not.
	files := plan.Groups[0].files
	reordered := newFileList(files.spec, files.partition, files.dels)
	for _, isOld := range []bool{false, true} {
		for tk := range files.all() {
			if old[tk.File.FilePath()] == isOld {
				reordered.add(tk)
			}
		}
	}
	plan.Groups[0].files = reordered
	if old[plan.Groups[0].files.tasks()[0].File.FilePath()] {
		t.Fatal("the new file is not first")
	}
	var mu sync.Mutex
	declinedWith := map[string]int{} // path -> files it wrote before declining
	var log pathLog
	paths := wrapPaths(log.watch(defaultPaths()), func(name string, _ *groupInput, rewrite func() ([]iceberg.DataFile, int64, error)) ([]iceberg.DataFile, int64, error) {
		files, n, err := rewrite()
		if isDeclined(err) {
			mu.Lock()
			declinedWith[name] = len(files)
			mu.Unlock()
		}
		return files, n, err
	})
	res, err := execute(ctx, f.cat, f.tbl, plan, cfg, guarded(t, Options{}), paths)
	if err != nil || res.GroupsCommitted != 1 {
		t.Fatalf("err %v result %+v", err, res)
	}
	if got := log.all(); len(got) != 1 || got[0] != "iceberg-go" {
		t.Fatalf("paths %v, want iceberg-go", got)
	}
	if len(log.whys) != 2 || !strings.Contains(log.whys[0], "other columns than the current schema") {
		t.Fatalf("why %q", log.whys)
	}
	if declinedWith["copy"] == 0 || declinedWith["direct"] == 0 {
		t.Fatalf("files written before declining: %v; want the direct path to have written in both modes, or the test proves nothing", declinedWith)
	}
	after := f.reload(t)
	if r, s := checksum(t, after); r != f.rows || s != f.sum {
		t.Fatalf("rows %d sum %x after, %d %x before", r, s, f.rows, f.sum)
	}
	live := map[string]bool{}
	for _, df := range liveDataFiles(t, after) {
		live[strings.TrimPrefix(df.FilePath(), "file://")] = true
	}
	for p := range parquetFiles(t, f.dir) {
		if !before[p] && !live[p] {
			t.Errorf("stray file %s", p)
		}
	}
}

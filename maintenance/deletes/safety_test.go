package deletes

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// commitDeletes commits df as a writer's position-delete file.
func (d *deleteTable) commitDeletes(df iceberg.DataFile) {
	d.t.Helper()
	ctx := context.Background()
	txn := d.tbl.NewTransaction()
	if err := txn.NewRowDelta(nil).AddDeletes(df).Commit(ctx); err != nil {
		d.t.Fatal(err)
	}
	var err error
	if d.tbl, err = txn.Commit(ctx); err != nil {
		d.t.Fatal(err)
	}
}

// A position-delete file whose file_path bounds name a data file that is
// not live, but which deletes rows of a live one (a writer's wrong
// bounds), is read before it is called dangling, and kept.
func TestWrongBoundsAreNotTrusted(t *testing.T) {
	ctx := context.Background()
	d := newDeleteTable(t, 2)
	files := d.dataFiles()
	ps := []position{{files[0], 2}, {files[0], 4}}
	data, err := encodePositions(ps)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := d.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSuffix(d.tbl.Location(), "/") + "/data/wrong-bounds.parquet"
	if err := fs.(iceio.WriteFileIO).WriteFile(path, data); err != nil {
		t.Fatal(err)
	}
	gone := []byte(strings.TrimSuffix(d.tbl.Location(), "/") + "/data/gone.parquet")
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentPosDeletes, path, iceberg.ParquetFile, nil, nil, nil, 2, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	b.LowerBoundValues(map[int][]byte{filePathFieldID: gone}).UpperBoundValues(map[int][]byte{filePathFieldID: gone})
	d.commitDeletes(b.Build())
	before := d.verify()

	plan, err := PlanTable(ctx, d.tbl, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Dangling) != 0 || !plan.Empty() {
		t.Fatalf("plan drops %+v: the file deletes rows of a live data file", plan.Dangling)
	}
	if _, why := dangling(b.Build(), []string{files[0], files[1]}); !why {
		t.Fatal("the bounds alone do not look dangling: the test tests nothing")
	}
	if after := d.verify(); after.LiveRows != before.LiveRows || before.LiveRows != 2*20-2 {
		t.Fatalf("rows %d, before %d; want %d", after.LiveRows, before.LiveRows, 2*20-2)
	}
}

// On a day-partitioned table, small position deletes merge within their
// partition only; each merged file keeps its partition, and the rows stay.
func TestMergeWithinPartitions(t *testing.T) {
	ctx := context.Background()
	opt := gen.Options{Appends: 4, RowsPerAppend: 20, Partitions: 2, Seed: 5, FormatVersion: 2, Workers: 1}
	cat, tbl, _ := testenv.GeneratedTable(t, opt)
	d := &deleteTable{t: t, cat: cat, tbl: tbl, opt: opt}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec := tbl.Metadata().PartitionSpec()
	for i, tk := range tasks {
		for j := range 2 {
			ps := []position{{tk.File.FilePath(), int64(i + j)}}
			data, err := encodePositions(ps)
			if err != nil {
				t.Fatal(err)
			}
			path := strings.TrimSuffix(tbl.Location(), "/") + fmt.Sprintf("/data/p-%d-%d.parquet", i, j)
			if err := fs.(iceio.WriteFileIO).WriteFile(path, data); err != nil {
				t.Fatal(err)
			}
			df, err := positionFile(spec, tk.File.Partition(), path, int64(len(data)), ps)
			if err != nil {
				t.Fatal(err)
			}
			d.commitDeletes(df)
		}
	}
	before := d.verify()
	cfg := DefaultConfig()
	cfg.MinInputFiles = 2
	plan, err := PlanTable(ctx, d.tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 2 || plan.Groups[0].Files != 4 || plan.Groups[0].Partition == plan.Groups[1].Partition {
		t.Fatalf("groups %+v; want one of 4 files per partition", plan.Groups)
	}
	if _, err := Execute(ctx, cat, d.tbl, plan, cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	if d.tbl, err = cat.LoadTable(ctx, d.tbl.Identifier()); err != nil {
		t.Fatal(err)
	}
	after := d.verify()
	if after.LiveRows != before.LiveRows || after.Checksum != before.Checksum || after.PositionDeleteFiles != 2 {
		t.Fatalf("after: %d rows %s, %d delete files; before %d rows %s", after.LiveRows, after.Checksum,
			after.PositionDeleteFiles, before.LiveRows, before.Checksum)
	}
	// Each merged file sits in the partition of the data files it names.
	tasks, err = d.tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		for _, del := range tk.DeleteFiles {
			if fmt.Sprint(del.Partition()) != fmt.Sprint(tk.File.Partition()) || del.SpecID() != tk.File.SpecID() {
				t.Fatalf("delete %s in partition %v applies to %s in %v", del.FilePath(), del.Partition(), tk.File.FilePath(), tk.File.Partition())
			}
		}
		if len(tk.DeleteFiles) != 1 {
			t.Fatalf("%s has %d delete files, want its partition's merged one", tk.File.FilePath(), len(tk.DeleteFiles))
		}
	}
	if n := scanRows(t, d.tbl); n != before.LiveRows {
		t.Fatalf("iceberg-go reads %d rows, want %d", n, before.LiveRows)
	}
}

func scanRows(t *testing.T, tbl *table.Table) int64 {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	return at.NumRows()
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	err := Config{TargetFileSize: 1000, MinInputFiles: 1, CommitRetries: -1}.Validate()
	for _, f := range []string{"target_file_size", "min_input_files", "commit_retries"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("problems %v do not name %s", err, f)
		}
	}
}

func TestLocationPath(t *testing.T) {
	for in, want := range map[string]string{
		"s3://bucket/t/data/a.parquet":                    "/t/data/a.parquet",
		"s3a://other/t/data/a.parquet":                    "/t/data/a.parquet",
		"hdfs://localhost:20500/test-warehouse/a.parquet": "/test-warehouse/a.parquet",
		"/test-warehouse/a.parquet":                       "/test-warehouse/a.parquet",
		"file:/tmp/a.parquet":                             "/tmp/a.parquet",
		"file:///tmp/a.parquet":                           "/tmp/a.parquet",
		"data/a.parquet":                                  "data/a.parquet",
	} {
		if got := locationPath(in); got != want {
			t.Errorf("locationPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// A position-delete file that names a live data file under another
// spelling of its location (no scheme here; s3a:// for s3:// elsewhere) is
// neither dropped as dangling nor merged: a reader that takes the
// spellings as one applies it.
func TestOtherSpellingIsKept(t *testing.T) {
	ctx := context.Background()
	d, files, bare := bareSpelling(t)
	d.addDeletes(position{bare, 3})
	d.addDeletes(position{files[1], 1})
	cfg := DefaultConfig()
	cfg.MinInputFiles = 2
	plan, err := PlanTable(ctx, d.tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Dangling) != 0 || len(plan.Groups) != 1 {
		t.Fatalf("plan: dangling %+v, groups %+v; want nothing dropped and one group", plan.Dangling, plan.Groups)
	}
	res, err := Execute(ctx, d.cat, d.tbl, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID != 0 || len(res.GroupsKept) != 1 || !strings.Contains(res.GroupsKept[0], bare) {
		t.Fatalf("result %+v; want the group kept, naming %s", res, bare)
	}
}

// A file-scoped position-delete file (or deletion vector) whose
// referenced_data_file names a live data file under another spelling of
// its location is not dangling either: dropped, its rows would come back
// for a reader that takes the spellings as one. (iceberg-go refuses to
// commit such a file, other writers do not: the planner is asked directly.)
func TestOtherSpellingOfReferencedFileIsKept(t *testing.T) {
	ctx := context.Background()
	d, files, bare := bareSpelling(t)
	p := &Plan{live: map[string]int64{files[0]: 1}, spelled: map[string]string{locationPath(files[0]): files[0]}}
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentPosDeletes,
		"file:///t/data/file-scoped.parquet", iceberg.ParquetFile, nil, nil, nil, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := d.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	why, dead, err := confirmDangling(ctx, fs, b.ReferencedDataFile(bare).Build(), []string{files[0]}, p)
	if err != nil || dead {
		t.Fatalf("dangling %v (%s), %v; want the delete of %s kept", dead, why, err, bare)
	}
	if !p.named(bare) || p.named("file:///elsewhere/x.parquet") {
		t.Fatal("named")
	}
}

// bareSpelling is a table with its data files and the first one's location
// spelled without its file:// scheme.
func bareSpelling(t *testing.T) (*deleteTable, []string, string) {
	d := newDeleteTable(t, 2)
	files := d.dataFiles()
	bare := strings.TrimPrefix(files[0], "file://")
	if bare == files[0] {
		t.Fatalf("data file %s has no file:// scheme to leave out", files[0])
	}
	return d, files, bare
}

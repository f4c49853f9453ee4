package deletes

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// deleteTable is a generated v2 table that tests add position deletes to.
type deleteTable struct {
	t   *testing.T
	cat interface {
		LoadTable(context.Context, table.Identifier) (*table.Table, error)
	}
	tbl *table.Table
	opt gen.Options
	n   int
}

func newDeleteTable(t *testing.T, appends int) *deleteTable {
	opt := gen.Options{Appends: appends, RowsPerAppend: 20, Seed: 7, FormatVersion: 2, Workers: 1}
	cat, tbl, _ := testenv.GeneratedTable(t, opt)
	return &deleteTable{t: t, cat: cat, tbl: tbl, opt: opt}
}

func (d *deleteTable) dataFiles() []string {
	d.t.Helper()
	tasks, err := d.tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	var out []string
	for _, tk := range tasks {
		out = append(out, tk.File.FilePath())
	}
	return out
}

// addDeletes commits one position-delete file holding ps.
func (d *deleteTable) addDeletes(ps ...position) {
	d.t.Helper()
	ctx := context.Background()
	fs, err := d.tbl.FS(ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	data, err := encodePositions(ps)
	if err != nil {
		d.t.Fatal(err)
	}
	d.n++
	path := strings.TrimSuffix(d.tbl.Location(), "/") + fmt.Sprintf("/data/writer-deletes-%d.parquet", d.n)
	if err := fs.(iceio.WriteFileIO).WriteFile(path, data); err != nil {
		d.t.Fatal(err)
	}
	df, err := positionFile(*iceberg.UnpartitionedSpec, nil, path, int64(len(data)), ps)
	if err != nil {
		d.t.Fatal(err)
	}
	txn := d.tbl.NewTransaction()
	if err := txn.NewRowDelta(nil).AddDeletes(df).Commit(ctx); err != nil {
		d.t.Fatal(err)
	}
	if d.tbl, err = txn.Commit(ctx); err != nil {
		d.t.Fatal(err)
	}
}

// addCopy commits a copy of data file src at path dst: new data, newer
// than every delete committed before.
func (d *deleteTable) addCopy(src, dst string) {
	d.t.Helper()
	u, err := url.Parse(src)
	if err != nil {
		d.t.Fatal(err)
	}
	v, err := url.Parse(dst)
	if err != nil {
		d.t.Fatal(err)
	}
	b, err := os.ReadFile(u.Path)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(v.Path, b, 0o644); err != nil {
		d.t.Fatal(err)
	}
	txn := d.tbl.NewTransaction()
	if err := txn.AddFiles(context.Background(), []string{dst}, nil, false); err != nil {
		d.t.Fatal(err)
	}
	if d.tbl, err = txn.Commit(context.Background()); err != nil {
		d.t.Fatal(err)
	}
}

func (d *deleteTable) verify() testenv.VerifyResult {
	d.t.Helper()
	return testenv.Verify(d.t, strings.TrimPrefix(d.tbl.MetadataLocation(), "file://"))
}

// Small position-delete files are merged into one that deletes exactly the
// rows they did. One of them names a data file committed after it (so it
// never applied to it): merged at the largest sequence number, that
// position would delete a live row, so it must be left out.
func TestMergeKeepsExactlyTheDeletedRows(t *testing.T) {
	ctx := context.Background()
	d := newDeleteTable(t, 3)
	files := d.dataFiles()
	later := filepath.Dir(files[0]) + "/added-later.parquet"
	d.addDeletes(position{files[0], 0}, position{files[0], 3}, position{later, 0}) // later: not yet in the table
	d.addDeletes(position{files[1], 5})
	d.addDeletes(position{files[1], 5}, position{files[2], 19}) // a repeat
	d.addCopy(files[0], later)
	d.addDeletes(position{later, 1}) // newer than the copy: applies to it
	before := d.verify()
	if want := int64(4*20 - 5); before.LiveRows != want {
		t.Fatalf("before: %d rows, want %d", before.LiveRows, want)
	}

	cfg := DefaultConfig()
	cfg.MinInputFiles = 2
	plan, err := PlanTable(ctx, d.tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 1 || plan.Groups[0].Files != 4 || len(plan.Dangling) != 0 {
		t.Fatalf("plan: groups %+v, dangling %+v; want the 4 files in one group", plan.Groups, plan.Dangling)
	}
	res, err := Execute(ctx, d.cat, d.tbl, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.PositionsRead != 7 || res.PositionsWritten != 5 || res.FilesWritten != 1 || res.FilesRemoved != 4 {
		t.Fatalf("result %+v; want 7 read, 5 written (the repeat and the position older than its file left out)", res)
	}
	if d.tbl, err = d.cat.LoadTable(ctx, d.tbl.Identifier()); err != nil {
		t.Fatal(err)
	}
	after := d.verify()
	if after.LiveRows != before.LiveRows || after.Checksum != before.Checksum || after.PositionDeleteFiles != 1 {
		t.Fatalf("after: %d rows %s in %d delete files; before %d rows %s", after.LiveRows, after.Checksum,
			after.PositionDeleteFiles, before.LiveRows, before.Checksum)
	}
	// The merged file carries the largest data sequence number of its sources.
	var maxSeq int64
	for _, src := range plan.Groups[0].sources {
		maxSeq = max(maxSeq, src.seq)
	}
	after2, err := PlanTable(ctx, d.tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if after2.PositionDeleteFiles != 1 || maxSeq == 0 {
		t.Fatalf("%d position-delete files after, want 1", after2.PositionDeleteFiles)
	}
	if got := mergedSeq(t, d.tbl); got != maxSeq {
		t.Fatalf("merged file has data sequence number %d, want %d (the largest of its sources)", got, maxSeq)
	}
	// iceberg-go reads the same rows.
	arrowTbl, err := d.tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer arrowTbl.Release()
	if arrowTbl.NumRows() != before.LiveRows {
		t.Fatalf("iceberg-go reads %d rows, want %d", arrowTbl.NumRows(), before.LiveRows)
	}
}

// A writer commits between the plan and the commit: the catalog refuses
// the commit made on the planned snapshot, the task plans again on the new
// one and commits; the writer's rows and the deleted rows stay as they are,
// and the files the refused attempt wrote are removed.
func TestConcurrentCommitReplans(t *testing.T) {
	ctx := context.Background()
	d := newDeleteTable(t, 2)
	files := d.dataFiles()
	d.addDeletes(position{files[0], 1})
	d.addDeletes(position{files[1], 2})
	cfg := DefaultConfig()
	cfg.MinInputFiles = 2
	plan, err := PlanTable(ctx, d.tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want testenv.VerifyResult
	hook := func(attempt int) {
		if attempt != 0 {
			return
		}
		tbl, err := gen.Append(ctx, d.tbl, d.opt, 1, gen.NextAppendIndex(d.tbl))
		if err != nil {
			t.Fatal(err)
		}
		want = testenv.Verify(t, strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	}
	head := &movingHead{}
	res, err := Execute(ctx, d.cat, d.tbl, plan, cfg, Options{beforeCommit: hook, Head: head})
	if err != nil {
		t.Fatal(err)
	}
	if res.CommitRetries != 1 || !res.Replanned || res.SnapshotID == 0 {
		t.Fatalf("result %+v; want one retry after planning again", res)
	}
	if head.reads != 2 {
		t.Fatalf("%d reads of the table's head; want the retry to go once it moved (2)", head.reads)
	}
	if d.tbl, err = d.cat.LoadTable(ctx, d.tbl.Identifier()); err != nil {
		t.Fatal(err)
	}
	after := d.verify()
	if after.LiveRows != want.LiveRows || after.Checksum != want.Checksum || after.PositionDeleteFiles != 1 {
		t.Fatalf("after: %d rows %s, %d delete files; want %d rows %s", after.LiveRows, after.Checksum,
			after.PositionDeleteFiles, want.LiveRows, want.Checksum)
	}
	var ours int
	for _, f := range testenv.Files(t, strings.TrimPrefix(d.tbl.Location(), "file://")) {
		if strings.Contains(filepath.Base(f), "deletes-") && !strings.Contains(filepath.Base(f), "writer-") {
			ours++
		}
	}
	if ours != 1 {
		t.Fatalf("%d merged files on disk, want only the committed one (the refused attempt's removed)", ours)
	}
}

// mergedSeq is the data sequence number of the one live position-delete
// file of tbl.
func mergedSeq(t *testing.T, tbl *table.Table) int64 {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				t.Fatal(err)
			}
			if e.DataFile().ContentType() == iceberg.EntryContentPosDeletes {
				return e.SequenceNum()
			}
		}
	}
	t.Fatal("no position-delete file")
	return 0
}

// A lease lost while the rewrite is staged (its manifests written) stops
// the run before the commit is sent: no snapshot, an error that is not an
// unknown outcome, the merged file removed, the rows as they were.
func TestStoppedAfterStagingSendsNothing(t *testing.T) {
	d := newDeleteTable(t, 2)
	files := d.dataFiles()
	d.addDeletes(position{files[0], 1})
	d.addDeletes(position{files[1], 2})
	before := d.verify()
	cfg := DefaultConfig()
	cfg.MinInputFiles = 2
	plan, err := PlanTable(context.Background(), d.tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	lost := errors.New("lease lost")
	head := d.tbl.CurrentSnapshot().SnapshotID
	_, err = Execute(ctx, d.cat, d.tbl, plan, cfg, Options{afterStage: func() { cancel(lost) }})
	if !errors.Is(err, lost) || errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("err %v; want the lost lease, not an unknown outcome", err)
	}
	if d.tbl, err = d.cat.LoadTable(context.Background(), d.tbl.Identifier()); err != nil {
		t.Fatal(err)
	}
	if got := d.tbl.CurrentSnapshot().SnapshotID; got != head {
		t.Fatalf("head %d, want %d: a commit was sent after the lease was lost", got, head)
	}
	after := d.verify()
	if after.LiveRows != before.LiveRows || after.Checksum != before.Checksum {
		t.Fatalf("rows changed: %d %s, want %d %s", after.LiveRows, after.Checksum, before.LiveRows, before.Checksum)
	}
	for _, f := range testenv.Files(t, strings.TrimPrefix(d.tbl.Location(), "file://")) {
		if strings.Contains(filepath.Base(f), "deletes-") && !strings.Contains(filepath.Base(f), "writer-") {
			t.Fatalf("merged file %s left behind", f)
		}
	}
}

// movingHead is a table head (internal/turn) that moves at its second read.
type movingHead struct{ reads int }

func (h *movingHead) MetadataLocation(context.Context, table.Identifier) (string, error) {
	h.reads++
	return fmt.Sprint(min(h.reads, 2)), nil
}

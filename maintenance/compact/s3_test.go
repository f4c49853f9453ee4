package compact

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/s3test"
)

// Compaction of a table on an S3-protocol server: every row kept, and the
// requests it makes per input file. A small input file is read whole from
// the GET that opening it starts: one GET to choose the group's mode from
// its footer and one to copy it, instead of one more per column chunk and
// two for the footer.
func TestCompactionOnS3(t *testing.T) {
	for _, tc := range []struct {
		name      string
		paths     []rewritePath
		want      directMode
		wantWhole bool
	}{
		{"small files read whole", defaultPaths(), modeCopy, true},
		{"read by ranges", []rewritePath{copyPath(-1), arrowPath(-1), scanPath}, modeCopy, false},
		{"Arrow mode, read by ranges", []rewritePath{arrowPath(-1), scanPath}, modeArrow, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := newS3Table(t)
			srv, cat, tbl, rows, sum := st.srv, st.cat, st.tbl, st.rows, st.sum
			inputs := map[string]int{} // object key -> GETs during the run
			for _, key := range st.inputs {
				inputs[key] = 0
			}
			plan, err := PlanTable(ctx, tbl, testConfig(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			srv.FailWhen(func(op string, r *http.Request) bool {
				key := strings.TrimPrefix(r.URL.Path, "/"+s3Bucket+"/")
				mu.Lock()
				defer mu.Unlock()
				if _, ok := inputs[key]; ok && op == "GetObject" {
					inputs[key]++
				}
				return false
			})
			var log pathLog // written from the groups' goroutines
			res, err := execute(ctx, cat, tbl, plan, testConfig(), Options{}, log.watch(tc.paths))
			srv.FailWhen(nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.GroupsCommitted != 2 || res.FilesRewritten != 12 || res.FilesWritten != 2 || res.RowsWritten != rows {
				t.Fatalf("result %+v; want 2 groups of 12 files into 2 with %d rows", res, rows)
			}
			want, paths := tc.want, log.all()
			if len(paths) != 2 || paths[0] != string(want) || paths[1] != string(want) {
				t.Fatalf("groups took paths %v; want %s for both", paths, want)
			}
			after, err := cat.LoadTable(ctx, tbl.Identifier())
			if err != nil {
				t.Fatal(err)
			}
			if got := len(liveDataFiles(t, after)); got != 2 {
				t.Fatalf("%d live data files after, want 2", got)
			}
			if r, s := checksum(t, after); r != rows || s != sum {
				t.Fatalf("rows %d sum %x after, %d %x before", r, s, rows, sum)
			}
			// The replaced files stay: the snapshot before still reads them.
			keys := srv.Keys(t, s3Bucket)
			for key := range inputs {
				if !keys[key] {
					t.Errorf("input %s was deleted", key)
				}
			}
			if r, s := checksum(t, tbl); r != rows || s != sum {
				t.Fatalf("the snapshot before reads %d rows sum %x, had %d %x", r, s, rows, sum)
			}
			cols := int64(after.Schema().NumFields()) // at least one chunk per top-level column
			total := 0
			for _, n := range inputs {
				total += n
			}
			t.Logf("%d GETs of the %d input files", total, len(inputs))
			for key, gets := range inputs {
				switch {
				case tc.wantWhole && gets != 1:
					t.Errorf("%s: %d GETs; want 1, reading it whole (its footer is checked as its rows are read)", key, gets)
				case !tc.wantWhole && int64(gets) < 1+cols:
					t.Errorf("%s: %d GETs by ranges; want one per column chunk and more", key, gets)
				}
			}
		})
	}
}

const s3Bucket = "warehouse"

// s3Table is a generated table of 12 single-file appends over 2 day
// partitions, in a SQLite catalog whose warehouse is on an in-process S3
// server.
type s3Table struct {
	srv    *s3test.Server
	cat    *sqlcat.Catalog
	tbl    *table.Table
	rows   int64
	sum    uint64
	inputs []string // object keys of its data files
}

func newS3Table(t *testing.T) *s3Table {
	t.Helper()
	srv := s3test.Start(t, s3Bucket)
	cat := srv.SQLCatalog(t, s3Bucket)
	tbl, err := gen.Create(context.Background(), cat, gen.Options{Appends: 12, RowsPerAppend: 300, Partitions: 2, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	st := &s3Table{srv: srv, cat: cat, tbl: tbl}
	st.rows, st.sum = checksum(t, tbl)
	for _, df := range liveDataFiles(t, tbl) {
		key, ok := strings.CutPrefix(df.FilePath(), "s3://"+s3Bucket+"/")
		if !ok {
			t.Fatalf("data file %s is not in the bucket", df.FilePath())
		}
		st.inputs = append(st.inputs, key)
	}
	if len(st.inputs) != 12 {
		t.Fatalf("%d data files, want 12", len(st.inputs))
	}
	return st
}

// A group that fails after writing to S3 commits nothing and deletes what
// it wrote there, and only that: the bucket holds exactly the objects it
// held before.
func TestFailedGroupOnS3DeletesOnlyWhatItWrote(t *testing.T) {
	ctx := context.Background()
	st := newS3Table(t)
	before := st.srv.Keys(t, s3Bucket)
	plan, err := PlanTable(ctx, st.tbl, testConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		put []string // objects written while the groups ran
	)
	st.srv.FailWhen(func(op string, r *http.Request) bool {
		if op == "PutObject" || strings.HasPrefix(op, "POST") {
			mu.Lock()
			put = append(put, r.URL.Path)
			mu.Unlock()
		}
		return false
	})
	index := map[string]int{} // each file's place in its group
	for _, g := range plan.Groups {
		for i, task := range g.files.tasks() {
			index[task.File.FilePath()] = i
		}
	}
	tbl := withIO(t, st.tbl, st.cat, func(real iceio.WriteFileIO) iceio.IO {
		return &faultyIO{WriteFileIO: real, openFails: func(p string, opened int) error {
			// The opening of a file (once, for its footer and rows).
			if i, ok := index[p]; !ok || i < 3 {
				return nil
			}
			// Files 0-2 of the group are in the open output file by now.
			return errors.New("unreadable (test)")
		}}
	})
	res, err := Execute(ctx, st.cat, tbl, plan, testConfig(), Options{})
	st.srv.FailWhen(nil)
	if err == nil || len(res.GroupsFailed) != 2 || res.GroupsCommitted != 0 {
		t.Fatalf("err %v, result %+v; want both groups failed", err, res)
	}
	if len(put) == 0 {
		t.Fatal("nothing was written to S3 before the failure: the test proves nothing")
	}
	after, err := st.cat.LoadTable(ctx, st.tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	if after.CurrentSnapshot().SnapshotID != st.tbl.CurrentSnapshot().SnapshotID {
		t.Fatal("a snapshot was committed")
	}
	if r, s := checksum(t, after); r != st.rows || s != st.sum {
		t.Fatalf("rows %d sum %x after, %d %x before", r, s, st.rows, st.sum)
	}
	now := st.srv.Keys(t, s3Bucket)
	for key := range now {
		if !before[key] {
			t.Errorf("stray object %s", key)
		}
	}
	for key := range before {
		if !now[key] {
			t.Errorf("object %s was deleted", key)
		}
	}
}

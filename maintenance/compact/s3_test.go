package compact

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

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
		wholeMax  int64
		noCopy    bool
		wantWhole bool
	}{
		{"small files read whole", 0, false, true},
		{"read by ranges", -1, false, false},
		{"Arrow mode, read by ranges", -1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			const bucket = "warehouse"
			srv := s3test.Start(t, bucket)
			cat := srv.SQLCatalog(t, bucket)
			tbl, err := gen.Create(ctx, cat, gen.Options{Appends: 12, RowsPerAppend: 300, Partitions: 2, Seed: 11})
			if err != nil {
				t.Fatal(err)
			}
			rows, sum := checksum(t, tbl)
			inputs := map[string]int{} // object key -> GETs during the run
			for _, df := range liveDataFiles(t, tbl) {
				key, ok := strings.CutPrefix(df.FilePath(), "s3://"+bucket+"/")
				if !ok {
					t.Fatalf("data file %s is not in the bucket", df.FilePath())
				}
				inputs[key] = 0
			}
			if len(inputs) != 12 {
				t.Fatalf("%d data files, want 12", len(inputs))
			}

			plan, err := PlanTable(ctx, tbl, testConfig(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			srv.FailWhen(func(op string, r *http.Request) bool {
				key := strings.TrimPrefix(r.URL.Path, "/"+bucket+"/")
				mu.Lock()
				defer mu.Unlock()
				if _, ok := inputs[key]; ok && op == "GetObject" {
					inputs[key]++
				}
				return false
			})
			var (
				pathMu sync.Mutex
				paths  []string
			)
			res, err := Execute(ctx, cat, tbl, plan, testConfig(), Options{
				wholeFileMax: tc.wholeMax,
				noCopy:       tc.noCopy,
				onPath: func(_ *Group, path, _ string) { // from the groups' goroutines
					pathMu.Lock()
					defer pathMu.Unlock()
					paths = append(paths, path)
				},
			})
			srv.FailWhen(nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.GroupsCommitted != 2 || res.FilesRewritten != 12 || res.FilesWritten != 2 || res.RowsWritten != rows {
				t.Fatalf("result %+v; want 2 groups of 12 files into 2 with %d rows", res, rows)
			}
			want := modeCopy
			if tc.noCopy {
				want = modeArrow
			}
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
			cols := int64(after.Schema().NumFields()) // at least one chunk per top-level column
			total := 0
			for _, n := range inputs {
				total += n
			}
			t.Logf("%d GETs of the %d input files", total, len(inputs))
			for key, gets := range inputs {
				switch {
				case tc.wantWhole && gets != 2:
					t.Errorf("%s: %d GETs; want 2 (footer, then the rows), each reading it whole", key, gets)
				case !tc.wantWhole && int64(gets) < 2+cols:
					t.Errorf("%s: %d GETs by ranges; want one per column chunk and more", key, gets)
				}
			}
		})
	}
}

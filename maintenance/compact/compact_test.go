package compact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/metacommit"
	"github.com/iceberg-maintainer/maintainer/internal/sqlcatalog"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

type fixture struct {
	cat  TableLoader
	tbl  *table.Table
	opt  gen.Options
	dir  string
	rows int64
	sum  uint64
}

// newTable writes a generated table of appends small files over parts day
// partitions into a fresh SQLite catalog.
func newTable(t testing.TB, appends, rows, parts int) *fixture {
	t.Helper()
	opt := gen.Options{Appends: appends, RowsPerAppend: rows, Partitions: parts, Seed: 7}
	cat, tbl, dir := testenv.GeneratedTable(t, opt)
	f := &fixture{cat: cat, tbl: tbl, opt: opt, dir: dir}
	f.rows, f.sum = checksum(t, tbl)
	return f
}

func checksum(t testing.TB, tbl *table.Table) (int64, uint64) {
	t.Helper()
	rows, sum, err := gen.Checksum(context.Background(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	return rows, sum
}

func (f *fixture) reload(t *testing.T) *table.Table {
	t.Helper()
	tbl, err := f.cat.LoadTable(context.Background(), f.tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func liveDataFiles(t *testing.T, tbl *table.Table) []iceberg.DataFile {
	t.Helper()
	ctx := context.Background()
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]iceberg.DataFile, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.File
	}
	return out
}

// parquetFiles lists the .parquet files on disk under the warehouse.
func parquetFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			out[p] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testConfig() Config {
	c := DefaultConfig()
	c.TargetFileSize = 64 << 20
	return c
}

func TestCompactionRewritesSmallFilesAndKeepsEveryRow(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 24, 200, 3)
	oldSnap := f.tbl.CurrentSnapshot().SnapshotID

	plan, err := PlanTable(ctx, f.tbl, testConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 3 || plan.InputFiles() != 24 {
		t.Fatalf("plan: %d groups over %d files, want 3 over 24", len(plan.Groups), plan.InputFiles())
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, testConfig(), Options{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.GroupsCommitted != 3 || res.FilesRewritten != 24 || res.FilesWritten != 3 || len(res.Commits) != 1 {
		t.Fatalf("result %+v", res)
	}
	if res.RowsRead != f.rows || res.RowsWritten != f.rows {
		t.Fatalf("rows read %d written %d, table has %d", res.RowsRead, res.RowsWritten, f.rows)
	}
	tbl := f.reload(t)
	if n := len(liveDataFiles(t, tbl)); n != 3 {
		t.Fatalf("%d live data files after compaction, want 3", n)
	}
	if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
	}
	snap := tbl.CurrentSnapshot()
	if snap.Summary.Operation != table.OpReplace || snap.Summary.Properties[tableprops.SummaryOperation] != "compact" ||
		snap.Summary.Properties[tableprops.SummaryRunID] != "run-1" {
		t.Fatalf("snapshot summary %+v", snap.Summary)
	}
	// The snapshot before compaction still reads the same rows.
	old, err := tbl.Scan(table.WithSnapshotID(oldSnap)).ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Release()
	if old.NumRows() != f.rows {
		t.Fatalf("old snapshot reads %d rows, want %d", old.NumRows(), f.rows)
	}
	// A second plan finds nothing to do.
	again, err := PlanTable(ctx, tbl, testConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() {
		t.Fatalf("second plan not empty: %+v", again.Groups)
	}
	for _, p := range again.Partitions {
		if p.Skipped == "" {
			t.Fatalf("partition %s has no skip reason", p.Partition)
		}
	}
}

func TestPlanner(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 12, 50, 3) // 4 files per day partition
	last := time.UnixMilli(f.tbl.CurrentSnapshot().TimestampMs)
	cases := []struct {
		name       string
		mod        func(*Config)
		now        time.Time
		wantGroups int
		wantFiles  int
		wantSkip   string // substring of some partition's skip reason
	}{
		{name: "default min_input_files 5 skips partitions of 4", mod: func(c *Config) {}, wantGroups: 0, wantSkip: ReasonTooFewFiles},
		{name: "min_input_files 4", mod: func(c *Config) { c.MinInputFiles = 4 }, wantGroups: 3, wantFiles: 12},
		{name: "files above the min size are optimal", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.TargetFileSize = 1 << 20
			c.MinFileSize = 1
		}, wantGroups: 0, wantSkip: ReasonOptimal},
		{name: "where on the partition column picks one day", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.Where = "event_time >= '2024-01-02' AND event_time < '2024-01-03'"
		}, wantGroups: 1, wantFiles: 4},
		{name: "recently written partitions are skipped", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.SkipPartitionsWrittenWithin = time.Hour
		}, now: last.Add(30 * time.Minute), wantGroups: 0, wantSkip: ReasonRecentlyWrite},
		{name: "partitions written long ago are not", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.SkipPartitionsWrittenWithin = time.Hour
		}, now: last.Add(2 * time.Hour), wantGroups: 3, wantFiles: 12},
		{name: "byte budget leaves groups for later", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.MaxBytesPerRun = 1 // smaller than any group: the first runs anyway
		}, wantGroups: 1, wantFiles: 4, wantSkip: ReasonBudget},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			tc.mod(&cfg)
			now := tc.now
			if now.IsZero() {
				now = time.Now()
			}
			p, err := PlanTable(ctx, f.tbl, cfg, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Groups) != tc.wantGroups || p.InputFiles() != tc.wantFiles {
				t.Fatalf("%d groups over %d files, want %d over %d", len(p.Groups), p.InputFiles(), tc.wantGroups, tc.wantFiles)
			}
			if tc.wantSkip != "" {
				found := false
				for _, d := range p.Partitions {
					found = found || strings.Contains(d.Skipped, tc.wantSkip)
				}
				if !found {
					t.Fatalf("no partition skipped with %q: %+v", tc.wantSkip, p.Partitions)
				}
			}
		})
	}
}

func TestTargetSizeComesFromConfigThenTableProperty(t *testing.T) {
	props := iceberg.Properties{table.WriteTargetFileSizeBytesKey: "134217728"}
	if got, _, _, src := Sizes(Config{}, props); got != 128<<20 || src != "table property" {
		t.Fatalf("target %d from %s", got, src)
	}
	if got, lo, hi, src := Sizes(Config{TargetFileSize: 8 << 20}, props); got != 8<<20 || lo != 6<<20 || hi != 8<<20*9/5 || src != "config" {
		t.Fatalf("target %d [%d,%d] from %s", got, lo, hi, src)
	}
	if got, _, _, src := Sizes(Config{}, nil); got != DefaultTargetFileSize || src != "default" {
		t.Fatalf("target %d from %s", got, src)
	}
	// A property the config refuses (under 1MiB) is ignored, as the config
	// package's warning says.
	tiny := iceberg.Properties{table.WriteTargetFileSizeBytesKey: "1000"}
	if got, _, _, src := Sizes(DefaultConfig(), tiny); got != DefaultTargetFileSize || src != "default" {
		t.Fatalf("target %d from %s with write.target-file-size-bytes=1000", got, src)
	}
}

// A where filter chooses files; it must never drop the rows of those files
// that do not match it.
func TestWhereFilterKeepsNonMatchingRows(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 10, 300, 0)
	cfg := testConfig()
	cfg.Where = "event_type = 'purchase'"
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.InputFiles() != 10 {
		t.Fatalf("plan covers %d files, want 10", plan.InputFiles())
	}
	if _, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d after, %d before (checksums %x %x)", rows, f.rows, sum, f.sum)
	}
}

// A writer appends while compaction runs: the commit conflicts, is retried on
// the re-loaded table, and both the writer's and the old rows are there.
func TestConcurrentAppendIsRetried(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 10, 100, 2)
	cfg := testConfig()
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	appended := false
	cat := hookCommits(t, f, func(attempt int) error {
		if !appended {
			appended = true
			if _, err := gen.Append(ctx, f.reload(t), f.opt, 3, 10); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	res, err := Execute(ctx, cat, cat.table(f.tbl), plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.CommitRetries < 1 || res.GroupsCommitted != 2 {
		t.Fatalf("retries %d, groups %d", res.CommitRetries, res.GroupsCommitted)
	}
	tbl := f.reload(t)
	if rows, _ := checksum(t, tbl); rows != f.rows+300 {
		t.Fatalf("%d rows, want %d", rows, f.rows+300)
	}
	// 2 compacted files plus the writer's 3 new ones.
	if n := len(liveDataFiles(t, tbl)); n != 5 {
		t.Fatalf("%d live data files, want 5", n)
	}
}

// A concurrent delete removes files the compaction is rewriting: the group
// fails cleanly, the files it wrote are gone, and the delete stands.
func TestConflictingDeleteFailsTheGroupCleanly(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 10, 100, 2)
	cfg := testConfig()
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	before := parquetFiles(t, f.dir)
	deleted := false
	var remaining int64
	cat := hookCommits(t, f, func(int) error {
		if !deleted {
			deleted = true
			tbl, err := f.reload(t).Delete(ctx, iceberg.EqualTo(iceberg.Reference("event_type"), "click"), nil)
			if err != nil {
				t.Fatal(err)
			}
			remaining, _ = checksum(t, tbl)
		}
		return nil
	})
	res, err := Execute(ctx, cat, cat.table(f.tbl), plan, cfg, Options{})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("want ErrConflict, got %v (result %+v)", err, res)
	}
	if res.GroupsCommitted != 0 || len(res.GroupsFailed) != 2 {
		t.Fatalf("result %+v", res)
	}
	tbl := f.reload(t)
	if rows, _ := checksum(t, tbl); rows != remaining || remaining >= f.rows {
		t.Fatalf("%d rows after, %d after the delete, %d before", rows, remaining, f.rows)
	}
	// Only the delete's own files are new on disk: compaction left none.
	live := map[string]bool{}
	for _, df := range liveDataFiles(t, tbl) {
		live[strings.TrimPrefix(df.FilePath(), "file://")] = true
	}
	for p := range parquetFiles(t, f.dir) {
		if !before[p] && !live[p] {
			t.Fatalf("stray file left behind: %s", p)
		}
	}
}

// A cancelled run (lost lease, SIGTERM) commits nothing and removes what it
// wrote.
func TestCancelledRunCommitsNothing(t *testing.T) {
	f := newTable(t, 10, 100, 1)
	cfg := testConfig()
	plan, err := PlanTable(context.Background(), f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	before := parquetFiles(t, f.dir)
	lost := errors.New("lease lost")
	res, err := execute(ctx, f.cat, f.tbl, plan, cfg, Options{}, cancelAfterRewrite(defaultPaths(), cancel, lost))
	if err == nil || !errors.Is(err, lost) {
		t.Fatalf("want the lease error, got %v", err)
	}
	if len(res.Commits) != 0 {
		t.Fatalf("committed %v", res.Commits)
	}
	tbl := f.reload(t)
	if tbl.CurrentSnapshot().SnapshotID != f.tbl.CurrentSnapshot().SnapshotID {
		t.Fatal("a snapshot was committed")
	}
	if after := parquetFiles(t, f.dir); len(after) != len(before) {
		t.Fatalf("%d parquet files on disk, %d before", len(after), len(before))
	}
}

// If the rows written do not match the rows read (a writer that loses a
// batch), nothing of that group is committed and its files are removed.
func TestRowCountMismatchCommitsNothing(t *testing.T) {
	for _, mode := range writeModes {
		path := mode.path
		t.Run(path, func(t *testing.T) {
			ctx := context.Background()
			f := newTable(t, 10, 100, 1)
			cfg := testConfig()
			cfg.PartialProgress = true
			plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			before := parquetFiles(t, f.dir)
			var log pathLog
			opts := Options{ArrowBatchRows: 64}
			res, err := execute(ctx, f.cat, f.tbl, plan, cfg, guarded(t, opts), losingBatch(log.watch(mode.paths), 64))
			if !errors.Is(err, ErrRowCountMismatch) {
				t.Fatalf("want ErrRowCountMismatch, got %v", err)
			}
			if got := log.all(); len(got) != 1 || got[0] != path {
				t.Fatalf("paths %v, want %s", got, path)
			}
			if res.GroupsCommitted != 0 {
				t.Fatalf("result %+v", res)
			}
			if f.reload(t).CurrentSnapshot().SnapshotID != f.tbl.CurrentSnapshot().SnapshotID {
				t.Fatal("a snapshot was committed")
			}
			if after := parquetFiles(t, f.dir); len(after) != len(before) {
				t.Fatalf("%d parquet files on disk, %d before", len(after), len(before))
			}
		})
	}
}

// Partial progress commits groups in batches bounded by max_commits.
func TestPartialProgressCommitsInBatches(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 20, 50, 4)
	cfg := testConfig()
	cfg.PartialProgress = true
	cfg.MaxCommits = 2
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) != 2 || res.GroupsCommitted != 4 {
		t.Fatalf("commits %v groups %d", res.Commits, res.GroupsCommitted)
	}
	if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d, want %d", rows, f.rows)
	}
}

// A writer commits an equality delete while compaction runs. The rewritten
// rows keep the planned sequence number, so the delete must keep applying
// to them: it must not be dropped as dead, and the deleted row must stay
// deleted.
func TestConcurrentEqualityDeleteStaysApplied(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 50, 0)
	cfg := testConfig() // RemoveDeadDeletes on
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var afterDelete int64
	cat := hookCommits(t, f, func(attempt int) error {
		if attempt > 0 {
			return nil
		}
		f.tbl = f.reload(t)
		deleteEventIDs(t, f, gen.EventID(0, 0)) // a row of the first append
		afterDelete, _ = checksum(t, f.reload(t))
		return nil
	})
	res, err := Execute(ctx, cat, cat.table(f.tbl), plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if afterDelete != f.rows-1 {
		t.Fatalf("the writer's delete left %d rows of %d", afterDelete, f.rows)
	}
	if res.CommitRetries < 1 || res.GroupsCommitted != 1 {
		t.Fatalf("result %+v: want one group committed after a retry", res)
	}
	if rows, _ := checksum(t, f.reload(t)); rows != afterDelete {
		t.Fatalf("%d rows after compaction, %d after the writer's delete: the deleted row came back", rows, afterDelete)
	}
}

// Files of an older partition spec are rewritten into the current one. An
// equality delete a writer commits meanwhile in a partition of the current
// spec did not apply to the old files, but would apply to the rewritten ones
// (they keep the planned sequence number): the group must conflict, and no
// row may vanish.
func TestOldSpecGroupConflictsWithNewEqualityDeletes(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 50, 0) // unpartitioned: spec 0
	txn := f.tbl.NewTransaction()
	if err := txn.UpdateSpec(true).AddField("event_time", iceberg.DayTransform{}, "event_time_day").Commit(); err != nil {
		t.Fatal(err)
	}
	tbl, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	plan, err := PlanTable(ctx, tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 1 || plan.Groups[0].SpecID == tbl.Metadata().DefaultPartitionSpec() {
		t.Fatalf("want one group of the old spec, got %+v", plan.Groups)
	}
	victim := gen.EventID(0, 0)
	cat := hookCommits(t, f, func(attempt int) error {
		if attempt > 0 {
			return nil
		}
		cur := f.reload(t)
		// The delete file carries the partition source column, as a writer
		// on the current spec writes it.
		rows, err := cur.Scan(table.WithRowFilter(iceberg.EqualTo(iceberg.Reference("event_id"), victim)),
			table.WithSelectedFields("event_id", "event_time")).ToArrowTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Release()
		if rows.NumRows() != 1 {
			t.Fatalf("victim row: %d rows", rows.NumRows())
		}
		rdr := array.NewTableReader(rows, 1)
		defer rdr.Release()
		rdr.Next()
		rec := rdr.RecordBatch()
		rec.Retain()
		dtx := cur.NewTransaction()
		recs := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
		if err := dtx.CommitEqualityDeletes(ctx, []int{cur.Schema().Field(0).ID}, recs, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := dtx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return nil
	})
	before := parquetFiles(t, f.dir)
	res, err := Execute(ctx, cat, cat.table(tbl), plan, cfg, Options{})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("want ErrConflict, got %v (result %+v)", err, res)
	}
	after := f.reload(t)
	// The new delete (another spec) never applied to the old files: every
	// row is still there, and none vanished through the rewrite.
	if rows, sum := checksum(t, after); rows != f.rows || sum != f.sum {
		t.Fatalf("%d rows after, %d before", rows, f.rows)
	}
	if n := len(liveDataFiles(t, after)); n != 6 {
		t.Fatalf("%d live data files, want the 6 originals", n)
	}
	// The only new file on disk is the writer's delete file: the
	// compaction removed what it wrote.
	var added []string
	for p := range parquetFiles(t, f.dir) {
		if !before[p] {
			added = append(added, p)
		}
	}
	if len(added) != 1 {
		t.Fatalf("new files on disk: %v, want only the writer's delete file", added)
	}
}

// flakyCatalog answers a commit with an error that does not say whether it
// landed (a timeout, a 5xx), after optionally passing the commit through.
type flakyCatalog struct {
	TableLoader
	real   table.CatalogIO
	commit bool  // pass the commit to the real catalog before failing
	err    error // the failure answered; nil: a gateway timeout
}

func (c *flakyCatalog) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	if c.commit {
		if _, _, err := c.real.CommitTable(ctx, id, reqs, ups); err != nil {
			return nil, "", err
		}
	}
	if c.err != nil {
		return nil, "", c.err
	}
	return nil, "", errors.New("gateway timeout")
}

// An unknown commit outcome never deletes the files written: if the commit
// landed they are live (and the run finds its snapshot and succeeds), if it
// did not they are left for the orphan pass.
//
// A REST catalog's 5xx is such an outcome whatever its message says, even
// "requirement failed" (a server whose own retry of a landed commit failed
// its requirement): it is never taken for a conflict.
func TestUnknownCommitOutcomeKeepsWrittenFiles(t *testing.T) {
	unknown := []error{nil, fmt.Errorf("%w: 500: CommitFailedException: Requirement failed: branch main has changed", rest.ErrCommitStateUnknown)}
	for _, landed := range []bool{true, false} {
		for i, answer := range unknown {
			t.Run(fmt.Sprintf("landed=%v/answer=%d", landed, i), func(t *testing.T) {
				ctx := context.Background()
				f := newTable(t, 10, 100, 1)
				real := f.cat.(table.CatalogIO)
				flaky := &flakyCatalog{TableLoader: f.cat, real: real, commit: landed, err: answer}
				fs, err := f.tbl.FS(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tbl := table.New(f.tbl.Identifier(), f.tbl.Metadata(), f.tbl.MetadataLocation(),
					func(context.Context) (iceio.IO, error) { return fs, nil }, flaky)
				cfg := testConfig()
				plan, err := PlanTable(ctx, tbl, cfg, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				before := parquetFiles(t, f.dir)
				// The rewrite's snapshot is committed through the catalog
				// Execute is given, which re-loads from the real one.
				res, err := Execute(ctx, flaky, tbl, plan, cfg, Options{})
				after := parquetFiles(t, f.dir)
				if len(after) != len(before)+1 {
					t.Fatalf("%d parquet files on disk, %d before: the written file must be kept", len(after), len(before))
				}
				if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
					t.Fatalf("rows %d, want %d", rows, f.rows)
				}
				if landed {
					if err != nil || len(res.Commits) != 1 {
						t.Fatalf("the commit landed: want success with its snapshot, got %v %+v", err, res)
					}
					return
				}
				if !errors.Is(err, ErrCommitUnknown) || len(res.Commits) != 0 {
					t.Fatalf("want ErrCommitUnknown and no commit, got %v %+v", err, res)
				}
				if f.reload(t).CurrentSnapshot().SnapshotID != f.tbl.CurrentSnapshot().SnapshotID {
					t.Fatal("a snapshot was committed")
				}
			})
		}
	}
}

// flakySwap answers a compare-and-set with a lost connection, after
// optionally applying it.
type flakySwap struct {
	real  metacommit.Swapper
	apply bool
}

func (s flakySwap) SwapMetadataLocation(ctx context.Context, ident table.Identifier, from, to string) (bool, error) {
	if s.apply {
		if ok, err := s.real.SwapMetadataLocation(ctx, ident, from, to); err != nil || !ok {
			return ok, err
		}
	}
	return false, errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
}

// The same for a compare-and-set commit (SQL catalogs): an update without
// an answer is never a conflict, the files stay, and the run finds out by
// re-loading whether it landed.
func TestUnknownSwapOutcomeKeepsWrittenFiles(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			ctx := context.Background()
			f := newTable(t, 10, 100, 1)
			rows, err := sqlcatalog.Open(sqliteshim.ShimName, "sqlite", sqliteuri.DSN(filepath.Join(f.dir, "cat.db")), "test")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cfg := testConfig()
			plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			before := parquetFiles(t, f.dir)
			res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{Swap: flakySwap{real: rows, apply: landed}})
			if after := parquetFiles(t, f.dir); len(after) != len(before)+1 {
				t.Fatalf("%d parquet files on disk, %d before: the written file must be kept", len(after), len(before))
			}
			tbl := f.reload(t)
			if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
				t.Fatalf("rows %d, want %d", rows, f.rows)
			}
			if landed {
				if err != nil || len(res.Commits) != 1 || tbl.CurrentSnapshot().SnapshotID != res.Commits[0] {
					t.Fatalf("the commit landed: want success with its snapshot, got %v %+v", err, res)
				}
				return
			}
			if !errors.Is(err, ErrCommitUnknown) || len(res.Commits) != 0 || res.CommitRetries != 0 {
				t.Fatalf("want ErrCommitUnknown, no commit and no retry, got %v %+v", err, res)
			}
			if tbl.CurrentSnapshot().SnapshotID != f.tbl.CurrentSnapshot().SnapshotID {
				t.Fatal("a snapshot was committed")
			}
		})
	}
}

// A compare-and-set commit that ends without landing leaves nothing it
// wrote, whichever way it ends: its lease lost while the first attempt's
// metadata file is written (the commit stops before it is sent), lost on
// the retry that re-applies the rewrite after a conflict, or the retries
// used up against a writer that always wins. The run fails without calling
// it an unknown outcome, the table is where the other writer left it, and
// every file on disk that was not there before is one the table references
// (the rewritten files, manifests, manifest lists and metadata files of a
// lost attempt are gone).
func TestSwapCommitThatDoesNotLandLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name        string
		conflicts   int // attempts the other writer wins (by committing just before)
		cancelAt    int // the metadata file written by this attempt ends the lease; -1: never
		retries     int
		wantErr     error
		wantRetries int
	}{
		{name: "lease lost on the first attempt", cancelAt: 0, retries: 4},
		{name: "lease lost on the retry", conflicts: 1, cancelAt: 1, retries: 4, wantRetries: 1},
		{name: "retries used up", conflicts: 3, cancelAt: -1, retries: 2, wantErr: ErrConflict, wantRetries: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newTable(t, 10, 100, 1)
			cat := hookCommits(t, f, func(attempt int) error {
				if attempt < tc.conflicts {
					if _, err := gen.Append(context.Background(), f.reload(t), f.opt, 1, 100+attempt); err != nil {
						t.Fatal(err)
					}
				}
				return nil
			})
			written := 0
			cat.wrapIO = func(fs iceio.WriteFileIO) iceio.IO {
				return &faultyIO{WriteFileIO: fs, created: func(path string) {
					if strings.HasSuffix(path, ".metadata.json") {
						if written == tc.cancelAt {
							cancel()
						}
						written++
					}
				}}
			}
			cfg := testConfig()
			cfg.CommitRetries = tc.retries
			plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			before := testenv.Files(t, f.dir)
			res, err := Execute(ctx, cat, cat.table(f.tbl), plan, cfg, Options{Swap: cat.swapper(t, f)})
			if err == nil || errors.Is(err, ErrCommitUnknown) || len(res.Commits) != 0 || res.CommitRetries != tc.wantRetries ||
				tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("%v, %d retries, %d commits; want a failure (%v) after %d retries that is not an unknown outcome",
					err, res.CommitRetries, len(res.Commits), tc.wantErr, tc.wantRetries)
			}
			tbl := f.reload(t)
			if got := tbl.CurrentSnapshot().Summary.Operation; got != table.OpAppend {
				t.Fatalf("head is a %s, want the other writer's append", got)
			}
			live := referencedFiles(t, tbl)
			live[strings.TrimPrefix(tbl.MetadataLocation(), "file://")] = true
			for e := range tbl.Metadata().PreviousFiles() {
				live[strings.TrimPrefix(e.MetadataFile, "file://")] = true
			}
			fs := mustFS(t, tbl)
			for _, snap := range tbl.Metadata().Snapshots() {
				live[strings.TrimPrefix(snap.ManifestList, "file://")] = true
				manifests, err := snap.Manifests(fs)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range manifests {
					live[strings.TrimPrefix(m.FilePath(), "file://")] = true
				}
			}
			for _, p := range testenv.Files(t, f.dir) {
				if !slices.Contains(before, p) && !live[p] && filepath.Base(p) != "cat.db-wal" && filepath.Base(p) != "cat.db-shm" {
					t.Errorf("left behind: %s", p)
				}
			}
		})
	}
}

// A table that asks for it (write.metadata.delete-after-commit.enabled)
// has the metadata files a compaction's commit drops from its metadata log
// removed, as iceberg-go's own commits do, whichever way it commits.
func TestCompactionRemovesMetadataDroppedFromTheLog(t *testing.T) {
	for _, swap := range []bool{false, true} {
		t.Run(fmt.Sprintf("compare-and-set=%v", swap), func(t *testing.T) {
			ctx := context.Background()
			f := newTable(t, 12, 50, 2)
			setProps(t, f, map[string]string{table.MetadataDeleteAfterCommitEnabledKey: "true", table.MetadataPreviousVersionsMaxKey: "3"})
			testenv.NoStrayMetadata(t, f.tbl) // iceberg-go's commit of the properties removed the older ones
			cfg := testConfig()
			plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var opts Options
			if swap {
				opts.Swap = hookCommits(t, f, func(int) error { return nil }).swapper(t, f)
			}
			if _, err := Execute(ctx, f.cat, f.tbl, plan, cfg, opts); err != nil {
				t.Fatal(err)
			}
			tbl := f.reload(t)
			if tbl.CurrentSnapshot().Summary.Operation != table.OpReplace {
				t.Fatalf("head is a %s, want the compaction's replace", tbl.CurrentSnapshot().Summary.Operation)
			}
			testenv.NoStrayMetadata(t, tbl)
			if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
				t.Fatalf("rows %d sum %x, want %d %x", rows, sum, f.rows, f.sum)
			}
		})
	}
}

// An equality delete committed before the plan, whose every target file is
// rewritten, is dead once the rewrite lands (the new files keep the planned
// sequence number): the commit drops it and the deleted row stays deleted.
func TestDeadEqualityDeleteIsDropped(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 50, 0)
	deleteEventIDs(t, f, gen.EventID(0, 0))
	f.rows, f.sum = checksum(t, f.tbl)
	cfg := testConfig()
	cfg.DeleteFileThreshold = 1
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.DeadDeletes) != 1 {
		t.Fatalf("plan finds %d dead deletes, want the one equality delete", len(plan.DeadDeletes))
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeleteFilesDropped != 1 {
		t.Fatalf("dropped %d delete files, want 1", res.DeleteFilesDropped)
	}
	tbl := f.reload(t)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if len(task.EqualityDeleteFiles) > 0 {
			t.Fatalf("%s still has equality deletes after the rewrite", task.File.FilePath())
		}
	}
	if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d sum %x after, %d %x before: the deleted row came back or a row was lost", rows, sum, f.rows, f.sum)
	}
}

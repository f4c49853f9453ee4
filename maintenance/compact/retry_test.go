package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// Rows as the oracle sees them: event_id -> the columns an upsert changes.
type rowSet map[int64]string

// liveRows reads every live row of the table.
func liveRows(t testing.TB, tbl *table.Table) rowSet {
	t.Helper()
	res, err := tbl.Scan(table.WithSelectedFields(gen.ColEventID, gen.ColUserID, gen.ColSessionID)).ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	rdr := array.NewTableReader(res, 1024)
	defer rdr.Release()
	out := rowSet{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ids := rec.Column(0).(*array.Int64)
		for i := range int(rec.NumRows()) {
			id := ids.Value(i)
			if _, dup := out[id]; dup {
				t.Fatalf("event_id %d is live twice", id)
			}
			out[id] = rec.Column(1).ValueStr(i) + "|" + rec.Column(2).ValueStr(i)
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameRows(t testing.TB, what string, got, want rowSet) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	var diff []string
	for id, w := range want {
		if g, ok := got[id]; !ok {
			diff = append(diff, fmt.Sprintf("%d lost (%s)", id, w))
		} else if g != w {
			diff = append(diff, fmt.Sprintf("%d is %s, want %s", id, g, w))
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			diff = append(diff, fmt.Sprintf("%d came back or appeared (%s)", id, g))
		}
	}
	if len(diff) > 5 {
		diff = append(diff[:5], fmt.Sprintf("... %d differences", len(diff)))
	}
	t.Fatalf("%s: %d rows, want %d: %s", what, len(got), len(want), strings.Join(diff, "; "))
}

// upserter commits what an upsert writer commits: per commit, one data file
// with a new version of some rows and one equality-delete file (on
// event_id) deleting their old versions; it keeps the oracle of the rows.
type upserter struct {
	cat     TableLoader
	ident   table.Identifier
	version int64
	commits int
	oracle  rowSet
}

// upsert replaces rows ids (which must be live) with new versions and
// inserts fresh, returning the first error.
func (u *upserter) upsert(ctx context.Context, ids []int64, fresh int64) error {
	return u.commit(ctx, ids, fresh, true)
}

// remove deletes rows ids, which must be live: an equality-delete file
// alone.
func (u *upserter) remove(ctx context.Context, ids []int64) error {
	return u.commit(ctx, ids, 0, false)
}

func (u *upserter) commit(ctx context.Context, ids []int64, fresh int64, insert bool) error {
	tbl, err := u.cat.LoadTable(ctx, u.ident)
	if err != nil {
		return err
	}
	var keys []int64
	var times []arrow.Timestamp
	if spec := tbl.Spec(); spec.NumFields() > 0 {
		if keys, times, err = eventTimes(ctx, tbl, ids); err != nil {
			return err
		}
	} else {
		// Unpartitioned: the delete file holds event_id alone, and the
		// new versions may be of any time; the oracle says ids are live.
		keys = ids
		times = make([]arrow.Timestamp, len(ids))
	}
	if len(keys) != len(ids) {
		return fmt.Errorf("upsert of %v: %d of them live", ids, len(keys))
	}
	u.version++
	version := u.version
	newIDs := append(append([]int64(nil), keys...), fresh)
	newTimes := append(append([]arrow.Timestamp(nil), times...), times[0])

	dataIDs, dataTimes := newIDs, newTimes
	if !insert {
		dataIDs, dataTimes = nil, nil
	}
	data, dels, err := gen.WriteUpsert(ctx, tbl, dataIDs, dataTimes, version, keys, times)
	if err != nil {
		return err
	}
	reload := func() (*table.Table, error) { return u.cat.LoadTable(ctx, u.ident) }
	if _, err := gen.CommitRowDelta(ctx, tbl, reload, data, dels); err != nil {
		return err
	}
	u.commits++
	for _, id := range newIDs {
		if insert {
			u.oracle[id] = fmt.Sprintf("%d|v%d", version, version)
		} else {
			delete(u.oracle, id)
		}
	}
	return nil
}

// retryCase is a change another writer commits while a compaction's first
// attempt is under way.
type retryCase struct {
	name   string
	props  map[string]string
	change func(t *testing.T, f *fixture, u *upserter)
	// landed: groups committed; conflict: groups that must not be.
	landed, conflict int
	// rebuilt: the retry builds the rewrite again instead of
	// re-applying it.
	rebuilt bool
	// deleted: the victim row is deleted (an equality delete) before
	// the plan.
	deleted bool
}

// Between the rewrite and its commit, another writer commits one change;
// the compaction's commit conflicts, checks only what that writer
// committed, and lands the groups the change leaves alone on the new base.
// Rows are those the writer left, none lost, none back. Each case runs
// committed through the catalog and by the SQL catalog's compare-and-set,
// which also leaves no metadata file of its lost attempt.
func TestRetryAfterConcurrentChange(t *testing.T) {
	// Appends 0, 2, 4, ... are in the first day partition, 1, 3, ... in the
	// second: a row of append 0 is in the first group.
	victim := gen.EventID(0, 0)
	cases := []retryCase{
		{name: "unrelated append", landed: 2, change: func(t *testing.T, f *fixture, _ *upserter) {
			if _, err := gen.Append(context.Background(), f.reload(t), f.opt, 2, 100); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "equality delete in the same partition", landed: 2, change: func(t *testing.T, f *fixture, u *upserter) {
			if err := u.upsert(context.Background(), []int64{victim}, gen.EventID(100, 0)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "position delete naming an input", landed: 1, conflict: 1,
			props: map[string]string{table.WriteDeleteModeKey: table.WriteModeMergeOnRead},
			change: func(t *testing.T, f *fixture, _ *upserter) {
				if _, err := f.reload(t).Delete(context.Background(), iceberg.EqualTo(iceberg.Reference(gen.ColEventID), victim), nil); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "manifest rewrite", landed: 2, rebuilt: true, change: func(t *testing.T, f *fixture, _ *upserter) {
			// The manifests the rewrite replaces are gone from the new
			// base: it is built again there, not re-applied.
			txn := f.reload(t).NewTransaction()
			if _, err := txn.RewriteManifests(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := txn.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "removal of a delete file applied to an input", landed: 1, conflict: 1, deleted: true,
			change: func(t *testing.T, f *fixture, _ *upserter) {
				// An expunge of a delete file still in force: the row it
				// deleted is back, and the rewrite read it deleted.
				tbl := f.reload(t)
				var del iceberg.DataFile
				for _, task := range mustTasks(t, tbl) {
					if len(task.EqualityDeleteFiles) > 0 {
						del = task.EqualityDeleteFiles[0]
					}
				}
				if del == nil {
					t.Fatal("no equality delete in force")
				}
				txn := tbl.NewTransaction()
				if err := txn.NewRewrite(nil).DeleteFile(del).Commit(context.Background()); err != nil {
					t.Fatal(err)
				}
				if _, err := txn.Commit(context.Background()); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "removal of an input", landed: 1, conflict: 1, change: func(t *testing.T, f *fixture, _ *upserter) {
			// Copy-on-write: the input holding the row is replaced.
			if _, err := f.reload(t).Delete(context.Background(), iceberg.EqualTo(iceberg.Reference(gen.ColEventID), victim), nil); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		for _, swap := range []bool{false, true} {
			name := tc.name
			if swap {
				name += " committed by compare-and-set" // no brackets: the paths are compared unescaped
			}
			t.Run(name, func(t *testing.T) { retryAfterChange(t, tc, victim, swap) })
		}
	}
}

// retryAfterChange is one case of TestRetryAfterConcurrentChange, committed
// through the catalog or (swap) by the SQL catalog's compare-and-set.
func retryAfterChange(t *testing.T, tc retryCase, victim int64, swap bool) {
	ctx := context.Background()
	f := newTable(t, 12, 50, 2)
	setProps(t, f, tc.props)
	if tc.deleted {
		u := &upserter{cat: f.cat, ident: f.tbl.Identifier(), oracle: liveRows(t, f.tbl)}
		if err := u.remove(ctx, []int64{victim}); err != nil {
			t.Fatal(err)
		}
		f.tbl = f.reload(t)
	}
	cfg := testConfig()
	cfg.PartialProgress = true // a conflicting group must not take the other down
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 2 {
		t.Fatalf("want 2 groups, got %d", len(plan.Groups))
	}
	before := parquetFiles(t, f.dir)
	u := &upserter{cat: f.cat, ident: f.tbl.Identifier(), oracle: liveRows(t, f.tbl)}
	var want rowSet
	cat := hookCommits(t, f, func(attempt int) error {
		if attempt == 0 {
			tc.change(t, f, u)
			want = liveRows(t, f.reload(t))
		}
		return nil
	})
	var logs bytes.Buffer
	opts := Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if swap {
		opts.Swap = cat.swapper(t, f)
	}
	res, err := Execute(ctx, cat, cat.table(f.tbl), plan, cfg, opts)
	if got := strings.Contains(logs.String(), "building the rewrite again"); got != tc.rebuilt {
		t.Errorf("rewrite built again: %v, want %v; log:\n%s", got, tc.rebuilt, logs.String())
	}
	if tc.conflict > 0 {
		if !errors.Is(err, ErrConflict) || len(res.GroupsFailed) != tc.conflict {
			t.Fatalf("want %d group(s) failed with ErrConflict, got %v (result %+v)", tc.conflict, err, res)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if res.GroupsCommitted != tc.landed || res.CommitRetries < 1 {
		t.Fatalf("%d groups committed after %d retries, want %d after a retry", res.GroupsCommitted, res.CommitRetries, tc.landed)
	}
	tbl := f.reload(t)
	sameRows(t, "after compaction", liveRows(t, tbl), want)
	headAccountsForItself(t, tbl)
	if tc.name == "equality delete in the same partition" {
		sameRows(t, "the upsert writer's oracle", liveRows(t, tbl), u.oracle)
	}
	// What a conflicting group wrote is gone: every new file on
	// disk is one a snapshot lists (the writer's superseded files
	// are listed by the snapshots before its change).
	listed := referencedFiles(t, tbl)
	for p := range parquetFiles(t, f.dir) {
		if !before[p] && !listed[p] {
			t.Fatalf("stray file left behind: %s", p)
		}
	}
	if swap {
		// A lost compare-and-set removes its metadata file: each
		// left is the table's current one or in its log.
		// (iceberg-go's commit leaves the file of a lost attempt.)
		testenv.NoStrayMetadata(t, tbl)
	}
}

// headAccountsForItself checks what a re-applied (or rebuilt) commit must
// get right beyond the rows: every manifest the current snapshot wrote
// carries its sequence number (a re-apply moves the staged manifests onto
// the new base's next number), and its summary's totals are those of the
// live data files it lists (a re-apply rebases the staged totals).
func headAccountsForItself(t *testing.T, tbl *table.Table) {
	t.Helper()
	head := tbl.CurrentSnapshot()
	manifests, err := head.Manifests(mustFS(t, tbl))
	if err != nil {
		t.Fatal(err)
	}
	var files, records int64
	for _, m := range manifests {
		if m.SnapshotID() == head.SnapshotID && m.SequenceNum() != head.SequenceNumber {
			t.Errorf("manifest %s written by snapshot %d has sequence number %d, want the snapshot's %d",
				m.FilePath(), head.SnapshotID, m.SequenceNum(), head.SequenceNumber)
		}
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		for e, err := range m.Entries(mustFS(t, tbl), true) {
			if err != nil {
				t.Fatal(err)
			}
			files++
			records += e.DataFile().Count()
		}
	}
	for key, want := range map[string]int64{"total-data-files": files, "total-records": records} {
		if got := head.Summary.Properties[key]; got != strconv.FormatInt(want, 10) {
			t.Errorf("snapshot %d summary %s = %q, want %d (the live data files it lists)", head.SnapshotID, key, got, want)
		}
	}
}

// referencedFiles lists the files some snapshot of tbl lists.
func referencedFiles(t *testing.T, tbl *table.Table) map[string]bool {
	t.Helper()
	fs := mustFS(t, tbl)
	out := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		manifests, err := s.Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range manifests {
			for e, err := range m.Entries(fs, false) {
				if err != nil {
					t.Fatal(err)
				}
				out[strings.TrimPrefix(e.DataFile().FilePath(), "file://")] = true
			}
		}
	}
	return out
}

// A retry reads what was committed since the last attempt, not the table:
// on a table of many manifests, re-applying the rewrite after one
// concurrent append opens a handful of metadata files.
func TestRetryReadsOnlyTheNewSnapshots(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 40, 20, 1)
	cfg := testConfig()
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var counting atomic.Bool
	var opened atomic.Int64
	cat := hookCommits(t, f, func(attempt int) error {
		if attempt == 0 {
			if _, err := gen.Append(ctx, f.reload(t), f.opt, 1, 100); err != nil {
				t.Fatal(err)
			}
			counting.Store(true) // from here on: the retry
		}
		return nil
	})
	cat.wrapIO = func(fs iceio.WriteFileIO) iceio.IO {
		return &faultyIO{WriteFileIO: fs, openFails: func(path string, _ int) error {
			if counting.Load() && strings.HasSuffix(path, ".avro") {
				opened.Add(1)
			}
			return nil
		}}
	}
	res, err := Execute(ctx, cat, cat.table(f.tbl), plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.CommitRetries != 1 || res.GroupsCommitted != 1 {
		t.Fatalf("result %+v, want one group landed after one retry", res)
	}
	manifests, err := f.tbl.CurrentSnapshot().Manifests(mustFS(t, f.tbl))
	if err != nil {
		t.Fatal(err)
	}
	// The new snapshot's list and manifest, the two lists that say what
	// the rewrite wrote, and the new head's list.
	if n := opened.Load(); n > 6 {
		t.Fatalf("the retry opened %d manifest files and lists; the table has %d manifests", n, len(manifests))
	}
	sameRowsCount(t, f, 20)
}

func mustFS(t *testing.T, tbl *table.Table) iceio.IO {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func sameRowsCount(t *testing.T, f *fixture, added int64) {
	t.Helper()
	if rows, _ := checksum(t, f.reload(t)); rows != f.rows+added {
		t.Fatalf("%d rows, want %d", rows, f.rows+added)
	}
}

// Beside an upsert writer committing a data file and an equality-delete
// file about every 200 ms, compaction runs again and again: every run lands
// within 3 retries, and the rows are the writer's oracle at the end.
func TestCompactionLandsBesideAFastUpsertWriter(t *testing.T) {
	t.Run("through the catalog", func(t *testing.T) { landsBesideUpsertWriter(t, 0, false, func(*Config) {}) })
	t.Run("by compare-and-set", func(t *testing.T) { landsBesideUpsertWriter(t, 0, true, func(*Config) {}) })
}

// The same with partial progress over 4 partitions in 4 commits, each by
// compare-and-set as on a SQL catalog: each batch lands within 3 retries,
// the dead deletes of each batch's partitions go with it, and no batch
// re-reads the table's manifests to find them.
func TestPartialProgressLandsBesideAFastUpsertWriter(t *testing.T) {
	dropped := landsBesideUpsertWriter(t, 4, true, func(c *Config) {
		c.PartialProgress = true
		c.MaxCommits = 4
	})
	if dropped == 0 {
		t.Fatal("no run removed a dead equality delete")
	}
}

// landsBesideUpsertWriter runs compaction 5 times beside the writer,
// committing through the catalog or (swap) by the SQL catalog's
// compare-and-set, and returns how many delete files the runs removed.
func landsBesideUpsertWriter(t *testing.T, parts int, swap bool, tune func(*Config)) (dropped int) {
	if testing.Short() {
		t.Skip("runs a writer for several seconds")
	}
	ctx := context.Background()
	stop := make(chan struct{})
	// Many small files: building the rewrite again reads every manifest,
	// which takes longer than the writer leaves between its commits.
	f := newTable(t, 200, 5, parts)
	// One snapshot left (the manifests stay): the catalog's commits, the
	// writer's and the compaction's, rewrite metadata of a few snapshots,
	// not of 200.
	update(t, f, func(tx *table.Transaction) error {
		return tx.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0), table.WithPostCommit(false))
	})
	u := &upserter{cat: f.cat, ident: f.tbl.Identifier(), oracle: liveRows(t, f.tbl)}
	var mu sync.Mutex // guards u.oracle
	ids := make([]int64, 0, len(u.oracle))
	for id := range u.oracle {
		ids = append(ids, id)
	}
	// 200 ms from one commit to the next one's work.
	writerErr := gen.Loop(stop, 200*time.Millisecond, func(i int) error {
		mu.Lock()
		defer mu.Unlock()
		// Upsert a row of the initial files (the compaction's inputs)
		// and insert a new one.
		if err := u.upsert(ctx, []int64{ids[i%len(ids)]}, gen.EventID(1000+i, 0)); err != nil {
			return fmt.Errorf("upsert %d: %w", i, err)
		}
		return nil
	})

	cfg := testConfig()
	cfg.CommitRetries = 3
	cfg.MinInputFiles = 2
	tune(&cfg)
	runs := 0
	for runs < 5 {
		time.Sleep(time.Second) // let the writer add files
		tbl, err := f.cat.LoadTable(ctx, f.tbl.Identifier())
		if err != nil {
			t.Fatal(err)
		}
		plan, err := PlanTable(ctx, tbl, cfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if plan.Empty() {
			continue
		}
		// Count the manifests and lists the run opens: the first attempt
		// reads every manifest of the table (iceberg-go's rewrite reads
		// each twice), a retry only what was committed since the attempt
		// before; one that built the rewrite again would read 2N more.
		var opened atomic.Int64
		cat := hookCommits(t, f, func(int) error { return nil })
		cat.wrapIO = func(fs iceio.WriteFileIO) iceio.IO {
			return &faultyIO{WriteFileIO: fs, openFails: func(path string, _ int) error {
				if strings.HasSuffix(path, ".avro") {
					opened.Add(1)
				}
				return nil
			}}
		}
		manifests, err := tbl.CurrentSnapshot().Manifests(mustFS(t, tbl))
		if err != nil {
			t.Fatal(err)
		}
		var opts Options
		if swap {
			opts.Swap = cat.swapper(t, f)
		}
		res, err := Execute(ctx, cat, cat.table(tbl), plan, cfg, opts)
		if err != nil {
			t.Fatalf("run %d: %v (result %+v)", runs, err, res)
		}
		batches := len(res.Commits)
		if res.GroupsCommitted != len(plan.Groups) || res.CommitRetries > 3*batches {
			t.Fatalf("run %d: %d of %d groups after %d retries in %d commits", runs, res.GroupsCommitted, len(plan.Groups), res.CommitRetries, batches)
		}
		dropped += res.DeleteFilesDropped
		t.Logf("run %d: %d files rewritten in %d commits, %d retries, %d of %d dead delete files removed, %d manifest files opened (the table has %d manifests)",
			runs, res.FilesRewritten, batches, res.CommitRetries, res.DeleteFilesDropped, len(plan.DeadDeletes), opened.Load(), len(manifests))
		// Every group landed and the writer removes no delete file: each
		// the plan found dead goes with the last group it waits for.
		if res.DeleteFilesDropped != len(plan.DeadDeletes) {
			t.Fatalf("run %d removed %d delete files, the plan found %d dead", runs, res.DeleteFilesDropped, len(plan.DeadDeletes))
		}
		// Each further batch reads about every manifest once (its
		// rewrite's base), and the writer adds a few between batches.
		if limit := int64((batches+2)*len(manifests) + 20*batches + 20*res.CommitRetries); opened.Load() > limit {
			t.Fatalf("run %d opened %d manifest files in %d retries, more than %d: a batch or a retry read the table again",
				runs, opened.Load(), res.CommitRetries, limit)
		}
		runs++
	}
	close(stop)
	if err := <-writerErr; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if u.commits < 5 { // a second between runs: the writer was busy throughout
		t.Fatalf("the writer committed only %d times", u.commits)
	}
	sameRows(t, fmt.Sprintf("after %d compactions and %d upserts", runs, u.commits), liveRows(t, f.reload(t)), u.oracle)
	return dropped
}

// eventTimes returns the event_time of the live rows ids, which a
// partitioned table's new versions and delete files need (the partition
// source column).
func eventTimes(ctx context.Context, tbl *table.Table, ids []int64) (keys []int64, times []arrow.Timestamp, err error) {
	found, err := tbl.Scan(table.WithRowFilter(iceberg.IsIn(iceberg.Reference(gen.ColEventID), ids...)),
		table.WithSelectedFields(gen.ColEventID, gen.ColEventTime)).ToArrowTable(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer found.Release()
	rdr := array.NewTableReader(found, 1024)
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := range int(rec.NumRows()) {
			keys = append(keys, rec.Column(0).(*array.Int64).Value(i))
			times = append(times, rec.Column(1).(*array.Timestamp).Value(i))
		}
	}
	return keys, times, rdr.Err()
}

func mustTasks(t *testing.T, tbl *table.Table) []table.FileScanTask {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// With partial progress each batch removes the dead deletes whose files it
// and the batches before it rewrote, and no other: a delete of a partition
// whose batch failed stays, and so does a delete of an unpartitioned table
// (which applies to every group) until its last group lands. Rows stay
// those of before in every case.
func TestPartialProgressDropsEachBatchsDeadDeletes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parts, rows int
		failLater   bool // every batch after the first fails to commit
		want        int  // delete files removed
	}{
		{"partitions, both land", 2, 50, false, 2},
		{"partitions, second fails", 2, 50, true, 1},
		// Groups of at least 1MiB (max_file_group_size's floor).
		{"unpartitioned, both land", 0, 2000, false, 1},
		{"unpartitioned, later fail", 0, 2000, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newTable(t, 12, tc.rows, tc.parts)
			u := &upserter{cat: f.cat, ident: f.tbl.Identifier(), oracle: liveRows(t, f.tbl)}
			if err := u.remove(ctx, []int64{gen.EventID(0, 0), gen.EventID(1, 0)}); err != nil {
				t.Fatal(err)
			}
			f.tbl = f.reload(t)
			f.rows, f.sum = checksum(t, f.tbl)
			cfg := testConfig()
			cfg.PartialProgress, cfg.MaxCommits = true, 2
			plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if tc.parts == 0 && len(plan.Groups) == 1 {
				// Two groups of the one partition.
				cfg.MaxFileGroupSize = plan.Groups[0].Bytes/2 + 1
				if plan, err = PlanTable(ctx, f.tbl, cfg, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			before := map[string]bool{}
			for _, task := range mustTasks(t, f.tbl) {
				before[task.File.FilePath()] = true
			}
			wantDead := max(tc.parts, 1)
			if len(plan.Groups) < 2 || len(plan.DeadDeletes) != wantDead {
				t.Fatalf("plan: %d groups, %d dead deletes; want 2 or more and %d", len(plan.Groups), len(plan.DeadDeletes), wantDead)
			}
			cfg.MaxCommits = len(plan.Groups) // a group per batch
			hook := hookCommits(t, f, func(attempt int) error {
				if tc.failLater && attempt > 0 {
					return fmt.Errorf("%w: injected", table.ErrCommitFailed)
				}
				return nil
			})
			res, err := Execute(ctx, hook, hook.table(f.tbl), plan, cfg, Options{})
			if (err != nil) != tc.failLater {
				t.Fatalf("err %v", err)
			}
			if res.DeleteFilesDropped != tc.want {
				t.Fatalf("%d delete files removed, want %d (result %+v)", res.DeleteFilesDropped, tc.want, res)
			}
			tbl := f.reload(t)
			if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
				t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
			}
			sameRows(t, "after the rewrite", liveRows(t, tbl), u.oracle)
			// The deletes left apply to the files of the groups that did
			// not land, and to no file the rewrite wrote.
			left := 0
			for _, task := range mustTasks(t, tbl) {
				if len(task.EqualityDeleteFiles) > 0 {
					left++
					if !before[task.File.FilePath()] {
						t.Fatalf("%s, written by the rewrite, has equality deletes", task.File.FilePath())
					}
				}
			}
			if tc.failLater && left == 0 {
				t.Fatal("no file of the failed group has its delete left")
			}
		})
	}
}

// A batch's first attempt is made on the table as it is when the batch is
// ready, not as it was planned: a writer's commit during the rewrite costs
// no retry, so with commit_retries 0 the run still lands.
func TestFirstAttemptIsOnTheTableAsItIsNow(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 10, 20, 0)
	u := &upserter{cat: f.cat, ident: f.tbl.Identifier(), oracle: liveRows(t, f.tbl)}
	cfg := testConfig()
	cfg.CommitRetries = 0
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The writer commits after the plan, before the rewrite's commit.
	if err := u.upsert(ctx, []int64{gen.EventID(0, 0)}, gen.EventID(1000, 0)); err != nil {
		t.Fatal(err)
	}
	hook := hookCommits(t, f, func(int) error { return nil })
	res, err := Execute(ctx, hook, hook.table(f.tbl), plan, cfg, Options{})
	if err != nil || res.GroupsCommitted != len(plan.Groups) || res.CommitRetries != 0 || hook.attempts != 1 {
		t.Fatalf("err %v, %d of %d groups, %d retries, %d commits tried; want it landed at the first attempt",
			err, res.GroupsCommitted, len(plan.Groups), res.CommitRetries, hook.attempts)
	}
	sameRows(t, "after the rewrite", liveRows(t, f.reload(t)), u.oracle)
}

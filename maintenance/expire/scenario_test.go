package expire

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/commitconflict"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/sqlcatalog"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// history builds a table whose old snapshots hold files the current one no
// longer reads, and plans to expire all but the current snapshot.
func history(t *testing.T) (*fixture, []int64, map[int64]*snapState, *Plan) {
	t.Helper()
	f := newTable(t, 5, 30, 2, nil)
	f.deleteAppends(t, 3)
	before := capture(t, f.tbl, true)
	plan, err := PlanTable(context.Background(), f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Expired) != 5 || len(plan.Files) == 0 {
		t.Fatalf("plan expires %d snapshots and %d files", len(plan.Expired), len(plan.Files))
	}
	return f, snapshotIDs(f.tbl), before, plan
}

// A tag created by someone else between planning and committing, on a
// snapshot the plan expires: the commit's ref requirement fails, the re-plan
// keeps the tagged snapshot, and the tag and its files survive.
func TestTagCreatedBeforeCommitSurvives(t *testing.T) {
	f, ids, before, plan := history(t)
	other := f.handle(t)
	opts := Options{Deleter: &localDeleter{}, beforeCommit: func(attempt int) error {
		if attempt == 0 {
			setRef(t, other, f.opt.Identifier(), "audit", ids[1], table.TagRef, 0, 0)
		}
		return nil
	}}
	res, err := Execute(context.Background(), f.cat, f.tbl, plan, strictConfig(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.CommitRetries != 1 || slices.Contains(res.ExpiredSnapshotIDs, ids[1]) || res.SnapshotsExpired() != 4 {
		t.Fatalf("result %+v", res)
	}
	after := f.reload(t)
	if s := after.SnapshotByName("audit"); s == nil || s.SnapshotID != ids[1] {
		t.Fatal("the tag did not survive")
	}
	checkAfter(t, before, after, true)
}

// restLike stands for a catalog that validates only the spec's requirements
// (a REST server): it drops ours, and runs inject once just before the
// commit, inside the window no client-side check can close. extra updates
// go with the first commit, as a misbehaving server might apply them.
type restLike struct {
	TableLoader
	inject func()
	extra  []table.Update
}

func (c *restLike) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	reqs = slices.DeleteFunc(slices.Clone(reqs), func(r table.Requirement) bool { _, own := r.(*refsRequirement); return own })
	for i, r := range reqs {
		if at, ok := r.(refAt); ok { // what the server decodes from its JSON
			reqs[i] = table.AssertRefSnapshotID(at.name, &at.id)
		}
	}
	if c.inject != nil {
		c.inject()
		c.inject = nil
	}
	ups = append(slices.Clone(ups), c.extra...)
	c.extra = nil
	return c.TableLoader.CommitTable(ctx, ident, reqs, ups)
}

// Without our requirement the tag goes with its snapshot. The post-commit
// check reads the replaced metadata, finds the tag lost, cannot restore it
// (its snapshot is gone) and deletes nothing at all.
func TestLostRefStopsBeforeDeletingAnything(t *testing.T) {
	f, ids, _, plan := history(t)
	other := f.handle(t)
	files := filesOnDisk(t, f.dir+"/wh")
	cat := &restLike{TableLoader: f.cat, inject: func() {
		setRef(t, other, f.opt.Identifier(), "audit", ids[1], table.TagRef, 0, 0)
	}}
	res, err := Execute(context.Background(), cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}})
	if !errors.Is(err, ErrRefLost) || !res.Committed || !slices.Equal(res.RefsLost, []string{"audit"}) || len(res.FailedPaths()) != 0 {
		t.Fatalf("want ErrRefLost after the commit, got %v (%+v)", err, res)
	}
	if res.FilesDeleted() != 0 {
		t.Fatalf("deleted %d files", res.FilesDeleted())
	}
	for _, p := range files {
		if !exists(t, p) {
			t.Fatalf("%s was deleted", p)
		}
	}
}

// The same catalog without a concurrent tag: the metadata-log check passes
// and the run completes.
func TestRESTLikeCatalogExpires(t *testing.T) {
	f, _, before, plan := history(t)
	res, err := Execute(context.Background(), &restLike{TableLoader: f.cat}, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}})
	if err != nil || res.FilesDeleted() != len(plan.Files) {
		t.Fatalf("%v %+v", err, res)
	}
	checkAfter(t, before, f.reload(t), true)
}

// A ref the commit dropped although its snapshot stays is put back.
func TestDroppedRefIsRestored(t *testing.T) {
	f, ids, before, _ := history(t)
	setRef(t, f.cat, f.opt.Identifier(), "keep", ids[len(ids)-1], table.BranchRef, 0, 0)
	f.tbl = f.reload(t)
	plan, err := PlanTable(context.Background(), f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cat := &restLike{TableLoader: f.cat, extra: []table.Update{table.NewRemoveSnapshotRefUpdate("keep")}}
	res, err := Execute(context.Background(), cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}})
	if err != nil || !slices.Equal(res.RefsRestored, []string{"keep"}) {
		t.Fatalf("%v %+v", err, res)
	}
	after := f.reload(t)
	if s := after.SnapshotByName("keep"); s == nil || s.SnapshotID != ids[len(ids)-1] {
		t.Fatal("branch not restored")
	}
	checkAfter(t, before, after, true)
}

// A writer re-adds a planned data file between the commit and the deletes:
// the fresh metadata references it, so it is kept.
func TestFileReferencedAgainAfterCommitIsKept(t *testing.T) {
	ctx := context.Background()
	f, ids, before, plan := history(t)
	readd := firstDataFile(t, f, ids[0])
	if !slices.ContainsFunc(plan.Files, func(fl File) bool { return fl.Path == readd.FilePath() }) {
		t.Fatalf("%s is not planned for deletion", readd.FilePath())
	}
	other := f.handle(t)
	opts := Options{Deleter: &localDeleter{}, afterCommit: func() error { return addFile(ctx, other, f, readd) }}
	res, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesKept != 1 || res.FilesDeleted() != len(plan.Files)-1 {
		t.Fatalf("kept %d, deleted %d of %d", res.FilesKept, res.FilesDeleted(), len(plan.Files))
	}
	after := f.reload(t)
	if !exists(t, readd.FilePath()) {
		t.Fatal("re-added file deleted")
	}
	rows, _, err := gen.Checksum(ctx, after)
	if err != nil || rows != before[ids[len(ids)-1]].rows+readd.Count() {
		t.Fatalf("current snapshot reads %d rows (%v)", rows, err)
	}
	checkAfter(t, before, after, true)
}

// A writer appends between planning and committing. A catalog that runs
// our requirement in-process takes the plan as it is: main only moved on
// through the writer's snapshot, which the plan does not touch. A REST
// server holds main where it was planned: the commit conflicts, is
// re-planned (never beyond the first plan) and retried; with no retries
// left it fails with ErrConflict and changes nothing.
func TestConcurrentAppend(t *testing.T) {
	ctx := context.Background()
	for _, rest := range []bool{false, true} {
		for _, retries := range []int{0, 2} {
			f, _, before, plan := history(t)
			other := f.handle(t)
			cfg := strictConfig()
			cfg.CommitRetries = retries
			var writers int64
			opts := Options{Deleter: &localDeleter{}, beforeCommit: func(attempt int) error {
				if attempt == 0 {
					tbl, err := other.LoadTable(ctx, f.opt.Identifier())
					if err != nil {
						return err
					}
					tbl, err = gen.Append(ctx, tbl, f.opt, 1, 100)
					if err == nil {
						writers = tbl.CurrentSnapshot().SnapshotID
					}
					return err
				}
				return nil
			}}
			var cat TableLoader = f.cat
			if rest {
				cat = &restLike{TableLoader: f.cat}
			}
			loc := f.tbl.MetadataLocation()
			res, err := Execute(ctx, cat, f.tbl, plan, cfg, opts)
			name := fmt.Sprintf("rest %v, %d retries", rest, retries)
			if rest && retries == 0 {
				if !errors.Is(err, ErrConflict) || res.Committed || res.FilesDeleted() != 0 {
					t.Fatalf("%s: want ErrConflict, got %v (%+v)", name, err, res)
				}
				if tbl := f.reload(t); len(tbl.Metadata().Snapshots()) != 7 || tbl.MetadataLocation() == loc {
					t.Fatalf("%s: want the writer's snapshot and nothing expired", name)
				}
				continue
			}
			wantRetries := 0
			if rest {
				wantRetries = 1
			}
			if err != nil || res.CommitRetries != wantRetries || !slices.Equal(res.ExpiredSnapshotIDs, plan.ExpiredIDs()) {
				t.Fatalf("%s: %v %+v", name, err, res)
			}
			after := f.reload(t)
			if len(after.Metadata().Snapshots()) != 2 || after.CurrentSnapshot().SnapshotID != writers {
				t.Fatalf("%s: %d snapshots left, current %d; want the planned current and the writer's %d on main",
					name, len(after.Metadata().Snapshots()), after.CurrentSnapshot().SnapshotID, writers)
			}
			checkAfter(t, before, after, true)
		}
	}
}

// A branch that moved between planning and committing other than by a
// writer's new snapshots fails the requirement and is re-planned: main
// rolled back to a snapshot the plan expires, and main fast-forwarded to a
// staged snapshot (no ref reached it, so the plan expires it). With no
// retry left nothing changes; with one, the snapshot main is at is kept.
func TestBranchMovedOntoAnExpiringSnapshotIsReplanned(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"rolled back", "fast-forwarded to a staged snapshot"} {
		for _, retries := range []int{0, 1} {
			f := newTable(t, 5, 30, 2, nil)
			f.deleteAppends(t, 3)
			target := snapshotIDs(f.tbl)[1]
			if how != "rolled back" {
				head := f.tbl.CurrentSnapshot()
				staged := *head
				staged.SnapshotID, staged.ParentSnapshotID = head.SnapshotID+1, &head.SnapshotID
				staged.SequenceNumber, staged.TimestampMs = head.SequenceNumber+1, head.TimestampMs+1
				if _, _, err := f.cat.CommitTable(ctx, f.opt.Identifier(), nil, []table.Update{table.NewAddSnapshotUpdate(&staged)}); err != nil {
					t.Fatal(err)
				}
				f.tbl, target = f.reload(t), staged.SnapshotID
			}
			before := capture(t, f.tbl, true)
			plan, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(plan.ExpiredIDs(), target) {
				t.Fatalf("%s: the plan keeps snapshot %d; the case needs it expired", how, target)
			}
			cfg := strictConfig()
			cfg.CommitRetries = retries
			other := f.handle(t)
			opts := Options{Deleter: &localDeleter{}, beforeCommit: func(attempt int) error {
				if attempt == 0 {
					setRef(t, other, f.opt.Identifier(), table.MainBranch, target, table.BranchRef, 0, 0)
				}
				return nil
			}}
			res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, opts)
			after := f.reload(t)
			if s := after.CurrentSnapshot(); s == nil || s.SnapshotID != target {
				t.Fatalf("%s, %d retries: main is at %v, want snapshot %d kept (%v, %+v)", how, retries, s, target, err, res)
			}
			if retries == 0 {
				if !errors.Is(err, ErrConflict) || res.Committed || res.FilesDeleted() != 0 {
					t.Fatalf("%s: want ErrConflict, got %v (%+v)", how, err, res)
				}
				continue
			}
			if err != nil || res.CommitRetries != 1 || slices.Contains(res.ExpiredSnapshotIDs, target) {
				t.Fatalf("%s: %v %+v", how, err, res)
			}
			checkAfter(t, before, after, true)
		}
	}
}

// casLost loses the catalog's compare-and-swap once: the requirements pass
// on the current metadata, a writer commits, and the commit fails as a
// conflict. loads counts the re-loads made after that.
type casLost struct {
	TableLoader
	writer func() error
	lost   bool
	loads  int
}

func (c *casLost) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if c.lost {
		c.loads++
	}
	return c.TableLoader.LoadTable(ctx, ident)
}

func (c *casLost) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	if c.lost {
		return c.TableLoader.CommitTable(ctx, ident, reqs, ups)
	}
	c.lost = true
	cur, err := c.TableLoader.LoadTable(ctx, ident)
	if err != nil {
		return nil, "", err
	}
	for _, r := range reqs {
		if err := r.Validate(cur.Metadata()); err != nil {
			return nil, "", err
		}
	}
	if err := c.writer(); err != nil {
		return nil, "", err
	}
	return nil, "", fmt.Errorf("%w: metadata-location moved underneath us", table.ErrCommitFailed)
}

// A commit that lost the compare-and-swap after our requirement held is
// committed again as planned, without a re-load or a re-plan, once the
// table's head moved; the writer's snapshot stays.
func TestLostCompareAndSwapCommitsThePlanAgain(t *testing.T) {
	ctx := context.Background()
	f, _, before, plan := history(t)
	other := f.handle(t)
	cat := &casLost{TableLoader: f.cat, writer: func() error {
		tbl, err := other.LoadTable(ctx, f.opt.Identifier())
		if err == nil {
			_, err = gen.Append(ctx, tbl, f.opt, 1, 100)
		}
		return err
	}}
	head := &movingHead{}
	res, err := Execute(ctx, cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}, Head: head})
	if err != nil || res.CommitRetries != 1 || !slices.Equal(res.ExpiredSnapshotIDs, plan.ExpiredIDs()) {
		t.Fatalf("%v %+v", err, res)
	}
	if head.reads < 2 {
		t.Fatalf("%d reads of the head; want the retry to wait for it to move", head.reads)
	}
	// checkRefs re-loads once after the commit: nothing before it.
	if cat.loads != 1 {
		t.Fatalf("%d loads after the lost compare-and-swap; want only the post-commit check's", cat.loads)
	}
	after := f.reload(t)
	if len(after.Metadata().Snapshots()) != 2 {
		t.Fatalf("%d snapshots left, want the planned current and the writer's", len(after.Metadata().Snapshots()))
	}
	checkAfter(t, before, after, true)
}

// movingHead is a head that moves at its second read.
type movingHead struct{ reads int }

func (h *movingHead) MetadataLocation(context.Context, table.Identifier) (string, error) {
	h.reads++
	return fmt.Sprint(min(h.reads, 2)), nil
}

// A cancelled run (lost lease): before the commit nothing changes; after
// it nothing is deleted, and every planned file is kept to retry (its
// snapshot is gone).
func TestCancelledRunDeletesNothing(t *testing.T) {
	lost := errors.New("lease lost")
	for _, at := range []string{"before commit", "after commit"} {
		t.Run(at, func(t *testing.T) {
			f, _, _, plan := history(t)
			files := filesOnDisk(t, f.dir+"/wh")
			ctx, cancel := context.WithCancelCause(context.Background())
			opts := Options{Deleter: &localDeleter{}}
			if at == "before commit" {
				opts.beforeCommit = func(int) error { cancel(lost); return nil }
			} else {
				opts.afterCommit = func() error { cancel(lost); return nil }
			}
			res, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), opts)
			if !errors.Is(err, lost) || res.FilesDeleted() != 0 || res.Committed != (at == "after commit") {
				t.Fatalf("%v %+v", err, res)
			}
			if at == "before commit" && f.reload(t).MetadataLocation() != f.tbl.MetadataLocation() {
				t.Fatal("committed although cancelled")
			}
			if want := plannedPaths(plan, at == "after commit"); !slices.Equal(res.FailedPaths(), want) {
				t.Fatalf("kept to retry %d files, want %d", len(res.FailedPaths()), len(want))
			}
			for _, p := range files {
				if !exists(t, p) {
					t.Fatalf("%s deleted", p)
				}
			}
		})
	}
}

// A failed delete fails the run with the file named, after the other files
// are deleted; the failed path is returned to retry.
func TestDeleteFailuresFailTheRun(t *testing.T) {
	f, _, _, plan := history(t)
	victim := plan.Files[0]
	d := &localDeleter{fail: victim.Path}
	res, err := Execute(context.Background(), f.cat, f.tbl, plan, strictConfig(), Options{Deleter: d})
	if !errors.Is(err, ErrDeleteFailed) || !strings.Contains(err.Error(), victim.Path) {
		t.Fatalf("err %v, want ErrDeleteFailed naming %s", err, victim.Path)
	}
	if !res.Committed || res.FilesFailed != 1 || len(res.DeleteFailures) != 1 || res.DeleteFailures[0].Path != victim.Path ||
		!strings.Contains(res.DeleteFailures[0].Err, "permission denied") || res.FilesDeleted() != len(plan.Files)-1 ||
		!slices.Equal(res.FailedPaths(), []string{victim.Path}) {
		t.Fatalf("%+v", res)
	}
	if !exists(t, victim.Path) || d.calls.Load() != 1 {
		t.Fatalf("victim gone or %d Delete calls for %d files, want one batch", d.calls.Load(), len(plan.Files))
	}
}

// firstDataFile returns the first data file of snapshot id's first manifest.
func firstDataFile(t *testing.T, f *fixture, id int64) iceberg.DataFile {
	t.Helper()
	fs, err := f.tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mans, err := f.tbl.SnapshotByID(id).Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range mans[0].Entries(fs, true) {
		if err != nil {
			t.Fatal(err)
		}
		return e.DataFile()
	}
	t.Fatalf("snapshot %d has no data file", id)
	return nil
}

// addFile commits df to the table through cat, as a writer re-adding an
// existing file (AddDataFiles) would.
func addFile(ctx context.Context, cat TableLoader, f *fixture, df iceberg.DataFile) error {
	tbl, err := cat.LoadTable(ctx, f.opt.Identifier())
	if err != nil {
		return err
	}
	txn := tbl.NewTransaction()
	if err := txn.AddDataFiles(ctx, []iceberg.DataFile{df}, nil); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// plannedPaths returns the paths of plan's files, or none unless kept.
func plannedPaths(plan *Plan, kept bool) []string {
	if !kept {
		return nil
	}
	paths := make([]string, len(plan.Files))
	for i, f := range plan.Files {
		paths[i] = f.Path
	}
	return paths
}

// failLoads fails LoadTable once failing is set: the catalog went away.
type failLoads struct {
	TableLoader
	failing atomic.Bool
}

func (c *failLoads) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if c.failing.Load() {
		return nil, errors.New("catalog unavailable")
	}
	return c.TableLoader.LoadTable(ctx, ident)
}

// The references cannot be checked after the commit (the catalog fails the
// re-load): nothing is deleted, and every planned file is kept to retry,
// since its snapshot is gone.
func TestUnverifiableAfterCommitKeepsThePlannedFiles(t *testing.T) {
	f, _, _, plan := history(t)
	files := filesOnDisk(t, f.dir+"/wh")
	cat := &failLoads{TableLoader: f.cat}
	opts := Options{Deleter: &localDeleter{}, afterCommit: func() error { cat.failing.Store(true); return nil }}
	res, err := Execute(context.Background(), cat, f.tbl, plan, strictConfig(), opts)
	if !errors.Is(err, ErrUnverifiable) || !res.Committed || res.FilesDeleted() != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if !slices.Equal(res.FailedPaths(), plannedPaths(plan, true)) {
		t.Fatalf("kept to retry %d files, want %d", len(res.FailedPaths()), len(plan.Files))
	}
	for _, p := range files {
		if !exists(t, p) {
			t.Fatalf("%s deleted", p)
		}
	}
}

// Beside a writer appending back to back, each commit a new snapshot on
// main, expiry lands within 3 retries (the writer's appends do not make
// its plan stale), and every snapshot left reads, with the writer's rows.
func TestExpiryLandsBesideABackToBackWriter(t *testing.T) {
	ctx := context.Background()
	var appended atomic.Int64
	f, deleted := expireBesideWriter(t, func(f *fixture, other *sqlcat.Catalog, i int) error {
		tbl, err := other.LoadTable(ctx, f.opt.Identifier())
		if err == nil {
			_, err = gen.Append(ctx, tbl, f.opt, 1, 1000+i)
		}
		if err == nil {
			appended.Add(1)
		} else if commitconflict.Is(err) {
			err = nil // the writer lost to expiry: it appends again
		}
		return err
	})
	if deleted == 0 {
		t.Fatal("no run deleted a file (the expired snapshots' manifest lists)")
	}
	after := f.reload(t)
	rows, _, err := gen.Checksum(ctx, after)
	if want := int64(f.opt.RowsPerAppend) * (int64(f.opt.Appends) + appended.Load()); err != nil || rows != want {
		t.Fatalf("%d rows after expiry beside the writer (%v); want %d", rows, err, want)
	}
	everySnapshotReads(t, after)
}

// Beside an upsert writer (per commit a data file with a new version of a
// row and an equality-delete file of its old one), expiry lands within 3
// retries and deletes nothing that a snapshot left references: every
// snapshot left reads, and the current one holds each row once, an
// upserted row at the writer's last version of it.
func TestExpiryLandsBesideAnUpsertWriter(t *testing.T) {
	ctx := context.Background()
	versions := map[int64]int64{} // event_id -> the last version committed; the writer's only
	f, deleted := expireBesideWriter(t, func(f *fixture, other *sqlcat.Catalog, i int) error {
		reload := func() (*table.Table, error) { return other.LoadTable(ctx, f.opt.Identifier()) }
		tbl, err := reload()
		if err != nil {
			return err
		}
		// A live row of the generated data; the table is unpartitioned,
		// so the delete file holds event_id alone and times do not matter.
		id, version := gen.EventID(i%f.opt.Appends, (i/f.opt.Appends)%f.opt.RowsPerAppend), int64(i+1)
		ids, times := []int64{id}, []arrow.Timestamp{0}
		data, dels, err := gen.WriteUpsert(ctx, tbl, ids, times, version, ids, times)
		if err == nil {
			_, err = gen.CommitRowDelta(ctx, tbl, reload, data, dels)
		}
		if err == nil {
			versions[id] = version
		}
		return err
	})
	if deleted == 0 || len(versions) == 0 {
		t.Fatalf("%d files deleted, %d rows upserted: the test tried nothing", deleted, len(versions))
	}
	after := f.reload(t)
	res, err := after.Scan(table.WithSelectedFields(gen.ColEventID, gen.ColUserID)).ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	rdr := array.NewTableReader(res, 1024)
	defer rdr.Release()
	seen := map[int64]bool{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := range int(rec.NumRows()) {
			id, user := rec.Column(0).(*array.Int64).Value(i), rec.Column(1).(*array.Int64).Value(i)
			if seen[id] {
				t.Fatalf("event_id %d is live twice", id)
			}
			seen[id] = true
			if v, ok := versions[id]; ok && user != v {
				t.Fatalf("event_id %d at version %d, want the writer's last, %d", id, user, v)
			}
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	if want := f.opt.Appends * f.opt.RowsPerAppend; len(seen) != want {
		t.Fatalf("%d rows after expiry beside the upsert writer, want %d", len(seen), want)
	}
	everySnapshotReads(t, after)
}

// expireBesideWriter runs expiry 3 times on a table of 400 rows while a
// writer (commit, called back to back on a catalog of its own until the
// runs end) commits, each run on a fresh plan with 3 commit retries at
// most; it returns the table and the files the runs deleted.
func expireBesideWriter(t *testing.T, commit func(f *fixture, other *sqlcat.Catalog, i int) error) (f *fixture, deleted int) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a writer for a few seconds")
	}
	f = newTable(t, 40, 10, 0, nil)
	other := f.handle(t)
	stop := make(chan struct{})
	writerErr := gen.Loop(stop, 0, func(i int) error { return commit(f, other, i) })
	defer func() {
		close(stop)
		if err := <-writerErr; err != nil {
			t.Fatal(err)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	ctx := context.Background()
	cfg := strictConfig()
	cfg.CommitRetries = 3
	head, err := sqlcatalog.Open(sqliteshim.ShimName, "sqlite", sqliteuri.DSN(filepath.Join(f.dir, "cat.db")), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer head.Close()
	for run := range 3 {
		tbl := f.reload(t)
		plan, err := PlanTable(ctx, tbl, cfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if plan.Empty() {
			t.Fatalf("run %d: nothing to expire beside the writer", run)
		}
		res, err := Execute(ctx, f.cat, tbl, plan, cfg, Options{Deleter: &localDeleter{}, Head: head})
		if err != nil || !res.Committed || res.CommitRetries > 3 {
			t.Fatalf("run %d: %v (%+v)", run, err, res)
		}
		t.Logf("run %d: %d retries, %d snapshots expired, %d files deleted", run, res.CommitRetries, res.SnapshotsExpired(), res.FilesDeleted())
		deleted += res.FilesDeleted()
		time.Sleep(100 * time.Millisecond)
	}
	return f, deleted
}

// everySnapshotReads checks with the row verifier that every snapshot the
// table's metadata lists reads.
func everySnapshotReads(t *testing.T, tbl *table.Table) {
	t.Helper()
	snaps := testenv.VerifyAll(t, strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	if len(snaps) != len(tbl.Metadata().Snapshots()) {
		t.Fatalf("the verifier read %d snapshots, the metadata lists %d", len(snaps), len(tbl.Metadata().Snapshots()))
	}
	for _, s := range snaps {
		if s.Error != "" {
			t.Fatalf("snapshot %s does not read: %s", s.SnapshotID, s.Error)
		}
	}
}

// stillHead is a table head that never moves: a paused writer.
type stillHead struct{}

func (stillHead) MetadataLocation(context.Context, table.Identifier) (string, error) {
	return "v1", nil
}

// A lease lost while a retry waits for the writer's next commit stops the
// run there: nothing is committed or deleted, the writer's snapshot stays.
func TestLostLeaseDuringTheRetrysWaitCommitsNothing(t *testing.T) {
	f, _, _, plan := history(t)
	other := f.handle(t)
	lost := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cat := &casLost{TableLoader: f.cat, writer: func() error {
		tbl, err := other.LoadTable(ctx, f.opt.Identifier())
		if err == nil {
			_, err = gen.Append(ctx, tbl, f.opt, 1, 100)
		}
		time.AfterFunc(100*time.Millisecond, func() { cancel(lost) }) // while the retry waits
		return err
	}}
	files := filesOnDisk(t, f.dir+"/wh")
	res, err := Execute(ctx, cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}, Head: stillHead{}})
	if !errors.Is(err, lost) || !strings.Contains(err.Error(), "nothing changed") || res.Committed || res.FilesDeleted() != 0 {
		t.Fatalf("want the run stopped before committing, got %v (%+v)", err, res)
	}
	if n := len(f.reload(t).Metadata().Snapshots()); n != len(f.tbl.Metadata().Snapshots())+1 {
		t.Fatalf("%d snapshots; want the %d planned on and the writer's", n, len(f.tbl.Metadata().Snapshots()))
	}
	for _, p := range files {
		if !exists(t, p) {
			t.Fatalf("%s was deleted", p)
		}
	}
}

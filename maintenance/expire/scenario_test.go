package expire

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
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

// A writer appends between planning and committing: the commit conflicts,
// is re-planned (never beyond the first plan) and retried; with no retries
// left it fails with ErrConflict and changes nothing.
func TestConcurrentAppendIsRetried(t *testing.T) {
	ctx := context.Background()
	for _, retries := range []int{0, 2} {
		f, _, before, plan := history(t)
		other := f.handle(t)
		cfg := strictConfig()
		cfg.CommitRetries = retries
		opts := Options{Deleter: &localDeleter{}, beforeCommit: func(attempt int) error {
			if attempt == 0 {
				tbl, err := other.LoadTable(ctx, f.opt.Identifier())
				if err != nil {
					return err
				}
				_, err = gen.Append(ctx, tbl, f.opt, 1, 100)
				return err
			}
			return nil
		}}
		loc := f.tbl.MetadataLocation()
		res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, opts)
		if retries == 0 {
			if !errors.Is(err, ErrConflict) || res.Committed || res.FilesDeleted() != 0 {
				t.Fatalf("want ErrConflict, got %v (%+v)", err, res)
			}
			if tbl := f.reload(t); len(tbl.Metadata().Snapshots()) != 7 || tbl.MetadataLocation() == loc {
				t.Fatal("want the writer's snapshot and nothing expired")
			}
			continue
		}
		if err != nil || res.CommitRetries != 1 || !slices.Equal(res.ExpiredSnapshotIDs, plan.ExpiredIDs()) {
			t.Fatalf("%v %+v", err, res)
		}
		after := f.reload(t)
		if len(after.Metadata().Snapshots()) != 2 {
			t.Fatalf("%d snapshots left, want the current and the writer's", len(after.Metadata().Snapshots()))
		}
		checkAfter(t, before, after, true)
	}
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

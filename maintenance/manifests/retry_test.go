package manifests

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// hookCatalog runs before ahead of each commit (a writer landing between
// the plan and the commit) and may answer a commit with an error after
// sending it (land) or without sending it.
type hookCatalog struct {
	*sqlcat.Catalog
	before func(n int)
	answer error // non-nil: the commit's answer is lost
	land   bool  // with answer: the commit went through first
	n      int
}

func (c *hookCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	c.n++
	if c.before != nil {
		c.before(c.n)
	}
	if c.answer != nil {
		if c.land {
			if _, _, err := c.Catalog.CommitTable(ctx, ident, reqs, updates); err != nil {
				return nil, "", err
			}
		}
		return nil, "", c.answer
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, updates)
}

var smallTable = gen.Options{Appends: 6, RowsPerAppend: 5, Partitions: 2}

// unreferenced lists the Avro files under the table's metadata folder that
// no snapshot of the current metadata references: what a run left behind.
func unreferenced(t *testing.T, tbl *table.Table, dir string) []string {
	t.Helper()
	fs, err := tbl.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		refs[strings.TrimPrefix(s.ManifestList, "file://")] = true
		list, err := s.Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			refs[strings.TrimPrefix(m.FilePath(), "file://")] = true
		}
	}
	var out []string
	for _, f := range testenv.Files(t, dir) {
		if filepath.Ext(f) == ".avro" && !refs[f] {
			out = append(out, f)
		}
	}
	return out
}

func reload(t *testing.T, cat *sqlcat.Catalog, tbl *table.Table) *table.Table {
	t.Helper()
	fresh, err := cat.LoadTable(t.Context(), tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	return fresh
}

// A writer's append lands between the plan and the commit: the commit is
// refused, and the same rewritten manifests are committed on the new head,
// beside the writer's manifest. Rows: the writer's are added, none lost.
func TestConcurrentAppend(t *testing.T) {
	ctx := context.Background()
	sc, tbl, dir := testenv.GeneratedTable(t, smallTable)
	entriesBefore, _ := liveEntries(t, tbl)
	cat := &hookCatalog{Catalog: sc}
	cat.before = func(n int) {
		if n == 1 {
			if _, err := gen.Append(ctx, reload(t, sc, tbl), smallTable, 1, smallTable.Appends); err != nil {
				t.Error(err)
			}
		}
	}
	plan, err := PlanTable(ctx, tbl, testConfig())
	if err != nil || plan.Empty() {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	res, err := Execute(ctx, cat, tbl, plan, testConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tbl = reload(t, sc, tbl)
	after := testenv.Verify(t, metadataFile(tbl))
	if after.LiveRows != 35 || res.CommitRetries != 1 || res.ManifestsBefore != 7 || res.ManifestsAfter != 2 {
		t.Fatalf("%d rows (want 35); result %+v", after.LiveRows, res)
	}
	entriesAfter, _ := liveEntries(t, tbl)
	for p, k := range entriesBefore {
		if entriesAfter[p] != k {
			t.Fatalf("entry %s was %+v, is %+v", p, k, entriesAfter[p])
		}
	}
	if left := unreferenced(t, tbl, dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// Another maintainer rewrites the same manifests between the plan and the
// commit: the retry finds its inputs gone, plans again on the new head,
// finds nothing to do, and removes the manifests it wrote.
func TestConcurrentRewrite(t *testing.T) {
	ctx := context.Background()
	sc, tbl, dir := testenv.GeneratedTable(t, smallTable)
	before := testenv.Verify(t, metadataFile(tbl))
	cat := &hookCatalog{Catalog: sc}
	cat.before = func(n int) {
		if n != 1 {
			return
		}
		other := reload(t, sc, tbl)
		p, err := PlanTable(ctx, other, testConfig())
		if err == nil {
			_, err = Execute(ctx, sc, other, p, testConfig(), Options{})
		}
		if err != nil {
			t.Error(err)
		}
	}
	plan, err := PlanTable(ctx, tbl, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, cat, tbl, plan, testConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID != 0 || res.CommitRetries != 1 || !strings.Contains(res.Superseded, "fewer than min_manifests") {
		t.Fatalf("result %+v", res)
	}
	unchanged(t, reload(t, sc, tbl), dir, before)
}

// A commit whose answer is lost: found by its run id when it landed; when
// it did not, the run fails as unknown and keeps what it wrote (it may be
// live), for the orphan pass to judge.
func TestCommitOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	for _, land := range []bool{true, false} {
		sc, tbl, dir := testenv.GeneratedTable(t, smallTable)
		cat := &hookCatalog{Catalog: sc, answer: errors.New("connection reset"), land: land}
		plan, err := PlanTable(ctx, tbl, testConfig())
		if err != nil {
			t.Fatal(err)
		}
		res, err := Execute(ctx, cat, tbl, plan, testConfig(), Options{})
		fresh := reload(t, sc, tbl)
		switch {
		case land && (err != nil || res.SnapshotID != fresh.CurrentSnapshot().SnapshotID):
			t.Fatalf("landed: %v, result %+v", err, res)
		case !land && !errors.Is(err, ErrCommitUnknown):
			t.Fatalf("not landed: %v; want ErrCommitUnknown", err)
		case !land && len(unreferenced(t, fresh, dir)) == 0:
			t.Fatal("not landed: the manifests written were removed although the commit may have landed")
		case !land && fresh.CurrentSnapshot().SnapshotID != plan.SnapshotID:
			t.Fatal("not landed: the table moved")
		}
	}
}

// Writers that keep winning exhaust the retries: the run fails with
// ErrConflict and leaves nothing behind.
func TestConflictsExhaustRetries(t *testing.T) {
	ctx := context.Background()
	sc, tbl, dir := testenv.GeneratedTable(t, smallTable)
	cat := &hookCatalog{Catalog: sc}
	next := smallTable.Appends
	cat.before = func(int) {
		if _, err := gen.Append(ctx, reload(t, sc, tbl), smallTable, 1, next); err != nil {
			t.Error(err)
		}
		next++
	}
	cfg := testConfig()
	cfg.CommitRetries = 2
	plan, err := PlanTable(ctx, tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, cat, tbl, plan, cfg, Options{})
	if !errors.Is(err, ErrConflict) || res.CommitRetries != 2 || res.SnapshotID != 0 {
		t.Fatalf("%v, result %+v; want ErrConflict after 2 retries", err, res)
	}
	tbl = reload(t, sc, tbl)
	if left := unreferenced(t, tbl, dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if s := tbl.CurrentSnapshot(); s.Summary.Operation == table.OpReplace || next != smallTable.Appends+3 {
		t.Fatalf("head %d: %+v after %d writer commits; want the third writer's append", s.SnapshotID, s.Summary, next-smallTable.Appends)
	}
}

// A run stopped (a lost lease, shutdown) before its commit is sent commits
// nothing and removes what it wrote: the outcome is known.
func TestStoppedBeforeCommit(t *testing.T) {
	sc, tbl, dir := testenv.GeneratedTable(t, smallTable)
	ctx, cancel := context.WithCancelCause(context.Background())
	cat := &hookCatalog{Catalog: sc}
	plan, err := PlanTable(ctx, tbl, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	// The table's IO is opened before the cancellation: the manifests are
	// written, then the commit is not sent.
	stop := errors.New("lease lost")
	cat.before = func(int) { t.Error("a commit was sent after the run was stopped") }
	e := &executor{cat: cat, cfg: testConfig(), opts: Options{RunID: "r"}, res: &Result{}, log: discard}
	out, err := e.rewrite(ctx, tbl, plan)
	if err != nil {
		t.Fatal(err)
	}
	cancel(stop)
	if err := e.commit(ctx, tbl, out, 0); !errors.Is(err, errStage) || !errors.Is(err, stop) {
		t.Fatalf("commit after the stop: %v", err)
	}
	e.discard(out)
	if left := unreferenced(t, reload(t, sc, tbl), dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// A plan made on a snapshot that is no longer the head of the table given
// to Execute (another maintainer rewrote the same manifests meanwhile): the
// rewrite is never committed there, where it would list every entry twice
// (or bring back files a writer removed); the run plans again on the head,
// finds nothing to do and leaves nothing behind.
func TestStalePlanNeverCommitted(t *testing.T) {
	ctx := context.Background()
	sc, tbl, dir := testenv.GeneratedTable(t, smallTable)
	before := testenv.Verify(t, metadataFile(tbl))
	plan, err := PlanTable(ctx, tbl, testConfig())
	if err != nil || plan.Empty() {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	other := reload(t, sc, tbl)
	p, err := PlanTable(ctx, other, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Execute(ctx, sc, other, p, testConfig(), Options{}); err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, sc, reload(t, sc, tbl), plan, testConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID != 0 || !strings.Contains(res.Superseded, "fewer than min_manifests") {
		t.Fatalf("result %+v", res)
	}
	unchanged(t, reload(t, sc, tbl), dir, before)
}

// unchanged fails unless tbl reads the rows of before and its metadata
// folder holds nothing that no snapshot references.
func unchanged(t *testing.T, tbl *table.Table, dir string, before testenv.VerifyResult) {
	t.Helper()
	if after := testenv.Verify(t, metadataFile(tbl)); after.LiveRows != before.LiveRows || after.Checksum != before.Checksum {
		t.Fatalf("rows %d %s, were %d %s", after.LiveRows, after.Checksum, before.LiveRows, before.Checksum)
	}
	if left := unreferenced(t, tbl, dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

package compact

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/sqlcatalog"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
)

// A retry after a conflict starts right after the other writer's next
// commit, read from the catalog's own row: the retry's base is the table
// as that commit left it, not as the commit that beat the first attempt
// left it. Against a writer committing once per period, a retry made at
// once has half a period on average, too little when the writer's commit
// costs what ours does.
func TestRetryStartsRightAfterTheWritersNextCommit(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 10, 20, 0)
	u := &upserter{cat: f.cat, ident: f.tbl.Identifier(), oracle: liveRows(t, f.tbl)}
	rows, err := sqlcatalog.Open(sqliteshim.ShimName, "sqlite", sqliteuri.DSN(filepath.Join(f.dir, "cat.db")), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cfg := testConfig()
	cfg.CommitRetries = 1
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		second *table.Snapshot // the writer's next commit
		werr   error
	)
	hook := hookCommits(t, f, func(attempt int) error {
		if attempt != 0 {
			return nil
		}
		// The writer beats the first attempt, and commits again a while
		// after: the retry must wait for that commit.
		if err := u.upsert(ctx, []int64{gen.EventID(0, 0)}, gen.EventID(1000, 0)); err != nil {
			return err
		}
		wg.Go(func() {
			time.Sleep(300 * time.Millisecond)
			if werr = u.upsert(ctx, []int64{gen.EventID(1, 0)}, gen.EventID(1000, 1)); werr != nil {
				return
			}
			tbl, err := f.cat.LoadTable(ctx, f.tbl.Identifier())
			if werr = err; err == nil {
				second = tbl.CurrentSnapshot()
			}
		})
		return nil
	})
	res, err := Execute(ctx, hook, hook.table(f.tbl), plan, cfg, Options{Head: rows})
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if err != nil || res.GroupsCommitted != len(plan.Groups) || res.CommitRetries != 1 || hook.attempts != 2 {
		t.Fatalf("err %v, %d of %d groups, %d retries, %d commits tried; want it landed at the second attempt",
			err, res.GroupsCommitted, len(plan.Groups), res.CommitRetries, hook.attempts)
	}
	ours := f.reload(t).SnapshotByID(res.Commits[0])
	if ours.ParentSnapshotID == nil || *ours.ParentSnapshotID != second.SnapshotID {
		t.Fatalf("the retry committed on snapshot %v, want the writer's next commit %d", ours.ParentSnapshotID, second.SnapshotID)
	}
	sameRows(t, "after the rewrite", liveRows(t, f.reload(t)), u.oracle)
}

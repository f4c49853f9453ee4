package compact

import (
	"context"
	"errors"
	"log/slog"
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

// fakeHead answers the i-th read with locs[min(i, len-1)], or err.
type fakeHead struct {
	mu    sync.Mutex
	locs  []string
	err   error
	reads int
}

func (h *fakeHead) MetadataLocation(ctx context.Context, _ table.Identifier) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := min(h.reads, len(h.locs)-1)
	h.reads++
	if h.err != nil {
		return "", h.err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return h.locs[i], nil
}

func TestAwaitTurn(t *testing.T) {
	f := newTable(t, 2, 5, 0)
	e := func(h HeadReader) *executor {
		return &executor{current: f.tbl, opts: Options{Head: h}, log: slog.New(slog.DiscardHandler)}
	}
	t.Run("goes once the head moves", func(t *testing.T) {
		h := &fakeHead{locs: []string{"v1", "v1", "v1", "v2"}}
		tu, ok := e(h).awaitTurn(t.Context(), 0)
		if !ok || !tu.moved || tu.reads != 4 || tu.waited >= turnWait {
			t.Fatalf("turn %+v ok %v; want it moved at the 4th read, before %v", tu, ok, turnWait)
		}
	})
	t.Run("a paused writer costs at most turnWait", func(t *testing.T) {
		h := &fakeHead{locs: []string{"v1"}}
		tu, ok := e(h).awaitTurn(t.Context(), 0)
		if !ok || tu.moved || tu.waited < turnWait-2*minHeadPoll || tu.waited > turnWait+500*time.Millisecond {
			t.Fatalf("turn %+v ok %v; want it given up after about %v", tu, ok, turnWait)
		}
		if tu.reads > int(turnWait/minHeadPoll)+1 {
			t.Fatalf("%d reads of the head in %v: more than one per %v", tu.reads, turnWait, minHeadPoll)
		}
	})
	t.Run("an unreadable head backs off", func(t *testing.T) {
		h := &fakeHead{locs: []string{"v1"}, err: errors.New("database is locked")}
		for attempt, want := range []time.Duration{0, 0, backoff(2)} {
			tu, ok := e(h).awaitTurn(t.Context(), attempt)
			if !ok || tu.moved || tu.waited < want || tu.waited > want+300*time.Millisecond {
				t.Fatalf("attempt %d: turn %+v ok %v; want the backoff %v", attempt, tu, ok, want)
			}
		}
	})
	t.Run("no head reader backs off", func(t *testing.T) {
		start := time.Now()
		if _, ok := e(nil).awaitTurn(t.Context(), 0); !ok || time.Since(start) > 300*time.Millisecond {
			t.Fatalf("ok %v after %v; want no wait on the first retry", ok, time.Since(start))
		}
	})
	t.Run("cancellation ends the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		if _, ok := e(&fakeHead{locs: []string{"v1"}}).awaitTurn(ctx, 0); ok || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("ok %v after %v; want false soon after the cancel", ok, time.Since(start))
		}
	})
}

package compact

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
)

// leaseClaimer claims partitions with leases of one in-process locker, as
// the maintainer claims them with Redis.
type leaseClaimer struct{ l *memlock.Locker }

func claimKey(partition string) string { return "test:part:" + partitionHash(partition) }

func (c leaseClaimer) Claim(ctx context.Context, partition string) (Claim, error) {
	le, err := lock.Acquire(ctx, c.l, claimKey(partition), lock.Options{TTL: time.Minute})
	if errors.Is(err, lock.ErrBusy) {
		return nil, fmt.Errorf("%w: %w", ErrClaimed, err)
	}
	return le, err
}

// sharedConfig commits each group on its own, as a backfill shared by
// replicas does.
func sharedConfig() Config {
	cfg := testConfig()
	cfg.PartialProgress = true
	cfg.MaxCommits = 100
	cfg.MaxConcurrentGroups = 1
	return cfg
}

// compactionSnapshots counts the compaction commits of the table's history
// and the input files they replaced, by path.
func compactionSnapshots(t *testing.T, f *fixture) (commits int, replaced map[string]int) {
	t.Helper()
	commits, replaced, err := testenv.CompactionHistory(t.Context(), f.reload(t))
	if err != nil {
		t.Fatal(err)
	}
	return commits, replaced
}

// expectLive fails the test unless every input file of g is still live.
func expectLive(t *testing.T, f *fixture, g Group, what string) {
	t.Helper()
	live := map[string]bool{}
	for _, df := range liveDataFiles(t, f.reload(t)) {
		live[df.FilePath()] = true
	}
	for _, tk := range g.files.tasks() {
		if !live[tk.File.FilePath()] {
			t.Errorf("%s of the %s partition was rewritten", tk.File.FilePath(), what)
		}
	}
}

// sharedTable is a table of three partitions of five small files, and the
// plan of its compaction, one group per partition.
func sharedTable(t *testing.T) (*fixture, Config, *Plan) {
	t.Helper()
	f := newTable(t, 15, 50, 3)
	cfg := sharedConfig()
	plan, err := PlanTable(t.Context(), f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return f, cfg, plan
}

// Two runs planned from one snapshot share the table: the second starts
// while the first rewrites its first group. Each partition is compacted by
// exactly one of them, and neither fails a group: the second skips the
// partition the first holds, and the first skips those the second
// committed after its plan.
func TestTwoRunsOnOneTableTakeDisjointPartitions(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 24, 50, 4)
	cfg := sharedConfig()
	claimer := leaseClaimer{memlock.New()}
	planA, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	planB, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(planA.Groups) != 4 {
		t.Fatalf("plan has %d groups, want 4", len(planA.Groups))
	}
	var resB *Result
	var once sync.Once
	paths := wrapPaths(defaultPaths(), func(_ string, _ *groupInput, rewrite func() ([]iceberg.DataFile, int64, error)) ([]iceberg.DataFile, int64, error) {
		once.Do(func() {
			var err error
			resB, err = Execute(ctx, f.cat, f.tbl, planB, cfg, Options{RunID: "B", Claims: claimer})
			if err != nil {
				t.Errorf("run B: %v", err)
			}
		})
		return rewrite()
	})
	resA, err := execute(ctx, f.cat, f.tbl, planA, cfg, Options{RunID: "A", Claims: claimer}, paths)
	if err != nil {
		t.Fatalf("run A: %v", err)
	}
	if resA.GroupsCommitted != 1 || resA.GroupsClaimedElsewhere != 3 || resB.GroupsCommitted != 3 || resB.GroupsClaimedElsewhere != 1 {
		t.Fatalf("A committed %d and left %d, B committed %d and left %d; want 1/3 and 3/1",
			resA.GroupsCommitted, resA.GroupsClaimedElsewhere, resB.GroupsCommitted, resB.GroupsClaimedElsewhere)
	}
	tbl := f.reload(t)
	if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
	}
	if n := len(liveDataFiles(t, tbl)); n != 4 {
		t.Fatalf("%d live data files, want one per partition", n)
	}
	commits, replaced := compactionSnapshots(t, f)
	if commits != 4 || len(replaced) != 24 {
		t.Fatalf("%d compaction commits replacing %d files, want 4 replacing 24", commits, len(replaced))
	}
	for p, n := range replaced {
		if n != 1 {
			t.Errorf("%s replaced %d times", p, n)
		}
	}
}

// A partition whose claim another replica holds is left alone: its files
// stay live, and the run does not fail.
func TestHeldPartitionIsSkipped(t *testing.T) {
	ctx := context.Background()
	f, cfg, plan := sharedTable(t)
	l := memlock.New()
	held := plan.Groups[0]
	if _, err := l.TryLock(ctx, claimKey(held.key), time.Minute); err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{Claims: leaseClaimer{l}})
	if err != nil {
		t.Fatal(err)
	}
	if res.GroupsCommitted != 2 || res.GroupsClaimedElsewhere != 1 || len(res.GroupsFailed) != 0 {
		t.Fatalf("result %+v, want 2 committed and 1 left", res)
	}
	expectLive(t, f, held, "held")
}

// fakeClaim is a claim the test loses on purpose, as a lease whose
// extension failed.
type fakeClaim struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	lost   error
}

func (c *fakeClaim) Context() context.Context { return c.ctx }
func (c *fakeClaim) Lost() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}
func (c *fakeClaim) Release(context.Context) error { c.cancel(nil); return nil }
func (c *fakeClaim) lose() {
	c.mu.Lock()
	c.lost = fmt.Errorf("test: %w", lock.ErrLost)
	c.mu.Unlock()
	c.cancel(c.lost)
}

type fakeClaimer struct {
	mu     sync.Mutex
	claims map[string]*fakeClaim
}

func (f *fakeClaimer) Claim(ctx context.Context, partition string) (Claim, error) {
	c := &fakeClaim{}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims[partition] = c
	return c, nil
}

func (f *fakeClaimer) of(partition string) *fakeClaim {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claims[partition]
}

// A claim lost after its group was rewritten stops that group before its
// commit: its inputs stay live, its written files are removed, and the
// other groups still land.
func TestLostClaimStopsItsGroupBeforeCommit(t *testing.T) {
	ctx := context.Background()
	f, cfg, plan := sharedTable(t)
	before := parquetFiles(t, f.dir)
	victim := plan.Groups[1]
	claimer := &fakeClaimer{claims: map[string]*fakeClaim{}}
	paths := wrapPaths(defaultPaths(), func(_ string, in *groupInput, rewrite func() ([]iceberg.DataFile, int64, error)) ([]iceberg.DataFile, int64, error) {
		files, rows, err := rewrite()
		if err == nil && in.g.key == victim.key {
			claimer.of(victim.key).lose()
		}
		return files, rows, err
	})
	res, err := execute(ctx, f.cat, f.tbl, plan, cfg, Options{Claims: claimer}, paths)
	if err == nil || !errors.Is(err, lock.ErrLost) {
		t.Fatalf("err %v, want the lost claim", err)
	}
	if res.GroupsCommitted != 2 || len(res.GroupsFailed) != 1 || res.GroupsFailed[0].Partition != victim.Partition {
		t.Fatalf("result %+v, want 2 committed and %s failed", res, victim.Partition)
	}
	expectLive(t, f, victim, "lost")
	if after := parquetFiles(t, f.dir); len(after) != len(before)+res.FilesWritten {
		t.Errorf("%d parquet files on disk, want the %d before and the %d committed: the lost group's are left",
			len(after), len(before), res.FilesWritten)
	}
	if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
	}
}

// The commit gate is held around every commit, and a gate that cannot be
// entered commits nothing and removes what the batch wrote.
type recordingGate struct {
	mu      sync.Mutex
	inside  bool
	entered int
	fail    error
}

func (g *recordingGate) Enter(ctx context.Context) (context.Context, func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return nil, nil, g.fail
	}
	g.inside = true
	g.entered++
	return ctx, func() { g.mu.Lock(); g.inside = false; g.mu.Unlock() }, nil
}

func (g *recordingGate) in() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside
}

func TestCommitsHappenInsideTheGate(t *testing.T) {
	ctx := context.Background()
	f, cfg, plan := sharedTable(t)
	gate := &recordingGate{}
	outside := 0
	hook := hookCommits(t, f, func(int) error {
		if !gate.in() {
			outside++
		}
		return nil
	})
	res, err := Execute(ctx, hook, hook.table(f.tbl), plan, cfg, Options{Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) != 3 || gate.entered != 3 || outside != 0 {
		t.Fatalf("%d commits, gate entered %d times, %d commits outside it", len(res.Commits), gate.entered, outside)
	}

	f2, _, plan2 := sharedTable(t)
	before := parquetFiles(t, f2.dir)
	busy := &recordingGate{fail: fmt.Errorf("table lease: %w", lock.ErrBusy)}
	res, err = Execute(ctx, f2.cat, f2.tbl, plan2, cfg, Options{Gate: busy})
	if !errors.Is(err, lock.ErrBusy) || res.GroupsCommitted != 0 || len(res.GroupsFailed) != 3 {
		t.Fatalf("err %v, result %+v; want every group failed on the busy gate", err, res)
	}
	if after := parquetFiles(t, f2.dir); len(after) != len(before) {
		t.Fatalf("%d parquet files on disk after, %d before: the batch's files were left", len(after), len(before))
	}
}

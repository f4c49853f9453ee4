package maintenance

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

const tableName = "demo.events"

// env is a generated table with a runner over it.
type env struct {
	cat    Catalog
	tbl    *table.Table
	opt    gen.Options
	reg    *prometheus.Registry
	state  trigger.Store
	policy Policy
}

func newEnv(t *testing.T, appends int) *env {
	t.Helper()
	opt := gen.Options{Appends: appends, RowsPerAppend: 500, Partitions: 1, Seed: 3}
	cat, tbl, _ := testenv.GeneratedTable(t, opt)
	ex := expire.DefaultConfig()
	ex.Enabled = false
	or := orphans.DefaultConfig()
	or.Enabled = false
	return &env{cat: cat, tbl: tbl, opt: opt, reg: prometheus.NewRegistry(), state: trigger.NewMemStore(),
		policy: Policy{Compact: compact.DefaultConfig(), Expire: ex, Orphans: or,
			Triggers: map[string]trigger.Config{TaskCompact: {CommitCount: 5}}}}
}

func (e *env) runner(t *testing.T, locker lock.Locker, now func() time.Time) *Runner {
	t.Helper()
	return NewRunner(Deps{
		Catalog:  e.cat,
		Policy:   func(string, iceberg.Properties) (Policy, error) { return e.policy, nil },
		Selected: func(string) bool { return true },
		Locker:   locker,
		LockTTL:  3 * time.Second,
		State:    e.state,
		Metrics:  NewMetrics(e.reg, metrics.NewTables(true, 10)),
		Now:      now,
	})
}

func (e *env) appendN(t *testing.T, n int) {
	t.Helper()
	tbl, err := e.cat.LoadTable(t.Context(), e.opt.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Append(t.Context(), tbl, e.opt, n, gen.NextAppendIndex(tbl)); err != nil {
		t.Fatal(err)
	}
}

func (e *env) current(t *testing.T) *table.Snapshot {
	t.Helper()
	tbl, err := e.cat.LoadTable(t.Context(), e.opt.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	return tbl.CurrentSnapshot()
}

func one(t *testing.T, outs []Outcome, task string) Outcome {
	t.Helper()
	for _, o := range outs {
		if o.Task == task {
			return o
		}
	}
	t.Fatalf("no %s outcome in %+v", task, outs)
	return Outcome{}
}

func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// Writers' commits make compaction due; its own commit does not count; the
// state remembers where the count starts; metrics follow each step.
func TestTriggerCountsWritersCommitsOnly(t *testing.T) {
	e := newEnv(t, 6)
	r := e.runner(t, memlock.New(), nil)
	ident := e.opt.Identifier()
	req := Request{Tasks: []string{TaskCompact}}

	if h := r.Health(t.Context(), ident); h.SmallFiles != 6 || h.CompactableFiles != 6 {
		t.Fatalf("health before: %d small, %d compactable; want 6 and 6", h.SmallFiles, h.CompactableFiles)
	}
	o := one(t, r.RunTable(t.Context(), ident, req), TaskCompact)
	if o.Status != StatusSucceeded || !strings.Contains(o.Trigger, "commit") {
		t.Fatalf("first run (6 commits, commit_count 5): %+v", o)
	}
	// One small file left alone in its partition: small, not compactable.
	if got, want := counter(t, r.metrics.healthSmall.WithLabelValues(tableName)), 1.0; got != want {
		t.Errorf("table_small_files after compaction = %v; want %v", got, want)
	}
	if got := counter(t, r.metrics.healthCompact.WithLabelValues(tableName)); got != 0 {
		t.Errorf("table_compactable_files after compaction = %v; want 0", got)
	}
	if op := e.current(t).Summary.Properties[tableprops.SummaryOperation]; op != "compact" {
		t.Fatalf("current snapshot is not the compaction's: %v", e.current(t).Summary)
	}

	// The compaction commit is not a writer's commit: nothing is due.
	o = one(t, r.RunTable(t.Context(), ident, req), TaskCompact)
	if o.Status != StatusNotDue || !strings.Contains(o.Reason, "0/5") {
		t.Fatalf("right after compaction: %+v", o)
	}
	e.appendN(t, 4)
	o = one(t, r.RunTable(t.Context(), ident, req), TaskCompact)
	if o.Status != StatusNotDue || !strings.Contains(o.Reason, "4/5") {
		t.Fatalf("after 4 appends: %+v", o)
	}
	e.appendN(t, 1)
	o = one(t, r.RunTable(t.Context(), ident, req), TaskCompact)
	if o.Status != StatusSucceeded {
		t.Fatalf("after 5 appends: %+v", o)
	}
	// A dry run shows the decision but records nothing.
	e.appendN(t, 5)
	o = one(t, r.RunTable(t.Context(), ident, Request{Tasks: []string{TaskCompact}, DryRun: true}), TaskCompact)
	if o.Status != StatusPlanned {
		t.Fatalf("plan after 5 more appends: %+v", o)
	}
	st, _ := e.state.Load(t.Context(), tableName, TaskCompact)
	if st.LastResult != ResultSuccess || st.LastRun.IsZero() {
		t.Errorf("state after runs: %+v", st)
	}

	m := r.metrics
	if got := counter(t, m.runs.WithLabelValues(tableName, TaskCompact, ResultSuccess)); got != 2 {
		t.Errorf("runs_total success = %v; want 2", got)
	}
	if got := counter(t, m.runs.WithLabelValues(tableName, TaskCompact, ResultSkipped)); got != 2 {
		t.Errorf("runs_total skipped = %v; want 2 (the plan is not a run)", got)
	}
	if got := counter(t, m.filesIn.WithLabelValues(tableName)); got != 6+5+1 {
		// 6 files, then the 1 compacted file with 5 new ones.
		t.Errorf("rewritten_files_total = %v; want 12", got)
	}
	if got := counter(t, m.lockAcquire.WithLabelValues("acquired")); got != 4 {
		t.Errorf("lock acquisitions = %v; want 4 (not for the plan)", got)
	}
	if got := counter(t, m.healthFiles.WithLabelValues(tableName)); got != 1 {
		t.Errorf("table_data_files after the second compaction = %v; want 1 (measured after the run)", got)
	}
	if got := counter(t, m.lastSuccess.WithLabelValues(tableName, TaskCompact)); got == 0 {
		t.Error("last_success_timestamp_seconds not set")
	}
}

// A manual request skips the thresholds but honours the rate limit; force
// skips both.
func TestManualAndForce(t *testing.T) {
	e := newEnv(t, 2)
	e.policy.Triggers[TaskCompact] = trigger.Config{CommitCount: 100, RateLimit: time.Hour}
	e.policy.Compact.MinInputFiles = 2
	r := e.runner(t, memlock.New(), nil)
	ident := e.opt.Identifier()
	tasks := []string{TaskCompact}

	if o := one(t, r.RunTable(t.Context(), ident, Request{Tasks: tasks}), TaskCompact); o.Status != StatusNotDue {
		t.Fatalf("2 of 100 commits: %+v", o)
	}
	o := one(t, r.RunTable(t.Context(), ident, Request{Tasks: tasks, Manual: true, Why: "alert SmallFiles"}), TaskCompact)
	if o.Status != StatusSucceeded || o.Trigger != "alert SmallFiles" {
		t.Fatalf("manual request: %+v", o)
	}
	e.appendN(t, 2)
	o = one(t, r.RunTable(t.Context(), ident, Request{Tasks: tasks, Manual: true, Why: "again"}), TaskCompact)
	if o.Status != StatusNotDue || !strings.Contains(o.Reason, "rate") {
		t.Fatalf("manual request within the rate limit: %+v", o)
	}
	o = one(t, r.RunTable(t.Context(), ident, Request{Tasks: tasks, Force: true}), TaskCompact)
	if o.Status != StatusSucceeded || !strings.Contains(o.Trigger, "forced") {
		t.Fatalf("forced: %+v", o)
	}
}

// A table another holder has leased reports busy and changes nothing.
func TestBusyTable(t *testing.T) {
	e := newEnv(t, 6)
	locker := memlock.New()
	r := e.runner(t, locker, nil)
	h, err := locker.TryLock(t.Context(), r.lockKey(tableName), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := e.current(t).SnapshotID
	outs := r.RunTable(t.Context(), e.opt.Identifier(), Request{})
	for _, o := range outs {
		if o.Status != StatusBusy {
			t.Errorf("%s: %+v; want busy", o.Task, o)
		}
	}
	if e.current(t).SnapshotID != before {
		t.Error("a busy run changed the table")
	}
	if got := counter(t, r.metrics.runs.WithLabelValues(tableName, TaskCompact, ResultBusy)); got != 1 {
		t.Errorf("runs_total busy = %v", got)
	}
	if st, _ := e.state.Load(t.Context(), tableName, TaskCompact); !st.LastAttempt.IsZero() {
		t.Errorf("a busy run recorded state: %+v", st)
	}
	_ = h.Release(t.Context())
	if o := one(t, r.RunTable(t.Context(), e.opt.Identifier(), Request{}), TaskCompact); o.Status != StatusSucceeded {
		t.Errorf("after release: %+v", o)
	}
}

// losingLocker is memlock whose extensions fail once armed, as when Redis
// lost the key or another holder took it.
type losingLocker struct {
	*memlock.Locker
	armed atomic.Bool
}

func (l *losingLocker) TryLock(ctx context.Context, key string, ttl time.Duration) (lock.Handle, error) {
	h, err := l.Locker.TryLock(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return &losingHandle{Handle: h, l: l}, nil
}

type losingHandle struct {
	lock.Handle
	l *losingLocker
}

func (h *losingHandle) Extend(ctx context.Context) error {
	if h.l.armed.Load() {
		return lock.ErrLost
	}
	return h.Handle.Extend(ctx)
}

// lossAfterCompaction makes the lease be lost right after compaction
// committed: the runner's re-load that follows the compaction waits until
// the (armed) extension has failed and the lease context is cancelled.
type lossAfterCompaction struct {
	Catalog
	locker *losingLocker
}

func (c *lossAfterCompaction) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(context.WithoutCancel(ctx), ident)
	if err != nil || tbl.CurrentSnapshot() == nil || tbl.CurrentSnapshot().Summary.Properties[tableprops.SummaryOperation] != "compact" {
		return tbl, err
	}
	if !c.locker.armed.Swap(true) {
		select {
		case <-ctx.Done(): // the lease context, cancelled by the failed extension
		case <-time.After(30 * time.Second):
			return nil, errors.New("test: the lease was never lost")
		}
	}
	return tbl, nil
}

// A lease lost while a task runs stops the run before its next commit or
// delete: here it is lost just after compaction committed, and the expiry
// after it must not commit or delete anything.
func TestLostLeaseStopsBeforeNextCommit(t *testing.T) {
	e := newEnv(t, 6)
	e.policy.Expire = expire.DefaultConfig()
	e.policy.Expire.RetainLast, e.policy.Expire.MaxSnapshotAge = 1, time.Millisecond
	e.policy.Triggers[TaskExpire] = trigger.Config{}
	locker := &losingLocker{Locker: memlock.New()}
	e.cat = &lossAfterCompaction{Catalog: e.cat, locker: locker}
	r := e.runner(t, locker, nil)
	snapsBefore := len(e.tbl.Metadata().Snapshots())

	outs := r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact, TaskExpire}, Force: true})
	for _, o := range outs {
		t.Logf("%s: %s %s trigger=%q err=%v", o.Task, o.Status, o.Reason, o.Trigger, o.Err())
	}
	ex := one(t, outs, TaskExpire)
	if ex.Status != StatusFailed || !errors.Is(ex.Err(), lock.ErrLost) {
		t.Fatalf("expire after the lease was lost: %+v (err %v); want failed with ErrLost", ex, ex.Err())
	}
	tbl, err := e.cat.LoadTable(t.Context(), e.opt.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	// Compaction added one snapshot; expiry removed none.
	if got := len(tbl.Metadata().Snapshots()); got != snapsBefore+1 {
		t.Errorf("snapshots = %d; want %d (no expiry after the lease was lost)", got, snapsBefore+1)
	}
	if got := counter(t, r.metrics.lockLosses); got != 1 {
		t.Errorf("lock_losses_total = %v; want 1", got)
	}
	if got := counter(t, r.metrics.runs.WithLabelValues(tableName, TaskExpire, ResultCanceled)); got != 1 {
		t.Errorf("runs_total{expire,canceled} = %v; want 1", got)
	}
	if st, _ := e.state.Load(t.Context(), tableName, TaskExpire); !st.LastAttempt.IsZero() {
		t.Errorf("a cancelled task recorded trigger state: %+v", st)
	}
}

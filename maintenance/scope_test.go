package maintenance

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// A scoped run plans only the files its where (relative dates resolved at
// the runner's now) may match, and the config's where still holds: the two
// are ANDed, so a request cannot widen what the config lets compaction touch.
func TestScopedRunPlansOnlyMatchingFiles(t *testing.T) {
	opt := gen.Options{Appends: 10, RowsPerAppend: 100, Partitions: 2, Seed: 5} // days 2024-01-01 and 2024-01-02
	cat, _, _ := testenv.GeneratedTable(t, opt)
	e := newEnv(t, 1)
	e.cat, e.opt = cat, opt
	now := time.Date(2024, 1, 3, 6, 0, 0, 0, time.UTC)
	r := e.runner(t, memlock.New(), func() time.Time { return now })
	req := Request{Tasks: []string{TaskCompact}, DryRun: true, Force: true, Where: "event_time >= current_date - 1"}

	o := one(t, r.RunTable(t.Context(), opt.Identifier(), req), TaskCompact)
	c := o.Compact
	if o.Status != StatusPlanned || c == nil || c.Where != "event_time >= DATE '2024-01-02'" || c.FilesIn != 5 ||
		len(c.Groups) != 1 || !strings.Contains(c.Groups[0].Partition, "2024-01-02") {
		t.Fatalf("scoped plan: %+v %+v; want yesterday's 5 files alone, where resolved", o, c)
	}

	e.policy.Compact.Where = "event_time < '2024-01-02'"
	o = one(t, r.RunTable(t.Context(), opt.Identifier(), req), TaskCompact)
	if c := o.Compact; c == nil || c.Where != "(event_time < '2024-01-02') AND (event_time >= DATE '2024-01-02')" || c.FilesIn != 0 {
		t.Fatalf("config where and request where: %+v %+v; want both to hold, nothing to rewrite", o, o.Compact)
	}
	// Unscoped, the config's where alone.
	req.Where = ""
	o = one(t, r.RunTable(t.Context(), opt.Identifier(), req), TaskCompact)
	if c := o.Compact; c == nil || c.Where != "event_time < '2024-01-02'" || c.FilesIn != 5 {
		t.Fatalf("config where alone: %+v %+v; want 2024-01-01's 5 files", o, o.Compact)
	}

	// A scoped run that compacts records its attempt (the rate limit
	// applies) but not a run: the trigger keeps counting the writers'
	// commits elsewhere in the table toward the next unscoped run.
	e.policy.Compact.Where = ""
	e.policy.Compact.MinInputFiles = 2
	o = one(t, r.RunTable(t.Context(), opt.Identifier(), Request{Tasks: []string{TaskCompact}, Force: true, Where: "event_time >= current_date - 1"}), TaskCompact)
	if o.Status != StatusSucceeded || o.Compact.FilesIn != 5 {
		t.Fatalf("scoped run: %+v %+v; want 5 files rewritten", o, o.Compact)
	}
	st, err := e.state.Load(t.Context(), tableName, TaskCompact)
	if err != nil {
		t.Fatal(err)
	}
	if !st.LastAttempt.Equal(now) || !st.LastRun.IsZero() || st.SnapshotID != 0 {
		t.Errorf("trigger state after a scoped run: %+v; want the attempt recorded, no run", st)
	}
}

// A scoped request is queued apart from an unscoped one for the same table,
// and merged only with one of the same where; a held scoped task keeps its
// where; a where that does not parse, or on tasks without compaction, is
// refused and nothing is queued.
func TestScopedRequestsKeepTheirScope(t *testing.T) {
	e := newEnv(t, 3)
	e.policy.Expire.Enabled = true
	e.policy.Triggers[TaskCompact] = trigger.Config{CommitCount: 100}
	e.policy.Triggers[TaskExpire] = trigger.Config{CommitCount: 100, RateLimit: time.Hour}
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	e.ranAt(t, TaskExpire, now.Add(-10*time.Minute)) // within its rate limit
	s := newScheduler(t, e.runner(t, memlock.New(), func() time.Time { return now }), time.Second)
	ctx := t.Context()
	s.poll(ctx)
	const where = "event_time >= current_date - 1"

	for _, bad := range []TableRequest{
		{Table: tableName, Where: "event_time >= current_date -"},
		{Table: tableName, Tasks: []string{TaskExpire}, Where: where},
	} {
		if _, err := s.Enqueue(ctx, bad); !errors.Is(err, ErrBadScope) {
			t.Errorf("Enqueue(%+v) = %v; want ErrBadScope", bad, err)
		}
	}
	if q := s.Status().Queue; len(q) != 0 {
		t.Fatalf("refused requests queued %+v", q)
	}

	plain, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskCompact}, Source: "http"})
	if err != nil || plain.State != EnqueueQueued || plain.Position != 1 {
		t.Fatalf("unscoped: %+v, %v", plain, err)
	}
	scoped, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskCompact}, Where: where, Source: "http"})
	if err != nil || scoped.State != EnqueueQueued || scoped.Duplicate || scoped.Position != 2 {
		t.Fatalf("scoped after unscoped: %+v, %v; want its own entry at 2", scoped, err)
	}
	again, err := s.Enqueue(ctx, TableRequest{Table: tableName, Where: " " + where, Source: "alertmanager"})
	if err != nil || again.State != EnqueueMerged || again.Position != 2 {
		t.Fatalf("same where again: %+v, %v; want merged into entry 2", again, err)
	}
	st := s.Status()
	if len(st.Queue) != 2 || st.Queue[0].Where != "" || st.Queue[1].Where != where ||
		!slices.Equal(st.Queue[1].Sources, []string{"http", "alertmanager"}) {
		t.Fatalf("queue %+v; want the unscoped entry, then the scoped one", st.Queue)
	}
	if len(st.Held) != 1 || st.Held[0].Task != TaskExpire || st.Held[0].Where != where {
		t.Fatalf("held %+v; want the scoped request's expire, held by its rate limit, with its where", st.Held)
	}
}

// ranAt records in the trigger state that task ran successfully at.
func (e *env) ranAt(t *testing.T, task string, at time.Time) {
	t.Helper()
	if err := e.state.Save(t.Context(), tableName, task, trigger.State{LastRun: at, LastAttempt: at, LastResult: "succeeded"}); err != nil {
		t.Fatal(err)
	}
}

// A task's window holds back the poll and a requested run (which waits for
// the window to open), status says when it opens; a forced run ignores it.
func TestWindowHoldsRequestsForceOverrides(t *testing.T) {
	e := newEnv(t, 3)
	e.policy.Compact.MinInputFiles = 2
	e.policy.Triggers[TaskCompact] = trigger.Config{CommitCount: 1, Window: "Mon-Fri 01:00-05:00"}
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC) // a Monday, noon
	opens := time.Date(2026, 3, 3, 1, 0, 0, 0, time.UTC)
	r := e.runner(t, memlock.New(), func() time.Time { return now })
	ctx := t.Context()
	ident := e.opt.Identifier()

	due, _, err := r.DueTasks(ctx, ident, false)
	if err != nil || len(due) != 0 {
		t.Fatalf("DueTasks outside the window = %v, %v; want none", due, err)
	}
	s := newScheduler(t, r, time.Second)
	s.poll(ctx)
	if q := s.Status().Queue; len(q) != 0 {
		t.Fatalf("the poll queued %+v outside the window", q)
	}
	enq, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskCompact}, Source: "http"})
	if err != nil || enq.State != EnqueueHeld || len(enq.Held) != 1 || !enq.Held[0].Until.Equal(opens) {
		t.Fatalf("requested outside the window: %+v, %v; want held until %s", enq, err, opens)
	}
	h := r.Health(ctx, ident)
	if i := slices.IndexFunc(h.Tasks, func(s TaskState) bool { return s.Task == TaskCompact }); i < 0 ||
		h.Tasks[i].Window != "outside window Mon-Fri 01:00-05:00, next opens at 2026-03-03 01:00 UTC (in 13h)" {
		t.Errorf("status tasks %+v; want compact's window closed until 2026-03-03 01:00 UTC", h.Tasks)
	}
	o := one(t, r.RunTable(ctx, ident, Request{Tasks: []string{TaskCompact}, Manual: true, Why: "alert"}), TaskCompact)
	if o.Status != StatusNotDue || !strings.Contains(o.Reason, "outside window Mon-Fri 01:00-05:00, next opens at 2026-03-03 01:00 UTC") {
		t.Fatalf("manual run outside the window: %+v", o)
	}
	o = one(t, r.RunTable(ctx, ident, Request{Tasks: []string{TaskCompact}, Force: true}), TaskCompact)
	if o.Status != StatusSucceeded {
		t.Fatalf("forced run outside the window: %+v; want succeeded", o)
	}
}

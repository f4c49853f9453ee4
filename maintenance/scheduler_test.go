package maintenance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/lock/memlock"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

func newScheduler(t *testing.T, r *Runner, grace time.Duration) *Scheduler {
	t.Helper()
	cfg := DefaultSchedulerConfig()
	cfg.PollInterval, cfg.ShutdownGrace = time.Hour, grace
	s, err := NewScheduler(cfg, SchedulerDeps{Runner: r, Metrics: r.metrics, Now: r.now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The queue merges requests per table, refuses unknown tables and tasks,
// and the poll queues due tables.
func TestSchedulerQueue(t *testing.T) {
	e := newEnv(t, 3) // 3 commits: below commit_count 5
	e.policy.Triggers[TaskCompact] = trigger.Config{CommitCount: 5}
	e.policy.Triggers[TaskExpire] = trigger.Config{CommitCount: 2} // due
	e.policy.Expire.Enabled = true
	s := newScheduler(t, e.runner(t, memlock.New(), nil), time.Second)
	ctx := t.Context()

	if _, err := s.Enqueue(ctx, TableRequest{Table: tableName, Source: "http"}); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("before the first poll: %v; want ErrUnknownTable", err)
	}
	s.poll(ctx)
	// The poll measured the table's health from the table it loaded.
	if got := counter(t, s.metrics.healthFiles.WithLabelValues(tableName)); got != 3 {
		t.Errorf("table_data_files after the first poll = %v; want 3", got)
	}
	st := s.Status()
	if st.Tables != 1 || len(st.Queue) != 1 || !slices.Equal(st.Queue[0].Tasks, []string{TaskExpire}) {
		t.Fatalf("after the poll: %+v; want expire queued (compact is not due)", st)
	}
	q, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskCompact}, Reason: "alert X", Source: "alertmanager"})
	if err != nil || !q.Duplicate || !slices.Equal(q.Tasks, []string{TaskCompact, TaskExpire}) {
		t.Fatalf("merge: %+v, %v", q, err)
	}
	if _, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{"vacuum"}}); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("unknown task: %v", err)
	}
	if _, err := s.Enqueue(ctx, TableRequest{Table: "demo.nope"}); !errors.Is(err, ErrUnknownTable) {
		t.Errorf("unknown table: %v", err)
	}
	st = s.Status()
	if len(st.Queue) != 1 || !st.Queue[0].Manual || !slices.Contains(st.Queue[0].Sources, "alertmanager") {
		t.Errorf("queue after merge: %+v", st.Queue)
	}
	if got := counter(t, e.runnerMetrics(s).triggers.WithLabelValues("poll", "queued")); got != 1 {
		t.Errorf("trigger_requests_total{poll,queued} = %v", got)
	}
}

func (e *env) runnerMetrics(s *Scheduler) *Metrics { return s.metrics }

// blockingLoads holds the runner's table loads until their context ends,
// as a task that outlives the shutdown grace would.
type blockingLoads struct {
	Catalog
	started chan struct{}
}

func (b *blockingLoads) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// On shutdown the scheduler takes no more work, gives running tasks the
// grace period, then cancels them and returns with every lease released.
func TestSchedulerShutdownCancelsAfterGrace(t *testing.T) {
	e := newEnv(t, 6)
	real := e.cat
	blocking := &blockingLoads{Catalog: real, started: make(chan struct{}, 1)}
	locker := memlock.New()
	r := e.runner(t, locker, nil)
	s := newScheduler(t, r, 200*time.Millisecond)
	s.poll(t.Context()) // learns the table (and queues compaction: never run)
	if len(s.Status().Queue) != 1 {
		t.Fatalf("nothing queued: %+v", s.Status())
	}
	r.cat = blocking

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-blocking.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the queued table never started")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the grace period")
	}
	if !s.Stopping() {
		t.Error("Stopping() = false after shutdown")
	}
	if _, err := s.Enqueue(t.Context(), TableRequest{Table: tableName}); !errors.Is(err, ErrStopping) {
		t.Errorf("Enqueue after shutdown: %v; want ErrStopping", err)
	}
	h, err := locker.TryLock(t.Context(), r.lockKey(tableName), time.Minute)
	if err != nil {
		t.Fatalf("the lease was not released: %v", err)
	}
	_ = h.Release(t.Context())
	recent := s.Status().Recent
	if len(recent) == 0 || recent[0].Status != StatusFailed {
		t.Fatalf("recent runs: %+v", recent)
	}
	if got := counter(t, r.metrics.runs.WithLabelValues(tableName, TaskCompact, ResultCanceled)); got != 1 {
		t.Errorf("runs_total{canceled} = %v; want 1 (a cancelled run is not a failure)", got)
	}
}

// A requested run that finds its table leased by another maintainer is
// tried again a poll later, instead of being dropped with a 202 answered.
func TestSchedulerRetriesBusyRequest(t *testing.T) {
	e := newEnv(t, 6)
	e.policy.Triggers[TaskCompact] = trigger.Config{CommitCount: 1000} // never due by itself
	locker := memlock.New()
	r := e.runner(t, locker, nil)
	cfg := DefaultSchedulerConfig()
	cfg.PollInterval = 100 * time.Millisecond
	s, err := NewScheduler(cfg, SchedulerDeps{Runner: r, Metrics: r.metrics, Now: r.now})
	if err != nil {
		t.Fatal(err)
	}
	other, err := locker.TryLock(t.Context(), r.lockKey(tableName), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitUntil := func(what string, ok func(Status) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok(s.Status()) {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s: %+v", what, s.Status())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("the first poll", func(st Status) bool { return st.Tables == 1 })
	if _, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskCompact}, Reason: "alert X", Source: "alertmanager"}); err != nil {
		t.Fatal(err)
	}
	waitUntil("a busy outcome", func(st Status) bool {
		return slices.ContainsFunc(st.Recent, func(r RecentRun) bool { return r.Status == StatusBusy })
	})
	if err := other.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil("the retried compaction", func(st Status) bool {
		return slices.ContainsFunc(st.Recent, func(r RecentRun) bool {
			return r.Task == TaskCompact && r.Status == StatusSucceeded && r.Trigger == "alert X"
		})
	})
}

// A request's answer says when its run happens: a task that ran within its
// rate_limit is held until the limit ends (unless forced), a fresh request
// is queued at a position, and a second one is merged into it.
func TestEnqueueSaysWhenTheRunHappens(t *testing.T) {
	e := newEnv(t, 3)
	e.policy.Expire.Enabled = true
	e.policy.Triggers[TaskCompact] = trigger.Config{CommitCount: 100, RateLimit: time.Hour}
	e.policy.Triggers[TaskExpire] = trigger.Config{CommitCount: 100} // the poll queues nothing
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := e.runner(t, memlock.New(), func() time.Time { return now })
	ctx := t.Context()
	last := now.Add(-10 * time.Minute)
	if err := e.state.Save(ctx, tableName, TaskCompact, trigger.State{LastRun: last, LastAttempt: last, LastResult: "succeeded"}); err != nil {
		t.Fatal(err)
	}
	s := newScheduler(t, r, time.Second)
	s.poll(ctx)
	if q := s.Status().Queue; len(q) != 0 {
		t.Fatalf("the poll queued %+v; want nothing due", q)
	}
	until := last.Add(time.Hour)

	held, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskCompact}, Source: "http"})
	if err != nil || held.State != EnqueueHeld || held.Duplicate || held.Position != 0 || len(held.Tasks) != 0 ||
		len(held.Held) != 1 || held.Held[0].Task != TaskCompact || !held.Held[0].Until.Equal(until) {
		t.Fatalf("compact ran 10m ago, rate_limit 1h: %+v, %v; want held until %s", held, err, until)
	}
	if q := s.Status().Queue; len(q) != 0 {
		t.Errorf("a held request was queued now: %+v", q)
	}

	fresh, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskExpire}, Source: "http"})
	if err != nil || fresh.State != EnqueueQueued || fresh.Duplicate || fresh.Position != 1 ||
		!slices.Equal(fresh.Tasks, []string{TaskExpire}) || len(fresh.Held) != 0 {
		t.Fatalf("fresh expire request: %+v, %v; want queued at 1", fresh, err)
	}

	merged, err := s.Enqueue(ctx, TableRequest{Table: tableName, Source: "alertmanager"})
	if err != nil || merged.State != EnqueueMerged || !merged.Duplicate || merged.Position != 1 ||
		slices.Contains(merged.Tasks, TaskCompact) || len(merged.Held) != 1 || merged.Held[0].Task != TaskCompact {
		t.Fatalf("second request, all tasks: %+v, %v; want merged, compact held", merged, err)
	}

	forced, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskCompact}, Force: true, Source: "http"})
	if err != nil || forced.State != EnqueueMerged || len(forced.Held) != 0 || !slices.Contains(forced.Tasks, TaskCompact) {
		t.Fatalf("forced compact: %+v, %v; want merged and not held (force skips the rate limit)", forced, err)
	}
}

// A held task is queued, as a requested run, when its rate limit ends.
func TestHeldRequestQueuedWhenTheRateLimitEnds(t *testing.T) {
	e := newEnv(t, 3)
	e.policy.Triggers[TaskCompact] = trigger.Config{CommitCount: 100, RateLimit: time.Hour}
	r := e.runner(t, memlock.New(), nil)
	ctx := t.Context()
	last := time.Now().Add(-time.Hour + 100*time.Millisecond)
	if err := e.state.Save(ctx, tableName, TaskCompact, trigger.State{LastRun: last, LastAttempt: last}); err != nil {
		t.Fatal(err)
	}
	s := newScheduler(t, r, time.Second)
	s.poll(ctx)
	// An alert repeating while the limit holds waits on the same timer.
	for range 3 {
		enq, err := s.Enqueue(ctx, TableRequest{Table: tableName, Tasks: []string{TaskCompact}, Reason: "alert X", Source: "alertmanager"})
		if err != nil || enq.State != EnqueueHeld {
			t.Fatalf("%+v, %v; want held", enq, err)
		}
	}
	heldTimers := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.held)
	}
	if n := heldTimers(); n != 1 {
		t.Fatalf("%d held timers for one table and task, want 1", n)
	}
	if h := s.Status().Held; len(h) != 1 || h[0].Table != tableName || h[0].Task != TaskCompact || h[0].Reason != "alert X" {
		t.Fatalf("status held = %+v; want the held compaction", h)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		q := s.Status().Queue
		if len(q) == 1 && slices.Equal(q[0].Tasks, []string{TaskCompact}) && q[0].Manual && slices.Equal(q[0].Reasons, []string{"alert X"}) {
			if n := heldTimers(); n != 0 {
				t.Fatalf("%d held timers after the limit ended, want 0", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held compaction was never queued: %+v", q)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A held task told a later end by a second request (a run in between moved
// its rate limit) is queued at that later end, not at the first one, where
// the run would only be refused as rate limited.
func TestHeldTaskMovesToTheLaterEnd(t *testing.T) {
	e := newEnv(t, 3)
	s := newScheduler(t, e.runner(t, memlock.New(), nil), time.Second)
	s.poll(t.Context())
	ident := s.known[tableName]
	start := time.Now()
	first, later := start.Add(50*time.Millisecond), start.Add(400*time.Millisecond)
	s.hold(heldKey{tableName, TaskCompact, ""}, &heldEntry{ident: ident, until: first, reason: "alert X", source: "alertmanager"})
	s.hold(heldKey{tableName, TaskCompact, ""}, &heldEntry{ident: ident, until: later, reason: "alert X", source: "alertmanager"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if q := s.Status().Queue; len(q) == 1 {
			if q[0].QueuedAt.Before(later) {
				t.Fatalf("queued at %s, before the later end %s", q[0].QueuedAt, later)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held compaction was never queued")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if h := s.Status().Held; len(h) != 0 {
		t.Fatalf("still held after queueing: %+v", h)
	}
}

// A held task that is queued meanwhile (a poll found it due, or a forced
// request) is no longer held: its timer must not queue a second run.
func TestQueuedTaskIsNoLongerHeld(t *testing.T) {
	e := newEnv(t, 3)
	s := newScheduler(t, e.runner(t, memlock.New(), nil), time.Second)
	s.poll(t.Context())
	ident := s.known[tableName]
	s.hold(heldKey{tableName, TaskCompact, ""}, &heldEntry{ident: ident, until: time.Now().Add(time.Hour), reason: "alert X", source: "alertmanager"})
	s.hold(heldKey{tableName, TaskExpire, ""}, &heldEntry{ident: ident, until: time.Now().Add(time.Hour), reason: "alert X", source: "alertmanager"})
	s.add(tableName, ident, []string{TaskCompact}, "forced", "http", true, false)
	h := s.Status().Held
	if len(h) != 1 || h[0].Task != TaskExpire {
		t.Fatalf("held after queueing compact = %+v; want only expire", h)
	}
}

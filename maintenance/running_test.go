package maintenance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iceberg-maintainer/maintainer/internal/catalogcall"
	"github.com/iceberg-maintainer/maintainer/internal/outputcheck"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

// syncBuffer is a log sink the runner's goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds; after 30s it marks the test failed
// (it may run on another goroutine than the test's) and returns.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("timed out waiting for %s", what)
			return
		}
	}
}

func (e *env) loggingRunner(t *testing.T, logs *syncBuffer) *Runner {
	t.Helper()
	return NewRunner(Deps{
		Catalog:          e.cat,
		Policy:           func(string, iceberg.Properties) (Policy, error) { return e.policy, nil },
		Selected:         func(string) bool { return true },
		Locker:           memlock.New(),
		LockTTL:          3 * time.Second,
		State:            e.state,
		Metrics:          NewMetrics(e.reg, metrics.NewTables(true, 10)),
		Logger:           slog.New(slog.NewTextHandler(logs, nil)),
		ProgressInterval: 50 * time.Millisecond,
	})
}

// A compaction still writing when its max_run_time passes is cancelled as a
// lost lease cancels it: it commits nothing, removes the files it wrote, and
// fails naming the limit. While it runs it logs progress, shows in Running
// (stuck once past the limit) and in task_running_seconds; after, neither.
func TestMaxRunTimeCancelsARealCompaction(t *testing.T) {
	e := newEnv(t, 6)
	// Long enough for planning to reach the writer on a busy machine; the
	// writer then holds the task until the limit has passed.
	const limit = 2 * time.Second
	e.policy.Limits = map[string]TaskLimits{TaskCompact: {MaxRunTime: limit}}
	logs := &syncBuffer{}
	r := e.loggingRunner(t, logs)
	// The writer of the first output file waits until the test has seen
	// the limit pass: the task is busy writing when it is cancelled.
	release := make(chan struct{})
	var writers sync.WaitGroup
	writers.Add(1)
	var once sync.Once
	r.writeAlloc = func() (memory.Allocator, func()) {
		once.Do(func() {
			writers.Done()
			<-release
		})
		return memory.DefaultAllocator, func() {}
	}
	loc := strings.TrimPrefix(e.tbl.Location(), "file://")
	filesBefore := testenv.Files(t, loc)
	rowsBefore := testenv.Verify(t, strings.TrimPrefix(e.tbl.MetadataLocation(), "file://"))
	snapBefore := e.current(t).SnapshotID

	sched, err := NewScheduler(DefaultSchedulerConfig(), SchedulerDeps{Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan []RunningTask, 1)
	status := make(chan []byte, 1)
	scraped := make(chan float64, 1)
	go func() {
		defer close(release)
		writers.Wait()
		waitFor(t, "the past-limit progress line", func() bool {
			return strings.Contains(logs.String(), "still running past max_run_time")
		})
		watched <- r.Running()
		doc, _ := json.Marshal(sched.Status())
		status <- doc
		scraped <- gaugeValue(t, e.reg, "iceberg_maintainer_task_running_seconds") -
			gaugeValue(t, e.reg, "iceberg_maintainer_task_max_run_time_seconds")
	}()
	o := one(t, r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact}, Force: true}), TaskCompact)

	if o.Status != StatusFailed || !errors.Is(o.Err(), ErrMaxRunTime) {
		t.Fatalf("outcome: %+v (err %v); want failed with ErrMaxRunTime", o, o.Err())
	}
	if !strings.Contains(o.Reason, "compact.max_run_time") || !strings.Contains(o.Reason, "2s") {
		t.Errorf("reason %q does not name compact.max_run_time and its 2s", o.Reason)
	}
	if got := e.current(t).SnapshotID; got != snapBefore {
		t.Errorf("current snapshot %d; want %d (nothing committed)", got, snapBefore)
	}
	if got := testenv.Files(t, loc); !slices.Equal(got, filesBefore) {
		t.Errorf("files after the cancelled run:\n%q\nwant those before:\n%q", got, filesBefore)
	}
	tbl, err := e.cat.LoadTable(t.Context(), e.opt.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	after := testenv.Verify(t, strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	if after.LiveRows != rowsBefore.LiveRows || after.Checksum != rowsBefore.Checksum {
		t.Errorf("rows %d (checksum %s) after; want %d (%s)", after.LiveRows, after.Checksum, rowsBefore.LiveRows, rowsBefore.Checksum)
	}
	if got := testutil.ToFloat64(r.metrics.runs.WithLabelValues(tableName, TaskCompact, ResultFailure)); got != 1 {
		t.Errorf("runs_total{compact,failure} = %v; want 1 (past max_run_time is a failure, not a cancellation)", got)
	}
	if st, _ := e.state.Load(t.Context(), tableName, TaskCompact); st.LastAttempt.IsZero() || !strings.Contains(st.LastError, "max_run_time") {
		t.Errorf("trigger state does not record the failed attempt: %+v", st)
	}

	var running []RunningTask
	select {
	case running = <-watched:
	case <-time.After(time.Minute):
		t.Fatal("the task ended before it reached its writer: nothing was watched while it ran past the limit")
	}
	if len(running) != 1 || running[0].Task != TaskCompact || running[0].Table != tableName || !running[0].Stuck ||
		time.Duration(running[0].MaxRunTime) != limit {
		t.Errorf("running while past the limit: %+v; want compact on %s, stuck, max_run_time %s", running, tableName, limit)
	}
	doc := <-status
	var st struct {
		RunningTasks []map[string]any `json:"running_tasks"`
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.RunningTasks) != 1 || st.RunningTasks[0]["stuck"] != true || st.RunningTasks[0]["max_run_duration"] != "2s" ||
		st.RunningTasks[0]["started_at"] == nil || st.RunningTasks[0]["running_for"] == nil {
		t.Errorf("status running_tasks: %s", doc)
	}
	if problems, err := outputcheck.Check(doc, outputcheck.Lists()...); err != nil || len(problems) > 0 {
		t.Errorf("status document breaks the output conventions: %v %v", problems, err)
	}
	if got := <-scraped; got <= 0 {
		t.Errorf("task_running_seconds - task_max_run_time_seconds while past the limit = %v; want > 0", got)
	}
	if got := r.Running(); len(got) != 0 {
		t.Errorf("running after the task ended: %+v", got)
	}
	if n := testutil.CollectAndCount(r.metrics.taskRunning); n != 0 {
		t.Errorf("task_running_seconds has %d series after the task ended; want none", n)
	}
	if !strings.Contains(logs.String(), "msg=\"still running\"") {
		t.Errorf("no progress line before the limit passed:\n%s", logs)
	}
}

// gaugeValue gathers reg and returns the value of the one series of the
// gauge name, failing the test when there is not exactly one.
func gaugeValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Error(err)
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Errorf("no single series of %s", name)
	return 0
}

// A task that finishes within its max_run_time is not touched by it.
func TestMaxRunTimeLeavesAQuickTaskAlone(t *testing.T) {
	e := newEnv(t, 6)
	e.policy.Limits = map[string]TaskLimits{TaskCompact: {MaxRunTime: time.Hour}}
	r := e.loggingRunner(t, &syncBuffer{})
	o := one(t, r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact}, Force: true}), TaskCompact)
	if o.Status != StatusSucceeded || strings.Contains(o.Reason, "max_run_time") {
		t.Fatalf("outcome: %+v", o)
	}
}

// commitAnswerLost is a catalog whose commits land but whose answers never
// come back, as when a catalog server stalls after its write.
type commitAnswerLost struct {
	Catalog
	stop chan struct{}
}

func (c *commitAnswerLost) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	meta, loc, err := c.Catalog.CommitTable(ctx, ident, reqs, ups)
	if err != nil {
		return meta, loc, err
	}
	<-c.stop
	return meta, loc, nil
}

// A compaction commit whose answer times out (catalog.request_timeout) is
// not taken for a failure: the compaction re-loads, finds the snapshot it
// committed, and keeps the files it references. Meanwhile the progress log
// names the commit as what the task waits on.
func TestCompactionCommitTimeoutThatLanded(t *testing.T) {
	e := newEnv(t, 6)
	stall := &commitAnswerLost{Catalog: e.cat, stop: make(chan struct{})}
	t.Cleanup(func() { close(stall.stop) })
	bounded, err := catalogcall.New(stall, catalogcall.Config{RequestTimeout: 500 * time.Millisecond, MaxAttempts: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.cat = bounded
	rowsBefore := testenv.Verify(t, strings.TrimPrefix(e.tbl.MetadataLocation(), "file://"))
	logs := &syncBuffer{}
	r := e.loggingRunner(t, logs)
	o := one(t, r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact}, Force: true}), TaskCompact)
	// While the answer is awaited, the progress lines say so.
	if !strings.Contains(logs.String(), `waiting_on="catalog: commit table for`) {
		t.Errorf("no progress line names the commit being waited on:\n%s", logs)
	}
	if o.Status != StatusSucceeded || len(o.Compact.Commits) != 1 {
		t.Fatalf("outcome: %+v (err %v); want succeeded with its one commit found", o, o.Err())
	}
	tbl, err := e.cat.LoadTable(t.Context(), e.opt.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	after := testenv.Verify(t, strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	if after.LiveRows != rowsBefore.LiveRows || after.Checksum != rowsBefore.Checksum || after.DataFiles >= rowsBefore.DataFiles {
		t.Errorf("after: %d rows (%s) in %d files; want %d rows (%s) in fewer than %d files",
			after.LiveRows, after.Checksum, after.DataFiles, rowsBefore.LiveRows, rowsBefore.Checksum, rowsBefore.DataFiles)
	}
}

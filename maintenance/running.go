package maintenance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/units"
	"github.com/iceberg-maintainer/maintainer/internal/validate"
	"github.com/iceberg-maintainer/maintainer/internal/waiting"
)

// ErrMaxRunTime is the cause a task is cancelled with when it runs past its
// max_run_time.
var ErrMaxRunTime = errors.New("max_run_time exceeded")

// DefaultProgressInterval is how often a running task logs that it is still
// running: often enough that a stalled dependency shows in the logs within a
// minute.
const DefaultProgressInterval = time.Minute

// TaskLimits bound one run of a task, whatever the task. Its keys sit in each
// task block beside the task's own (defaults.compact.max_run_time).
type TaskLimits struct {
	// MaxRunTime: a run still going after this long is cancelled as a lost
	// lease cancels it (nothing more is committed or deleted, the files it
	// wrote are cleaned up as for any failure) and fails.
	MaxRunTime time.Duration `yaml:"max_run_time"`
}

// DefaultTaskLimits leave a compaction of a large table hours, and stop a
// run that hangs on a dependency well before the next day's run.
func DefaultTaskLimits() TaskLimits { return TaskLimits{MaxRunTime: 3 * time.Hour} }

// Validate reports every problem at once; it never changes l.
func (l TaskLimits) Validate() error {
	var v validate.Collector
	if l.MaxRunTime <= 0 {
		v.Add("max_run_time", l.MaxRunTime, "must be > 0")
	}
	return v.Err()
}

// limits returns the limits of task, the defaults when the policy has none.
func (p Policy) limits(task string) TaskLimits {
	if l, ok := p.Limits[task]; ok {
		return l
	}
	return DefaultTaskLimits()
}

// RunningTask is one task running now, as GET /v1/status lists it.
type RunningTask struct {
	Table      string         `json:"table"`
	Task       string         `json:"task"`
	Started    time.Time      `json:"started_at"`
	RunningFor units.Duration `json:"running_for"`
	// MaxRunTime is the task's max_run_time (a key ending in _time would
	// read as a timestamp in the output conventions).
	MaxRunTime units.Duration `json:"max_run_duration"`
	// Stuck: the task has run past its max_run_time. It was cancelled then;
	// still running means it did not stop (a call that ignores its
	// context), and only a restart frees its table.
	Stuck bool `json:"stuck"`
	// WaitingOn is the oldest remote call the task is waiting on now, with
	// how long ("catalog: commit table for 25s"); empty when none.
	WaitingOn string `json:"waiting_on,omitempty"`
	// Progress is how far the task has come, when it says (a shared
	// compaction: the partitions it claimed and those other replicas hold).
	Progress string `json:"progress,omitempty"`
}

// runningTasks is the set of tasks running now, read at scrape time by the
// metrics and by the scheduler's status.
type runningTasks struct {
	mu    sync.Mutex
	tasks map[*runningTask]struct{}
}

type runningTask struct {
	table, task string
	started     time.Time
	limit       time.Duration

	mu    sync.Mutex
	next  int
	waits map[int]wait // remote calls in flight (groups run in parallel)
	// progress tells how far the task has come (nil: it does not say).
	progress func() string
}

type runningKey struct{}

// reportProgress makes the running task of ctx (if any) show progress in
// /v1/status.
func reportProgress(ctx context.Context, progress func() string) {
	if t, ok := ctx.Value(runningKey{}).(*runningTask); ok {
		t.mu.Lock()
		t.progress = progress
		t.mu.Unlock()
	}
}

func (t *runningTask) progressText() string {
	t.mu.Lock()
	p := t.progress
	t.mu.Unlock()
	if p == nil {
		return ""
	}
	return p()
}

type wait struct {
	what  string
	since time.Time
}

// Begin implements waiting.Recorder.
func (t *runningTask) Begin(what string) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.waits == nil {
		t.waits = map[int]wait{}
	}
	id := t.next
	t.next++
	t.waits[id] = wait{what: what, since: time.Now()}
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.waits, id)
	}
}

// waitingOn describes the oldest call in flight, "" when none.
func (t *runningTask) waitingOn() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var oldest wait
	for _, w := range t.waits {
		if oldest.what == "" || w.since.Before(oldest.since) {
			oldest = w
		}
	}
	if oldest.what == "" {
		return ""
	}
	return oldest.what + " for " + units.FormatDuration(time.Since(oldest.since).Round(time.Second))
}

func newRunningTasks() *runningTasks { return &runningTasks{tasks: map[*runningTask]struct{}{}} }

func (s *runningTasks) add(t *runningTask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[t] = struct{}{}
}

func (s *runningTasks) remove(t *runningTask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, t)
}

// list returns the running tasks as of now, sorted by table and task.
func (s *runningTasks) list(now time.Time) []RunningTask {
	s.mu.Lock()
	out := make([]RunningTask, 0, len(s.tasks))
	for t := range s.tasks {
		d := now.Sub(t.started)
		out = append(out, RunningTask{Table: t.table, Task: t.task, Started: t.started, RunningFor: units.Duration(d),
			MaxRunTime: units.Duration(t.limit), Stuck: d > t.limit, WaitingOn: t.waitingOn(), Progress: t.progressText()})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b RunningTask) int {
		return cmp.Or(strings.Compare(a.Table, b.Table), strings.Compare(a.Task, b.Task), a.Started.Compare(b.Started))
	})
	return out
}

// Running lists the tasks running now, with how long each has run.
func (r *Runner) Running() []RunningTask { return r.running.list(r.now()) }

// bound runs one task under its max_run_time: the returned context is
// cancelled with a cause wrapping ErrMaxRunTime when the limit passes, the
// task is listed as running, and a line is logged every progress interval
// while it runs. end must be called when the task returns.
func (r *Runner) bound(ctx context.Context, table, task string, lim TaskLimits, start time.Time) (context.Context, func()) {
	limit := lim.MaxRunTime
	cause := fmt.Errorf("%w: %s on %s stopped after running %s (%s.max_run_time)",
		ErrMaxRunTime, task, table, units.FormatDuration(limit), task)
	tctx, cancel := context.WithTimeoutCause(ctx, limit, cause)
	rt := &runningTask{table: table, task: task, started: start, limit: limit}
	tctx = waiting.With(context.WithValue(tctx, runningKey{}, rt), rt)
	r.running.add(rt)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(r.progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				elapsed := r.now().Sub(start)
				attrs := []any{"table", table, "task", task, "elapsed", units.FormatDuration(elapsed.Round(time.Second)),
					"max_run_time", units.FormatDuration(limit)}
				if w := rt.waitingOn(); w != "" {
					attrs = append(attrs, "waiting_on", w)
				}
				if errors.Is(context.Cause(tctx), ErrMaxRunTime) {
					r.log.Warn("still running past max_run_time: cancelled, waiting for the task to stop", attrs...)
				} else {
					r.log.Info("still running", attrs...)
				}
			}
		}
	}()
	return tctx, func() {
		close(done)
		<-stopped // no progress line after the task's outcome
		cancel()
		r.running.remove(rt)
	}
}

// overran marks an outcome of a task cancelled by its max_run_time as the
// failure it is, with a reason naming the limit. A task that finished its
// work anyway keeps its outcome.
func overran(o Outcome, tctx context.Context) Outcome {
	cause := context.Cause(tctx)
	if o.Status != StatusFailed || !errors.Is(cause, ErrMaxRunTime) {
		return o
	}
	switch {
	case o.failure == nil:
		o.failure = cause
	case !errors.Is(o.failure, ErrMaxRunTime):
		o.failure = fmt.Errorf("%w: %w", cause, o.failure)
	}
	o.Reason = joinWhy(cause.Error(), o.Reason)
	return o
}

package maintenance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/fleet"
	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// SchedulerConfig drives the loop of `maintainer serve`.
type SchedulerConfig struct {
	PollInterval        time.Duration // jittered by up to 10%
	MaxConcurrentTables int
	// ShutdownGrace is how long running tasks may go on after shutdown
	// began before they are cancelled.
	ShutdownGrace time.Duration
	// HealthInterval spaces the re-measurement of a table's health gauges
	// (a run measures them at once).
	HealthInterval time.Duration
	// History is how many task outcomes GET /v1/status keeps.
	History int
}

// DefaultSchedulerConfig returns the defaults of the scheduler block.
func DefaultSchedulerConfig() SchedulerConfig {
	return SchedulerConfig{PollInterval: 30 * time.Second, MaxConcurrentTables: 2, ShutdownGrace: time.Minute,
		HealthInterval: 5 * time.Minute, History: 100}
}

// Validate reports every bad field.
func (c SchedulerConfig) Validate() error {
	var v validate.Collector
	if c.PollInterval <= 0 {
		v.Add("poll_interval", c.PollInterval, "must be positive")
	}
	if c.MaxConcurrentTables < 1 {
		v.Add("max_concurrent_tables", c.MaxConcurrentTables, "must be at least 1")
	}
	if c.ShutdownGrace < 0 {
		v.Add("shutdown_grace", c.ShutdownGrace, "must not be negative")
	}
	if c.History < 0 {
		v.Add("history", c.History, "must not be negative")
	}
	return v.Err()
}

// TableRunner is what the scheduler drives; *Runner implements it.
type TableRunner interface {
	// Tables lists the managed tables, sorted.
	Tables(ctx context.Context) ([]table.Identifier, error)
	// DueTasks loads a table and returns its due tasks in run order with
	// the reasons, taking no lease; with measure it also re-measures the
	// table's health gauges from the table it loaded.
	DueTasks(ctx context.Context, ident table.Identifier, measure bool) (due, reasons []string, err error)
	// RunTable runs the requested tasks on one table under its lease.
	RunTable(ctx context.Context, ident table.Identifier, req Request) []Outcome
	// HeldUntil returns, for each of tasks (all when empty) that its
	// rate_limit holds back now, when a requested run of it may go ahead.
	HeldUntil(ctx context.Context, ident table.Identifier, tasks []string) (map[string]time.Time, error)
	// Running lists the tasks running now, with how long each has run.
	Running() []RunningTask
}

var _ TableRunner = (*Runner)(nil)

// Fleet divides the managed tables among the serve replicas sharing a lock
// backend; *fleet.Member implements it.
type Fleet interface {
	// Refresh renews this replica's heartbeat and re-reads the members
	// (the scheduler calls it before each poll, so a member that left or
	// died is seen at once); on failure the last view holds for at most a
	// TTL, and the fleet logs and counts the error.
	Refresh(ctx context.Context) error
	// View is the current view: the members, and whether it is valid.
	View() fleet.View
}

// SchedulerDeps are the scheduler's collaborators; Runner is required.
type SchedulerDeps struct {
	Runner TableRunner
	// Fleet says which tables this replica owns: it polls, measures and
	// maintains only those (requests over HTTP run whatever the owner).
	// nil: this replica owns every table.
	Fleet Fleet
	// Metrics takes the queue, poll and trigger metrics; nil records
	// nothing, and then polls do not measure health either (nobody would
	// see the gauges).
	Metrics *Metrics
	Logger  *slog.Logger
	Now     func() time.Time
	// Assist is where replicas ask each other to help compact a large
	// table (assist.go); nil: no help is given.
	Assist *AssistBoard
}

// Sentinels of Enqueue; callers classify with errors.Is.
var (
	ErrUnknownTable = errors.New("unknown table")
	ErrUnknownTask  = errors.New("unknown task")
	ErrStopping     = errors.New("shutting down")
)

// TableRequest asks for maintenance of one table, from the HTTP API or an
// alert.
type TableRequest struct {
	Table  string   // dotted, as Tables lists it
	Tasks  []string // empty = all tasks
	Reason string   // empty = "requested over <Source>"
	// Force skips the trigger thresholds and the rate limit; without it
	// the run is manual (thresholds skipped, rate limit kept).
	Force  bool
	Source string // e.g. "http", "alertmanager": the source of the trigger metric
	// Where scopes the run's compaction (Request.Where). A scoped request
	// is queued apart from the table's other requests unless they have the
	// same where, so neither loses its scope.
	Where string
}

// States of an Enqueued: when the requested run will happen.
const (
	// EnqueueQueued: a new entry in the queue, at Position.
	EnqueueQueued = "queued"
	// EnqueueMerged: merged into the table's entry already queued.
	EnqueueMerged = "merged"
	// EnqueueHeld: every task asked for is held by its rate_limit; each is
	// queued when its limit lets it run (Held).
	EnqueueHeld = "held"
)

// Enqueued is the scheduler's answer to a TableRequest.
type Enqueued struct {
	Table string
	// Tasks are all that is now queued for the table, in run order; []
	// when every task asked for is held.
	Tasks []string
	// Duplicate: the request was merged into one already queued for the
	// table, so no extra run will happen.
	Duplicate bool
	State     string // EnqueueQueued, EnqueueMerged or EnqueueHeld
	// Position is the table's place in the queue (1 starts next); 0 when
	// nothing is queued now, or a worker took the entry already.
	Position int
	// Held are the tasks asked for that their rate_limit holds back (never
	// on a forced request), each queued at its Until.
	Held []HeldTask
}

// HeldTask is a requested task the rate limit holds back until Until.
type HeldTask struct {
	Task  string
	Until time.Time
}

// holdLookup bounds how long Enqueue waits for a table's trigger state:
// the HTTP answer must stay quick. Past it the request is queued and the
// run applies the rate limit itself.
const holdLookup = 5 * time.Second

// Scheduler is the loop of `serve`: it polls the selected tables, queues
// those with due tasks (and those asked for over HTTP), and runs up to
// MaxConcurrentTables of them at a time, each under its lease.
type Scheduler struct {
	r       TableRunner
	fleet   Fleet
	cfg     SchedulerConfig
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time

	wake chan struct{} // a queue change or shutdown
	// assist is the board of tables other replicas ask help for.
	assist *AssistBoard

	mu          sync.Mutex
	known       map[string]table.Identifier // managed tables at the last poll
	queue       []*QueuedTable              // FIFO; at most one entry per table and where
	running     map[string]*QueuedTable
	recent      []RecentRun
	stopping    bool
	lastPoll    time.Time
	lastPollErr string
	healthAt    map[string]time.Time // tables whose health gauges this replica set
	// ranAt is when a table's last run here ended: a table this replica no
	// longer owns keeps its series for seriesGrace after it.
	ranAt map[string]time.Time
	// held are the requested tasks waiting for their rate limit to end, by
	// table and task: one timer each, however often an alert repeats.
	held map[heldKey]*heldEntry
}

type heldKey struct{ table, task, where string }

// heldEntry is a requested task the rate limit holds back; it is queued at
// until, the latest end any request for it was told.
type heldEntry struct {
	ident          table.Identifier
	until          time.Time
	reason, source string
}

// QueuedTable is one table's pending (or running) request, merged from
// every request made while it waited.
type QueuedTable struct {
	Table    string    `json:"table"`
	Tasks    []string  `json:"tasks"` // in run order; all tasks when every one was asked
	Reasons  []string  `json:"reasons"`
	Sources  []string  `json:"sources"`
	Force    bool      `json:"force,omitempty"`
	Manual   bool      `json:"manual,omitempty"`
	QueuedAt time.Time `json:"queued_at"`
	Started  time.Time `json:"started_at,omitzero"`
	// BusyRetries counts re-queues of a requested run that found the
	// table leased by another maintainer.
	BusyRetries int `json:"busy_retries,omitempty"`
	// Where scopes the entry's compaction; a table may have one entry per
	// where, run one after another.
	Where string `json:"where,omitempty"`
	ident table.Identifier
}

// maxBusyRetries bounds how often a requested run (HTTP, alert) that found
// its table busy elsewhere is tried again, one poll interval apart: the
// other holder may be running other tasks than the ones asked for.
const maxBusyRetries = 10

// RecentRun is one task outcome as GET /v1/status lists it.
type RecentRun struct {
	Table    string    `json:"table"`
	Task     string    `json:"task"`
	Status   string    `json:"status"`
	Reason   string    `json:"reason,omitempty"`
	Trigger  string    `json:"trigger,omitempty"`
	Error    string    `json:"error,omitempty"`
	Finished time.Time `json:"finished_at"`
	Seconds  float64   `json:"duration_seconds"`
}

// NewScheduler returns a scheduler over the tables of d.Runner.
func NewScheduler(cfg SchedulerConfig, d SchedulerDeps) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Runner == nil {
		return nil, errors.New("scheduler: SchedulerDeps.Runner is required")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Scheduler{r: d.Runner, fleet: d.Fleet, cfg: cfg, log: d.Logger, metrics: d.Metrics, now: d.Now, wake: make(chan struct{}, 1),
		assist: d.Assist, known: map[string]table.Identifier{}, running: map[string]*QueuedTable{}, healthAt: map[string]time.Time{},
		ranAt: map[string]time.Time{}, held: map[heldKey]*heldEntry{}}, nil
}

// Run polls and works until ctx is done, then stops taking work, gives the
// running tasks ShutdownGrace to finish, cancels them, and returns once every
// lease is released. The first poll happens before Run returns control to the
// workers, so the table list is known early.
func (s *Scheduler) Run(ctx context.Context) error {
	// Tasks keep running past ctx for the grace period.
	workCtx, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelWork(nil)

	var wg sync.WaitGroup
	for range s.cfg.MaxConcurrentTables {
		wg.Go(func() { s.worker(ctx, workCtx) })
	}
	s.poll(ctx)
	timer := time.NewTimer(s.jittered())
	defer timer.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-timer.C:
			s.poll(ctx)
			timer.Reset(s.jittered())
		}
	}

	s.mu.Lock()
	s.stopping = true
	dropped, heldDropped := len(s.queue), len(s.held)
	s.queue = nil
	clear(s.held) // their timers find nothing to queue
	running := len(s.running)
	s.mu.Unlock()
	s.notify()
	s.log.Info("shutting down: no new work", "queued_dropped", dropped, "held_dropped", heldDropped,
		"running", running, "grace", s.cfg.ShutdownGrace)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(s.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		s.log.Warn("shutdown grace period over: cancelling running tasks")
		cancelWork(fmt.Errorf("shutdown grace period of %s over", s.cfg.ShutdownGrace))
		<-done
	}
	s.metrics.queue(0, 0)
	return nil
}

func (s *Scheduler) jittered() time.Duration {
	d := s.cfg.PollInterval
	return d - time.Duration(rand.Int64N(int64(d)/10+1))
}

func (s *Scheduler) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// seriesGrace is how long the series of a table that moved to another
// replica outlive its last run here, so that scrapes see its final counts.
// Its health gauges go at once: the new owner measures it.
const seriesGrace = 10 * time.Minute

// owns reports whether this replica polls, measures and maintains table:
// the one ownership check of the scheduler.
func (s *Scheduler) owns(table string) bool {
	return s.fleet == nil || s.fleet.View().Owns(table)
}

// poll refreshes the fleet's view and the table list, queues the owned
// tables with due tasks, and re-measures their stale health gauges. A
// catalog error keeps the last list.
func (s *Scheduler) poll(ctx context.Context) {
	if s.fleet != nil {
		_ = s.fleet.Refresh(ctx) // logged and counted by the fleet; its view says what is owned
	}
	idents, err := s.r.Tables(ctx)
	now := s.now()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.metrics.poll(false)
		s.log.Error("poll: list tables", "err", err)
		s.mu.Lock()
		s.lastPoll, s.lastPollErr = now, err.Error()
		s.mu.Unlock()
		return
	}
	s.metrics.poll(true)
	names := make([]string, len(idents))
	known := make(map[string]table.Identifier, len(idents))
	for i, id := range idents {
		names[i] = strings.Join(id, ".")
		known[names[i]] = id
	}
	owned := make(map[string]bool, len(names))
	for _, name := range names {
		if s.owns(name) {
			owned[name] = true
		}
	}
	if s.fleet != nil && len(owned) == 0 && len(names) > 0 {
		if v := s.fleet.View(); !v.Valid {
			s.log.Warn("poll: this replica owns no table: its view of the fleet is not valid", "replica", v.Self, "err", v.Err)
		}
	}
	s.mu.Lock()
	s.known, s.lastPoll, s.lastPollErr = known, now, ""
	keep := maps.Clone(owned)
	var dropHealth []string
	for name := range s.healthAt {
		if !owned[name] {
			// Gone, or another replica's now: it measures the table.
			dropHealth = append(dropHealth, name)
			delete(s.healthAt, name)
		}
	}
	for name, at := range s.ranAt {
		if _, ok := known[name]; ok && now.Sub(at) < seriesGrace {
			keep[name] = true
		} else {
			delete(s.ranAt, name)
		}
	}
	for _, e := range s.queue {
		keep[e.Table] = true
	}
	for name := range s.running {
		keep[name] = true
	}
	s.mu.Unlock()
	s.metrics.managedTables(len(names), len(owned), keep)
	for _, name := range dropHealth {
		if _, ok := known[name]; ok {
			s.metrics.dropHealth(name)
		}
	}

	for i, ident := range idents {
		if ctx.Err() != nil {
			return
		}
		name := names[i]
		if !owned[name] || s.busy(name) {
			continue
		}
		// The health gauges are re-measured from the table loaded here.
		measure := s.metrics != nil && s.healthStale(name, now)
		due, reasons, err := s.r.DueTasks(ctx, ident, measure)
		if err != nil {
			s.log.Warn("poll: decide due tasks", "table", name, "err", err)
			continue
		}
		if len(due) > 0 {
			res := "queued"
			if _, dup := s.add(name, ident, due, strings.Join(reasons, "; "), "poll", false, false); dup {
				res = "duplicate"
			}
			s.metrics.trigger("poll", res)
			s.log.Info("queued", "table", name, "tasks", strings.Join(due, ","), "reason", strings.Join(reasons, "; "))
		}
	}
	s.helpOthers(ctx)
}

func (s *Scheduler) healthStale(name string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.healthAt[name]) < s.cfg.HealthInterval {
		return false
	}
	s.healthAt[name] = now
	return true
}

// busy reports whether the table is queued or running.
func (s *Scheduler) busy(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[name]; ok {
		return true
	}
	return slices.ContainsFunc(s.queue, func(e *QueuedTable) bool { return e.Table == name })
}

// add queues tasks of a table or merges them into its queued entry.
func (s *Scheduler) add(name string, ident table.Identifier, tasks []string, reason, source string, force, manual bool) (*QueuedTable, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(name, ident, tasks, reason, source, force, manual)
}

// addLocked is add with s.mu held, unscoped.
func (s *Scheduler) addLocked(name string, ident table.Identifier, tasks []string, reason, source string, force, manual bool) (*QueuedTable, bool) {
	return s.addScopedLocked(name, ident, tasks, reason, source, force, manual, "")
}

// addScopedLocked queues tasks of a table with a where, or merges them into
// the table's entry of the same where. A task queued now is no longer held:
// the run it waited for happens now (a poll found it due, or it was forced).
func (s *Scheduler) addScopedLocked(name string, ident table.Identifier, tasks []string, reason, source string, force, manual bool, where string) (*QueuedTable, bool) {
	for _, t := range mergeTasks(nil, tasks) {
		delete(s.held, heldKey{name, t, where})
	}
	if i := slices.IndexFunc(s.queue, func(e *QueuedTable) bool { return e.Table == name && e.Where == where }); i >= 0 {
		e := s.queue[i]
		e.Tasks = mergeTasks(e.Tasks, tasks)
		if reason != "" && !slices.Contains(e.Reasons, reason) {
			e.Reasons = append(e.Reasons, reason)
		}
		if !slices.Contains(e.Sources, source) {
			e.Sources = append(e.Sources, source)
		}
		e.Force, e.Manual = e.Force || force, e.Manual || manual
		return e, true
	}
	e := &QueuedTable{Table: name, ident: ident, Tasks: mergeTasks(nil, tasks), Sources: []string{source},
		Force: force, Manual: manual, QueuedAt: s.now(), Where: where}
	if reason != "" {
		e.Reasons = []string{reason}
	}
	s.queue = append(s.queue, e)
	s.metrics.queue(len(s.queue), len(s.running))
	s.notify()
	return e, false
}

// mergeTasks unions task lists in run order; an empty list means all tasks.
func mergeTasks(a, b []string) []string {
	all := TaskNames()
	if len(b) == 0 {
		b = all
	}
	var out []string
	for _, t := range all {
		if slices.Contains(a, t) || slices.Contains(b, t) {
			out = append(out, t)
		}
	}
	return out
}

// next blocks until a queued table that is not running can start, or the
// scheduler stops (nil).
func (s *Scheduler) next(ctx context.Context) *QueuedTable {
take:
	for {
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return nil
		}
		for i, e := range s.queue {
			if _, run := s.running[e.Table]; run {
				continue
			}
			s.queue = slices.Delete(s.queue, i, i+1)
			if !e.Manual && !e.Force && !s.owns(e.Table) {
				// Polled work for a table that moved to another replica
				// while it waited: the new owner's poll decides.
				s.metrics.queue(len(s.queue), len(s.running))
				s.log.Debug("dropped from the queue: the table is another replica's now", "table", e.Table)
				s.mu.Unlock()
				continue take
			}
			e.Started = s.now()
			s.running[e.Table] = e
			s.metrics.queue(len(s.queue), len(s.running))
			more := len(s.queue) > 0
			s.mu.Unlock()
			if more {
				s.notify() // another worker may take the next one
			}
			return e
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			s.notify() // let the other idle workers see it too
			return nil
		}
	}
}

func (s *Scheduler) worker(ctx, workCtx context.Context) {
	for {
		e := s.next(ctx)
		if e == nil {
			return
		}
		why := strings.Join(e.Reasons, "; ")
		log := s.log.With("table", e.Table)
		log.Info("maintaining", "tasks", strings.Join(e.Tasks, ","), "reason", why)
		outs := s.r.RunTable(workCtx, e.ident, Request{Tasks: e.Tasks, Force: e.Force, Manual: e.Manual, Why: why, Where: e.Where})
		now := s.now()
		for _, o := range outs {
			attrs := []any{"task", o.Task, "status", o.Status, "reason", o.Reason, "seconds", o.Seconds}
			switch {
			case o.Status == StatusFailed:
				log.Error("task failed", append(attrs, "err", o.Error)...)
			case o.Status == StatusSucceeded:
				log.Info("task done", attrs...)
			default:
				log.Debug("task not run", attrs...)
			}
		}
		s.mu.Lock()
		delete(s.running, e.Table)
		for _, o := range outs {
			s.recent = append(s.recent, RecentRun{Table: o.Table, Task: o.Task, Status: o.Status, Reason: o.Reason,
				Trigger: o.Trigger, Error: o.Error, Finished: now, Seconds: o.Seconds})
		}
		if over := len(s.recent) - s.cfg.History; over > 0 {
			s.recent = slices.Delete(s.recent, 0, over)
		}
		s.healthAt[e.Table] = now // a run that changed the table measured it
		s.ranAt[e.Table] = now
		s.metrics.queue(len(s.queue), len(s.running))
		s.mu.Unlock()
		if (e.Manual || e.Force) && allBusy(outs) && e.BusyRetries < maxBusyRetries {
			retry := *e
			time.AfterFunc(s.cfg.PollInterval, func() { s.requeueBusy(&retry) })
			log.Info("table busy elsewhere; the requested run will be tried again",
				"after", s.cfg.PollInterval, "retry", e.BusyRetries+1)
		}
		s.notify()
	}
}

func allBusy(outs []Outcome) bool {
	for _, o := range outs {
		if o.Status != StatusBusy {
			return false
		}
	}
	return len(outs) > 0
}

// requeueBusy queues a requested run again (merging with whatever is
// queued for the table meanwhile), unless the scheduler is stopping.
func (s *Scheduler) requeueBusy(e *QueuedTable) {
	if s.Stopping() {
		return
	}
	// One critical section: a worker may take the entry as soon as it is
	// queued, and must see its retry count.
	s.mu.Lock()
	defer s.mu.Unlock()
	q, _ := s.addScopedLocked(e.Table, e.ident, e.Tasks, strings.Join(e.Reasons, "; "), e.Sources[0], e.Force, e.Manual, e.Where)
	q.BusyRetries = max(q.BusyRetries, e.BusyRetries+1)
}

// Enqueue queues a request from the HTTP API or an alert, and says when it
// runs: the tasks the rate limit holds back (unless forced) are queued only
// when the limit ends, the others now. Errors wrap ErrUnknownTask,
// ErrUnknownTable or ErrStopping.
func (s *Scheduler) Enqueue(ctx context.Context, req TableRequest) (Enqueued, error) {
	for _, t := range req.Tasks {
		if _, ok := LookupTask(t); !ok {
			return Enqueued{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknownTask, t, strings.Join(TaskNames(), ", "))
		}
	}
	req.Where = strings.TrimSpace(req.Where)
	if err := CheckScope(req.Tasks, req.Where); err != nil {
		return Enqueued{}, err
	}
	s.mu.Lock()
	ident, ok := s.known[req.Table]
	stopping, n := s.stopping, len(s.known)
	s.mu.Unlock()
	if stopping {
		return Enqueued{}, ErrStopping
	}
	if !ok {
		return Enqueued{}, fmt.Errorf("%w %q: not one of the %d managed tables of the last poll", ErrUnknownTable, req.Table, n)
	}
	reason := req.Reason
	if reason == "" {
		reason = "requested over " + req.Source
	}
	now := s.now()
	var until map[string]time.Time // a forced request is never held
	if !req.Force {
		hctx, cancel := context.WithTimeout(ctx, holdLookup)
		var err error
		until, err = s.r.HeldUntil(hctx, ident, req.Tasks)
		cancel()
		if err != nil {
			s.log.Warn("rate limits of a requested run unknown; queued, the run applies them", "table", req.Table, "err", err)
		}
	}
	var ready, held []string
	for _, t := range mergeTasks(nil, req.Tasks) {
		if u, ok := until[t]; ok && now.Before(u) {
			held = append(held, t)
		} else {
			ready = append(ready, t)
		}
	}
	out := Enqueued{Table: req.Table, Tasks: []string{}, State: EnqueueHeld, Held: []HeldTask{}}
	for _, t := range held {
		out.Held = append(out.Held, HeldTask{Task: t, Until: until[t]})
		s.hold(heldKey{req.Table, t, req.Where}, &heldEntry{ident: ident, until: until[t], reason: reason, source: req.Source})
	}
	if len(ready) > 0 {
		s.mu.Lock()
		e, dup := s.addScopedLocked(req.Table, ident, ready, reason, req.Source, req.Force, !req.Force, req.Where)
		s.mu.Unlock()
		out.Duplicate, out.State = dup, EnqueueQueued
		if dup {
			out.State = EnqueueMerged
		}
		s.mu.Lock()
		out.Tasks = slices.Clone(e.Tasks)
		out.Position = slices.Index(s.queue, e) + 1
		s.mu.Unlock()
	}
	return out, nil
}

// hold queues e's task when its rate limit ends. A task already held keeps
// its one timer, moved to the later end if this request was told a later
// one (a run in between moved the limit).
func (s *Scheduler) hold(k heldKey, e *heldEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.held[k]; ok {
		if e.until.After(cur.until) {
			cur.until = e.until
		}
		return
	}
	s.held[k] = e
	s.armHeld(k, e.until)
}

// armHeld starts the timer of held task k for at; s.mu is held.
func (s *Scheduler) armHeld(k heldKey, at time.Time) {
	time.AfterFunc(at.Sub(s.now()), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		e := s.held[k]
		if e == nil || s.stopping {
			return
		}
		if s.now().Before(e.until) { // moved later meanwhile
			s.armHeld(k, e.until)
			return
		}
		delete(s.held, k)
		s.addScopedLocked(k.table, e.ident, []string{k.task}, e.reason, e.source, false, true, k.where)
	})
}

// Stopping reports whether shutdown began (no new work is taken).
func (s *Scheduler) Stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// Known reports whether table is one of the managed tables of the last poll.
func (s *Scheduler) Known(table string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.known[table]
	return ok
}

// Status is the scheduler's state, the document of GET /v1/status.
type Status struct {
	Tables      int           `json:"tables"`
	LastPoll    time.Time     `json:"last_poll,omitzero"`
	LastPollErr string        `json:"last_poll_error,omitempty"`
	Stopping    bool          `json:"stopping,omitempty"`
	Queue       []QueuedTable `json:"queue"`
	Running     []QueuedTable `json:"running"`
	// RunningTasks are the tasks running now, each flagged stuck once it
	// has run past its max_run_time.
	RunningTasks []RunningTask `json:"running_tasks"`
	// Held are requested tasks waiting for their rate_limit to end; each
	// is queued at its held_until.
	Held   []HeldRequest `json:"held"`
	Recent []RecentRun   `json:"recent"`
	// Fleet is this replica's share of the tables; absent without a fleet.
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// FleetStatus is this replica's view of the fleet in GET /v1/status.
type FleetStatus struct {
	Replica string   `json:"replica"`
	Members []string `json:"members"` // sorted; [] while the view is not valid
	// OwnedTables are the managed tables of the last poll this replica
	// owns in the current view.
	OwnedTables int `json:"owned_tables"`
	// Valid: the view is younger than a heartbeat's TTL; when not, this
	// replica owns no table.
	Valid      bool      `json:"valid"`
	ValidUntil time.Time `json:"valid_until,omitzero"`
	Error      string    `json:"error,omitempty"`
}

// HeldRequest is one requested task that its rate_limit holds back.
type HeldRequest struct {
	Table     string    `json:"table"`
	Task      string    `json:"task"`
	HeldUntil time.Time `json:"held_until"`
	Reason    string    `json:"reason,omitempty"`
	Source    string    `json:"source"`
	Where     string    `json:"where,omitempty"`
}

// Status returns a copy of the queue, the running tables and the recent
// outcomes.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Tables: len(s.known), LastPoll: s.lastPoll, LastPollErr: s.lastPollErr, Stopping: s.stopping,
		Queue: []QueuedTable{}, Running: []QueuedTable{}, RunningTasks: s.r.Running(), Held: []HeldRequest{}, Recent: slices.Clone(s.recent)}
	for k, e := range s.held {
		st.Held = append(st.Held, HeldRequest{Table: k.table, Task: k.task, HeldUntil: e.until, Reason: e.reason, Source: e.source, Where: k.where})
	}
	slices.SortFunc(st.Held, func(a, b HeldRequest) int {
		return cmp.Or(strings.Compare(a.Table, b.Table), strings.Compare(a.Task, b.Task), strings.Compare(a.Where, b.Where))
	})
	for _, e := range s.queue {
		st.Queue = append(st.Queue, cloneEntry(e))
	}
	for _, e := range s.running {
		st.Running = append(st.Running, cloneEntry(e))
	}
	slices.SortFunc(st.Running, func(a, b QueuedTable) int { return strings.Compare(a.Table, b.Table) })
	if st.Recent == nil {
		st.Recent = []RecentRun{}
	}
	if s.fleet != nil {
		v := s.fleet.View()
		fs := &FleetStatus{Replica: v.Self, Members: v.Members, Valid: v.Valid, ValidUntil: v.Until, Error: v.Err}
		for name := range s.known {
			if v.Owns(name) {
				fs.OwnedTables++
			}
		}
		st.Fleet = fs
	}
	return st
}

func cloneEntry(e *QueuedTable) QueuedTable {
	c := *e
	c.Tasks, c.Reasons, c.Sources = nonNil(slices.Clone(e.Tasks)), nonNil(slices.Clone(e.Reasons)), nonNil(slices.Clone(e.Sources))
	return c
}

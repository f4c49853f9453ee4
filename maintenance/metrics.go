package maintenance

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/iceberg-maintainer/maintainer/metrics"
)

// Run results as the runs_total metric labels them. A cancelled run is not a
// failed one.
const (
	ResultSuccess  = "success"
	ResultFailure  = "failure"
	ResultSkipped  = "skipped"
	ResultBusy     = "busy"
	ResultCanceled = "canceled"
)

// Metrics are the reconciler's metrics. A nil *Metrics records nothing, so
// `plan` and tests need no registry.
type Metrics struct {
	tables *metrics.Tables

	runs          *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	lastSuccess   *prometheus.GaugeVec
	filesIn       *prometheus.CounterVec
	bytesIn       *prometheus.CounterVec
	filesOut      *prometheus.CounterVec
	bytesOut      *prometheus.CounterVec
	expired       *prometheus.CounterVec
	retryDropped  *prometheus.CounterVec
	filesDeleted  *prometheus.CounterVec
	bytesDeleted  *prometheus.CounterVec
	orphansFound  *prometheus.CounterVec
	lost          *prometheus.CounterVec
	orphanFiles   *prometheus.GaugeVec
	orphanBytes   *prometheus.GaugeVec
	conflicts     *prometheus.CounterVec
	lockAcquire   *prometheus.CounterVec
	lockWait      prometheus.Histogram
	lockLosses    prometheus.Counter
	triggers      *prometheus.CounterVec
	queueLength   prometheus.Gauge
	running       prometheus.Gauge
	managed       prometheus.Gauge
	owned         prometheus.Gauge
	polls         *prometheus.CounterVec
	healthFiles   *prometheus.GaugeVec
	healthSmall   *prometheus.GaugeVec
	healthCompact *prometheus.GaugeVec
	healthBytes   *prometheus.GaugeVec
	healthDeletes *prometheus.GaugeVec
	healthSnaps   *prometheus.GaugeVec
	healthOldest  *prometheus.GaugeVec
	healthCommits *prometheus.GaugeVec
	healthTime    *prometheus.GaugeVec
	taskRunning   *runningCollector
}

// NewMetrics registers the reconciler's metrics on reg. tables bounds the
// table label (nil: every table is "_other").
func NewMetrics(reg prometheus.Registerer, tables *metrics.Tables) *Metrics {
	f := promauto.With(reg)
	ns := metrics.Namespace
	tl := metrics.LabelTable
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return f.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	m := &Metrics{
		tables: tables,
		runs: counter("runs_total", "Task runs by table, task and result (success, failure, skipped, busy, canceled).",
			tl, metrics.LabelTask, metrics.LabelResult),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "run_duration_seconds",
			Help:    "Duration of task runs that did work (success or failure), by task.",
			Buckets: prometheus.ExponentialBuckets(0.1, 3, 11)}, []string{metrics.LabelTask}),
		lastSuccess: gauge("last_success_timestamp_seconds", "When a task last succeeded on a table (or found nothing to do), Unix seconds.",
			tl, metrics.LabelTask),
		filesIn:      counter("rewritten_files_total", "Data files rewritten (replaced) by compaction.", tl),
		bytesIn:      counter("rewritten_bytes_total", "Bytes of data files rewritten (replaced) by compaction.", tl),
		filesOut:     counter("written_files_total", "Data files written by compaction.", tl),
		bytesOut:     counter("written_bytes_total", "Bytes of data files written by compaction.", tl),
		expired:      counter("snapshots_expired_total", "Snapshots expired.", tl),
		retryDropped: counter("expire_retry_dropped_files_total", "Files expiry failed to delete in 5 retry runs; left for the orphan pass.", tl),
		filesDeleted: counter("deleted_files_total", "Files deleted, by task (expire: unreferenced files of expired snapshots; orphans: orphan files).", tl, metrics.LabelTask),
		bytesDeleted: counter("deleted_bytes_total", "Bytes of files deleted, by task.", tl, metrics.LabelTask),
		orphansFound: counter("orphan_files_found_total", "Orphan files found past the minimum age, summed over scans.", tl),
		lost: counter("deleted_referenced_files_total",
			"Files a task deleted that the table referenced right after, by task (orphans; expire: its retried deletes): a writer committed them while they were deleted (the run failed).", tl, metrics.LabelTask),
		orphanFiles: gauge("table_orphan_files", "Orphan files past the minimum age found by the last scan of a table.", tl),
		orphanBytes: gauge("table_orphan_bytes", "Bytes of orphan files past the minimum age found by the last scan of a table.", tl),
		conflicts:   counter("commit_conflicts_total", "Commits retried after a conflict with a concurrent writer, by task.", tl, metrics.LabelTask),
		lockAcquire: counter("lock_acquisitions_total", "Attempts to take a table's lease, by result (acquired, busy, error).",
			metrics.LabelResult),
		lockWait: f.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "lock_wait_seconds",
			Help:    "Time spent waiting for a table's lease before taking it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 9)}),
		lockLosses: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "lock_losses_total",
			Help: "Leases lost while a task ran (extension failed or expired); the task stopped before its next commit or delete."}),
		triggers: metrics.TriggerRequests(reg),
		queueLength: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "queue_length",
			Help: "Tables waiting in serve's queue."}),
		running: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "running_tables",
			Help: "Tables being maintained right now."}),
		managed: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "managed_tables",
			Help: "Tables selected for maintenance at the last poll."}),
		owned: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "owned_tables",
			Help: "Managed tables this replica owns in its view of the fleet at the last poll: those it polls, measures and maintains."}),
		polls:         counter("polls_total", "Polls of the catalog by result (success, failure).", metrics.LabelResult),
		healthFiles:   gauge("table_data_files", "Data files in the table's current snapshot.", tl),
		healthSmall:   gauge("table_small_files", "Data files smaller than the compaction minimum size.", tl),
		healthCompact: gauge("table_compactable_files", "Small files in partitions compaction would rewrite by file sizes: what compaction would merge.", tl),
		healthBytes:   gauge("table_data_bytes", "Bytes of data files in the table's current snapshot.", tl),
		healthDeletes: gauge("table_delete_files", "Delete files (position, equality, deletion vectors) in the current snapshot.", tl),
		healthSnaps:   gauge("table_snapshots", "Snapshots in the table's metadata.", tl),
		healthOldest:  gauge("table_oldest_snapshot_timestamp_seconds", "Timestamp of the table's oldest snapshot, Unix seconds.", tl),
		healthCommits: gauge("table_commits_since_compaction", "Writers' commits on main since the last compaction.", tl),
		healthTime:    gauge("table_health_timestamp_seconds", "When the table's health gauges were last measured, Unix seconds.", tl),
	}
	m.taskRunning = &runningCollector{tables: tables,
		running: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "task_running_seconds"),
			"How long each task running now has been running, by table and task; gone when it ends.",
			[]string{tl, metrics.LabelTask}, nil),
		limit: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "task_max_run_time_seconds"),
			"The max_run_time of each task running now, by table and task; a task running longer is stuck.",
			[]string{tl, metrics.LabelTask}, nil)}
	if reg != nil {
		reg.MustRegister(m.taskRunning)
	}
	tables.OnForget(func(table string) {
		metrics.DeleteTable(table, m.runs, m.lastSuccess, m.filesIn, m.bytesIn, m.filesOut, m.bytesOut, m.expired,
			m.retryDropped, m.filesDeleted, m.bytesDeleted, m.orphansFound, m.lost, m.orphanFiles, m.orphanBytes, m.conflicts,
			m.healthFiles, m.healthSmall, m.healthCompact, m.healthBytes, m.healthDeletes, m.healthSnaps, m.healthOldest,
			m.healthCommits, m.healthTime)
	})
	return m
}

// result maps an outcome to the runs_total result label.
func result(o Outcome) string {
	switch o.Status {
	case StatusSucceeded:
		return ResultSuccess
	case StatusBusy:
		return ResultBusy
	case StatusNotDue, StatusSkipped, StatusPlanned:
		return ResultSkipped
	}
	if o.canceled {
		return ResultCanceled
	}
	return ResultFailure
}

// outcome records one task outcome.
func (m *Metrics) outcome(o Outcome, at time.Time) {
	if m == nil || o.Status == StatusPlanned {
		return
	}
	tl, own := m.tables.Label(o.Table)
	res := result(o)
	m.runs.WithLabelValues(tl, o.Task, res).Inc()
	if res == ResultSuccess || res == ResultFailure {
		m.duration.WithLabelValues(o.Task).Observe(o.Seconds)
	}
	if own && (o.Status == StatusSucceeded || o.Status == StatusNotDue && o.ran) {
		m.lastSuccess.WithLabelValues(tl, o.Task).Set(float64(at.Unix()))
	}
	if c := o.Compact; c != nil && o.Status != StatusNotDue {
		m.filesIn.WithLabelValues(tl).Add(float64(c.FilesIn))
		m.bytesIn.WithLabelValues(tl).Add(float64(c.BytesIn))
		m.filesOut.WithLabelValues(tl).Add(float64(c.FilesOut))
		m.bytesOut.WithLabelValues(tl).Add(float64(c.BytesOut))
		m.conflicts.WithLabelValues(tl, o.Task).Add(float64(c.CommitRetries))
	}
	if d := o.Deletes; d != nil && d.Result != nil {
		m.conflicts.WithLabelValues(tl, o.Task).Add(float64(d.Result.CommitRetries))
	}
	if mr := o.Manifests; mr != nil {
		m.conflicts.WithLabelValues(tl, o.Task).Add(float64(mr.CommitRetries))
	}
	if e := o.Expire; e != nil {
		m.expired.WithLabelValues(tl).Add(float64(e.SnapshotsExpired))
		m.retryDropped.WithLabelValues(tl).Add(float64(e.RetryDropped))
		if e.Retry != nil {
			m.lost.WithLabelValues(tl, o.Task).Add(float64(len(e.Retry.DeletedReferenced)))
		}
		m.filesDeleted.WithLabelValues(tl, o.Task).Add(float64(e.FilesDeleted))
		m.bytesDeleted.WithLabelValues(tl, o.Task).Add(float64(e.BytesDeleted))
		if e.Result != nil {
			m.conflicts.WithLabelValues(tl, o.Task).Add(float64(e.Result.CommitRetries))
		}
	}
	if r := o.Orphans; r != nil {
		m.filesDeleted.WithLabelValues(tl, o.Task).Add(float64(r.FilesDeleted))
		m.bytesDeleted.WithLabelValues(tl, o.Task).Add(float64(r.BytesDeleted))
		m.orphansFound.WithLabelValues(tl).Add(float64(r.FilesFound))
		m.lost.WithLabelValues(tl, o.Task).Add(float64(len(r.DeletedReferenced)))
		if own {
			// What is left after this run (also a failed one, whose deletes
			// may have failed): found minus deleted. The report exists only
			// when the scan itself completed.
			m.orphanFiles.WithLabelValues(tl).Set(float64(r.FilesFound - r.FilesDeleted))
			m.orphanBytes.WithLabelValues(tl).Set(float64(r.BytesFound - r.BytesDeleted))
		}
	}
}

// lock records a lease attempt: result is acquired, busy or error.
func (m *Metrics) lock(result string, waited time.Duration) {
	if m == nil {
		return
	}
	m.lockAcquire.WithLabelValues(result).Inc()
	if result == "acquired" {
		m.lockWait.Observe(waited.Seconds())
	}
}

func (m *Metrics) lockLost() {
	if m != nil {
		m.lockLosses.Inc()
	}
}

// trigger counts one request to run a table.
func (m *Metrics) trigger(source, result string) {
	if m != nil {
		m.triggers.WithLabelValues(source, result).Inc()
	}
}

// health sets a table's gauges. Only tables with a label of their own get
// gauges: "_other" would mix tables.
func (m *Metrics) health(h Health, at time.Time) {
	if m == nil || h.Error != "" {
		return
	}
	tl, own := m.tables.Label(h.Table)
	if !own {
		return
	}
	m.healthFiles.WithLabelValues(tl).Set(float64(h.DataFiles))
	m.healthSmall.WithLabelValues(tl).Set(float64(h.SmallFiles))
	m.healthCompact.WithLabelValues(tl).Set(float64(h.CompactableFiles))
	m.healthBytes.WithLabelValues(tl).Set(float64(h.DataBytes))
	m.healthDeletes.WithLabelValues(tl).Set(float64(h.DeleteFiles()))
	m.healthSnaps.WithLabelValues(tl).Set(float64(h.Snapshots))
	if h.OldestSnapshot != nil {
		m.healthOldest.WithLabelValues(tl).Set(float64(h.OldestSnapshot.Unix()))
	}
	m.healthCommits.WithLabelValues(tl).Set(float64(h.CommitsSinceCompaction))
	m.healthTime.WithLabelValues(tl).Set(float64(at.Unix()))
}

// managedTables records the sizes of the selection and of this replica's
// share after a poll, and forgets the series of the tables not in keep
// (those that left the selection, or another replica owns).
func (m *Metrics) managedTables(managed, owned int, keep map[string]bool) {
	if m == nil {
		return
	}
	m.managed.Set(float64(managed))
	m.owned.Set(float64(owned))
	m.tables.Retain(keep)
}

// dropHealth deletes a table's health and orphan gauges: another replica
// owns it now and measures it, and a stale copy here would mislead max by
// (table).
func (m *Metrics) dropHealth(table string) {
	if m == nil {
		return
	}
	metrics.DeleteTable(table, m.orphanFiles, m.orphanBytes, m.healthFiles, m.healthSmall, m.healthCompact, m.healthBytes,
		m.healthDeletes, m.healthSnaps, m.healthOldest, m.healthCommits, m.healthTime)
}

func (m *Metrics) poll(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.polls.WithLabelValues(ResultSuccess).Inc()
	} else {
		m.polls.WithLabelValues(ResultFailure).Inc()
	}
}

func (m *Metrics) queue(queued, running int) {
	if m == nil {
		return
	}
	m.queueLength.Set(float64(queued))
	m.running.Set(float64(running))
}

// WatchRunning makes the running-task gauges read the tasks running now
// from list, at scrape time.
func (m *Metrics) WatchRunning(list func() []RunningTask) {
	if m == nil {
		return
	}
	m.taskRunning.mu.Lock()
	m.taskRunning.list = list
	m.taskRunning.mu.Unlock()
}

// runningCollector computes task_running_seconds and
// task_max_run_time_seconds when scraped, so a task's series grows while it
// hangs and disappears as soon as it ends. Tables sharing _other show the
// task that is furthest past (or least short of) its limit, so a stuck task
// shows there too.
type runningCollector struct {
	running, limit *prometheus.Desc
	tables         *metrics.Tables
	mu             sync.Mutex
	list           func() []RunningTask // nil until a runner watches
}

func (c *runningCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.limit
}

func (c *runningCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	list := c.list
	c.mu.Unlock()
	if list == nil {
		return
	}
	type key struct{ table, task string }
	shown := map[key]RunningTask{}
	for _, t := range list() {
		tl, _ := c.tables.Label(t.Table)
		k := key{tl, t.Task}
		if prev, ok := shown[k]; !ok || t.RunningFor-t.MaxRunTime > prev.RunningFor-prev.MaxRunTime {
			shown[k] = t
		}
	}
	for k, t := range shown {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, time.Duration(t.RunningFor).Seconds(), k.table, k.task)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, time.Duration(t.MaxRunTime).Seconds(), k.table, k.task)
	}
}

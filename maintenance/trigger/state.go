package trigger

import (
	"time"

	"github.com/apache/iceberg-go/table"
)

// State is what is remembered per table and task between passes (JSON, in a
// file or Redis). The zero State means "never run".
type State struct {
	// LastRun is the start of the last run that completed its work
	// (succeeded, or found nothing to do): the interval counts from it.
	LastRun time.Time `json:"last_run,omitzero"`
	// LastAttempt is the start of the last run whatever its result: the
	// rate limit counts from it.
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	// SnapshotID, SequenceNumber and TimestampMs locate main's current
	// snapshot when LastRun started: counters start after it. The sequence
	// number (v2+) or timestamp (v1) still bounds the count once that
	// snapshot has been expired.
	SnapshotID     int64 `json:"snapshot_id,omitempty"`
	SequenceNumber int64 `json:"sequence_number,omitempty"`
	TimestampMs    int64 `json:"timestamp_ms,omitempty"`
	// TableUUID tells a table dropped and re-created under the same name
	// from the one the position above belongs to.
	TableUUID  string `json:"table_uuid,omitempty"`
	LastResult string `json:"last_result,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	// Retry holds files a run proved unreferenced but failed to delete;
	// the task's next run retries them first. Record leaves it alone: the
	// task itself sets it, whatever the run's result.
	Retry *Retry `json:"retry,omitempty"`
}

// MaxRetryPaths bounds Retry.Paths, so that a store that was down for a
// huge delete does not make the state unbounded; the rest are left for the
// orphan pass.
const MaxRetryPaths = 10_000

// Retry is a bounded list of files to delete again.
type Retry struct {
	// TableUUID is the table the paths belong to: a table dropped and
	// re-created under the same name does not inherit them.
	TableUUID string   `json:"table_uuid"`
	Paths     []string `json:"paths"`
	// Dropped counts the failed paths the last run could not keep beyond
	// MaxRetryPaths; they wait for the orphan pass.
	Dropped int `json:"dropped,omitempty"`
	// Runs counts, per path, the runs that retried it and failed again.
	Runs map[string]int `json:"runs,omitempty"`
}

// MaxRetryRuns bounds the runs that retry a path: a key under an object
// lock or denied by a policy fails every time, and would otherwise fail
// every expiry run of its table for good. After that many it is left for
// the orphan pass.
const MaxRetryRuns = 5

// NextRetry returns the list after a run of table tableUUID that retried
// prev: again are prev's paths that failed again, added those the run
// newly failed to delete. Each path of again for which counted says so
// (its delete was sent and failed; nil counts none) counts one more run,
// and those reaching MaxRetryRuns are returned as dropped instead of kept.
// A prev of another table counts nothing.
func NextRetry(prev *Retry, tableUUID string, again []string, counted func(path string) bool, added ...[]string) (next *Retry, dropped []string) {
	var runs map[string]int
	if prev != nil && prev.TableUUID == tableUUID {
		runs = prev.Runs
	}
	kept := make([]string, 0, len(again))
	nextRuns := map[string]int{}
	for _, p := range again {
		n := runs[p]
		if counted != nil && counted(p) {
			n++
		}
		if n >= MaxRetryRuns {
			dropped = append(dropped, p)
			continue
		}
		kept = append(kept, p)
		if n > 0 {
			nextRuns[p] = n
		}
	}
	next = NewRetry(tableUUID, append([][]string{kept}, added...)...)
	if next != nil {
		for _, p := range next.Paths {
			if n := nextRuns[p]; n > 0 {
				if next.Runs == nil {
					next.Runs = map[string]int{}
				}
				next.Runs[p] = n
			}
		}
	}
	return next, dropped
}

// NewRetry returns the files of lists (in order, without duplicates) to
// retry for table tableUUID, at most MaxRetryPaths of them; nil when there
// are none.
func NewRetry(tableUUID string, lists ...[]string) *Retry {
	r := &Retry{TableUUID: tableUUID}
	seen := map[string]bool{}
	for _, l := range lists {
		for _, p := range l {
			switch {
			case seen[p]:
			case len(r.Paths) < MaxRetryPaths:
				seen[p] = true
				r.Paths = append(r.Paths, p)
			default:
				seen[p] = true
				r.Dropped++
			}
		}
	}
	if len(r.Paths) == 0 {
		return nil
	}
	return r
}

// RetryPaths returns the paths to retry for table tableUUID: none when the
// list belongs to another table of the same name.
func (st State) RetryPaths(tableUUID string) []string {
	if st.Retry == nil || st.Retry.TableUUID != tableUUID {
		return nil
	}
	return st.Retry.Paths
}

// Mark is the table position a run starts from: main's current snapshot of
// the table as loaded before planning. Commits that land while the run works
// come after it, so the next count includes them.
type Mark struct {
	SnapshotID     int64
	SequenceNumber int64
	TimestampMs    int64
	TableUUID      string
}

// MarkOf returns the position of meta's main branch. A table without
// snapshots yields a Mark without one: everything committed later counts.
func MarkOf(meta table.Metadata) Mark {
	m := Mark{TableUUID: meta.TableUUID().String()}
	if s := meta.CurrentSnapshot(); s != nil {
		m.SnapshotID, m.SequenceNumber, m.TimestampMs = s.SnapshotID, s.SequenceNumber, s.TimestampMs
	}
	return m
}

// Record returns the State after a run that started at start from position
// m. result is the outcome status shown to users (e.g. "succeeded"); err, if
// any, is kept as text. Only a completed run (its work done, or nothing to
// do) moves LastRun and the position, so a failed run's commits keep
// counting and the task stays due for its retry.
func Record(st State, m Mark, start time.Time, result string, err error, completed bool) State {
	start = start.UTC()
	st.LastAttempt = start
	st.LastResult = result
	st.LastError = ""
	if err != nil {
		st.LastError = err.Error()
	}
	if completed {
		st.LastRun = start
		st.SnapshotID, st.SequenceNumber, st.TimestampMs = m.SnapshotID, m.SequenceNumber, m.TimestampMs
		st.TableUUID = m.TableUUID
	}
	return st
}

// hasPosition reports whether st locates a snapshot to count from.
func (st State) hasPosition() bool {
	return st.SnapshotID != 0 || st.SequenceNumber != 0 || st.TimestampMs != 0
}

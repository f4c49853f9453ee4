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

package maintenance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// Health is a table's state as `status` shows it and health gauges export.
type Health struct {
	Table              string `json:"table"`
	CurrentSnapshotID  int64  `json:"current_snapshot_id,omitempty"`
	DataFiles          int    `json:"data_files"`
	DataBytes          int64  `json:"data_bytes"`
	Rows               int64  `json:"rows_before_deletes"`
	AvgFileSize        int64  `json:"avg_file_size_bytes"`
	SmallFiles         int    `json:"small_files"`
	SmallFileThreshold int64  `json:"small_file_threshold_bytes"`
	// CompactableFiles are the small files in the partitions compaction
	// would rewrite by file sizes (PartitionsToCompact): what it would
	// merge. A partition with a single small file counts in SmallFiles only,
	// and so does a file compact.where keeps out of compaction.
	CompactableFiles int `json:"compactable_files"`
	// Partitions hold data files; PartitionsToCompact are those a plan
	// would rewrite by the sizes of their files (compaction's rules, the
	// delete-laden rule aside): a backfill's progress is the partitions done
	// (Partitions - PartitionsToCompact - PartitionsOutOfScope) against
	// those left.
	// PartitionsOutOfScope hold no file compact.where lets compaction
	// rewrite: never left to compact, and not compacted either.
	Partitions             int        `json:"partitions"`
	PartitionsToCompact    int        `json:"partitions_to_compact"`
	PartitionsOutOfScope   int        `json:"partitions_out_of_scope,omitempty"`
	PositionDeleteFiles    int        `json:"position_delete_files"`
	EqualityDeleteFiles    int        `json:"equality_delete_files"`
	Snapshots              int        `json:"snapshots"`
	OldestSnapshot         *time.Time `json:"oldest_snapshot,omitempty"`
	CommitsSinceCompaction int        `json:"commits_since_compaction"`
	LastCompaction         *time.Time `json:"last_compaction,omitempty"`
	// Tasks are each task's last run, from the trigger state; [] when
	// unknown (the table could not be loaded).
	Tasks []TaskState `json:"tasks"`
	Error string      `json:"error,omitempty"`
}

// TaskState is when a task last ran on a table and how it ended.
type TaskState struct {
	Task        string    `json:"task"`
	LastRun     time.Time `json:"last_run,omitzero"`     // last run that did its work
	LastAttempt time.Time `json:"last_attempt,omitzero"` // last run whatever its result
	LastResult  string    `json:"last_result,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	// Settings are the task's values not at their built-in defaults, with
	// where each came from; InvalidSettings why the table's maintainer.*
	// properties for the task are refused (the task fails on the table).
	Settings        []Setting `json:"settings,omitempty"`
	InvalidSettings string    `json:"invalid_settings,omitempty"`
	// Window says whether the task's trigger window is open now, and if
	// not when it opens; empty without a window.
	Window string `json:"window,omitempty"`
}

// DeleteFiles counts both kinds of delete files (and deletion vectors).
func (h Health) DeleteFiles() int { return h.PositionDeleteFiles + h.EqualityDeleteFiles }

// Health loads a table and measures it from its current snapshot's manifests.
func (r *Runner) Health(ctx context.Context, ident table.Identifier) Health {
	name := strings.Join(ident, ".")
	tbl, pol, err := r.load(ctx, ident, name)
	if err != nil {
		return Health{Table: name, Tasks: []TaskState{}, Error: err.Error()}
	}
	h, err := TableHealth(ctx, tbl, pol.Compact)
	h.Table, h.Tasks = name, []TaskState{}
	if err != nil {
		h.Error = err.Error()
	}
	for _, task := range TaskNames() {
		st, err := r.state.Load(ctx, name, task)
		if err != nil {
			h.Error = joinWhy(h.Error, err.Error())
			continue
		}
		ts := TaskState{Task: task, LastRun: st.LastRun, LastAttempt: st.LastAttempt,
			LastResult: st.LastResult, LastError: st.LastError, Settings: pol.Settings[task],
			Window: trigger.WindowStatus(pol.Triggers[task], r.now())}
		if err := pol.Invalid[task]; err != nil {
			ts.InvalidSettings = err.Error()
		}
		h.Tasks = append(h.Tasks, ts)
	}
	return h
}

// TableHealth measures a loaded table. Files below the compaction policy's
// minimum size count as small.
func TableHealth(ctx context.Context, tbl *table.Table, cfg compact.Config) (Health, error) {
	var h Health
	target, minSize, maxSize, _ := compact.Sizes(cfg, tbl.Properties())
	h.SmallFileThreshold = minSize
	meta := tbl.Metadata()
	snaps := meta.Snapshots()
	h.Snapshots = len(snaps)
	for _, s := range snaps {
		t := time.UnixMilli(s.TimestampMs).UTC()
		if h.OldestSnapshot == nil || t.Before(*h.OldestSnapshot) {
			h.OldestSnapshot = &t
		}
	}
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return h, nil
	}
	h.CurrentSnapshotID = cur.SnapshotID
	// Writers' commits since the last compaction on main; the maintainer's
	// own commits and other engines' rewrites (operation "replace") end
	// the count.
	for s := cur; s != nil; {
		if isCompaction(s) {
			t := time.UnixMilli(s.TimestampMs).UTC()
			h.LastCompaction = &t
			break
		}
		h.CommitsSinceCompaction++
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return h, fmt.Errorf("open table IO: %w", err)
	}
	// compact.where scopes what compaction may rewrite: files outside it
	// are never work left, however small.
	inScope, err := compact.InScope(ctx, tbl, cfg)
	if err != nil {
		return h, fmt.Errorf("list the files compact.where lets compaction rewrite: %w", err)
	}
	manifests, err := cur.Manifests(fs)
	if err != nil {
		return h, fmt.Errorf("read manifest list of snapshot %d: %w", cur.SnapshotID, err)
	}
	smallPerPartition := map[string]int{}
	cands := map[string]*compact.Candidates{} // partitions with files in scope
	parts := map[string]bool{}
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return h, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			df := e.DataFile()
			switch df.ContentType() {
			case iceberg.EntryContentData:
				h.DataFiles++
				h.DataBytes += df.FileSizeBytes()
				h.Rows += df.Count()
				key := partitionKey(df)
				parts[key] = true
				small := df.FileSizeBytes() < h.SmallFileThreshold
				if small {
					h.SmallFiles++
				}
				if inScope != nil && !inScope(df.FilePath()) {
					break // out of the switch: on to the next entry
				}
				c := cands[key]
				if c == nil {
					c = &compact.Candidates{}
					cands[key] = c
				}
				c.Add(cfg, minSize, maxSize, df.FileSizeBytes())
				if small {
					smallPerPartition[key]++
				}
			case iceberg.EntryContentPosDeletes:
				h.PositionDeleteFiles++
			case iceberg.EntryContentEqDeletes:
				h.EqualityDeleteFiles++
			}
		}
	}
	h.Partitions = len(parts)
	h.PartitionsOutOfScope = len(parts) - len(cands)
	if h.DataFiles > 0 {
		h.AvgFileSize = h.DataBytes / int64(h.DataFiles)
	}
	for key, c := range cands {
		if c.Rewritten(cfg, target, minSize, maxSize) {
			h.CompactableFiles += smallPerPartition[key]
			h.PartitionsToCompact++
		}
	}
	return h, nil
}

// partitionKey names a data file's partition: its spec and values, in
// field-id order.
func partitionKey(df iceberg.DataFile) string {
	p := df.Partition()
	ids := slices.Sorted(maps.Keys(p))
	var b strings.Builder
	fmt.Fprintf(&b, "%d", df.SpecID())
	for _, id := range ids {
		fmt.Fprintf(&b, "/%d=%v", id, p[id])
	}
	return b.String()
}

// isCompaction: the maintainer's own compactions and other engines'
// rewrites end the count of writers' commits.
func isCompaction(s *table.Snapshot) bool { return trigger.IsMaintenanceCommit(s) }

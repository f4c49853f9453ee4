package compact

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

// A retry checks only what was committed since the plan, and reads each
// snapshot committed since then once per run: the files it added and
// removed are kept (snapshots are immutable), so a retry beside a fast
// writer reads the few snapshots that landed since the last attempt, not
// the whole, growing table. The rules are Iceberg's (Java's
// validateDataFilesExist and validateNoNewDeletesForDataFiles): a removed
// input, or a new delete that applies to an input, conflicts with the
// input's group.

// fileChange is one file that a snapshot committed after the plan added or
// removed.
type fileChange struct {
	removed   bool // a DELETED entry; otherwise ADDED
	content   iceberg.ManifestEntryContent
	path      string
	ref       string // the one data file a position delete names, if it names one
	partition string // partitionKey of the file's spec and partition
	seq       int64  // data sequence number, -1 when unknown
}

// snapshotChanges holds what one snapshot committed.
type snapshotChanges struct {
	files []fileChange
	// manifests are the manifests the snapshot wrote.
	manifests map[string]bool
}

// changesOf reads the files s added and removed: the entries of the
// manifests s wrote, which carry s's own id. Cached by snapshot id.
func (e *executor) changesOf(s *table.Snapshot) (*snapshotChanges, error) {
	if c, ok := e.changes[s.SnapshotID]; ok {
		return c, nil
	}
	manifests, err := s.Manifests(e.fs)
	if err != nil {
		return nil, fmt.Errorf("read manifest list of snapshot %d: %w", s.SnapshotID, err)
	}
	c := &snapshotChanges{manifests: map[string]bool{}}
	for _, m := range manifests {
		if m.SnapshotID() != s.SnapshotID {
			continue // written by an older snapshot: holds no file s added or removed
		}
		c.manifests[m.FilePath()] = true
		for ent, err := range m.Entries(e.fs, false) {
			if err != nil {
				return nil, fmt.Errorf("read manifest %s of snapshot %d: %w", m.FilePath(), s.SnapshotID, err)
			}
			if ent.SnapshotID() != s.SnapshotID || ent.Status() == iceberg.EntryStatusEXISTING {
				continue
			}
			df := ent.DataFile()
			c.files = append(c.files, fileChange{
				removed:   ent.Status() == iceberg.EntryStatusDELETED,
				content:   df.ContentType(),
				path:      df.FilePath(),
				ref:       referencedPath(df),
				partition: partitionKey(df.SpecID(), df.Partition()),
				seq:       ent.SequenceNum(),
			})
		}
	}
	e.changes[s.SnapshotID] = c
	return c, nil
}

// sincePlan returns the snapshots of the main branch committed after the
// plan, newest first, leaving out this run's own commits; ok is false when
// head does not descend from the planned snapshot.
func (e *executor) sincePlan(meta table.Metadata, head *table.Snapshot) (snaps []*table.Snapshot, ok bool) {
	for s := head; s != nil; s = parent(meta, s) {
		if s.SnapshotID == e.plan.SnapshotID {
			return snaps, true
		}
		if s.Summary != nil && s.Summary.Properties[tableprops.SummaryRunID] == e.opts.RunID {
			continue // our own earlier batch
		}
		snaps = append(snaps, s)
	}
	return snaps, false
}

// dropConflicts removes from the batch every group that a commit since the
// planned snapshot conflicts with: one that removed an input file or a
// delete file applied to one, or added a position delete or deletion vector
// that may target one. Equality deletes
// are no conflict for files of the current spec: the rewrite keeps the
// planned data sequence number, so they apply to the new files as to the old.
func (e *executor) dropConflicts(ctx context.Context, batch []groupOutput) (ok, conflicted []groupOutput) {
	head := e.current.CurrentSnapshot()
	if head == nil || head.SnapshotID == e.plan.SnapshotID {
		return batch, nil
	}
	byPath := map[string]int{}
	byPartition := map[string][]int{}
	byDelete := map[string][]int{} // the delete files applied while reading each group
	for i, out := range batch {
		for t := range out.g.files.all() {
			byPath[t.File.FilePath()] = i
			for _, d := range slices.Concat(t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles) {
				if is := byDelete[d.FilePath()]; len(is) == 0 || is[len(is)-1] != i {
					byDelete[d.FilePath()] = append(is, i)
				}
			}
		}
		byPartition[out.g.key] = append(byPartition[out.g.key], i)
	}
	reasons := map[int]error{}
	conflict := func(i int, format string, args ...any) {
		if reasons[i] == nil {
			reasons[i] = fmt.Errorf("%w: %s", ErrConflict, fmt.Sprintf(format, args...))
		}
	}
	meta := e.current.Metadata()
	currentSpec := meta.DefaultPartitionSpec()
	snaps, descends := e.sincePlan(meta, head)
	if !descends {
		for i := range batch {
			conflict(i, "the main branch no longer descends from planned snapshot %d", e.plan.SnapshotID)
		}
	}
	for _, s := range snaps {
		if ctx.Err() != nil {
			return batch, nil // the caller's ctx check handles it
		}
		c, err := e.changesOf(s)
		if err != nil {
			for i := range batch {
				conflict(i, "cannot check snapshot %d for conflicts: %v", s.SnapshotID, err)
			}
			break
		}
		for _, f := range c.files {
			switch {
			case f.removed && f.content == iceberg.EntryContentData:
				if i, hit := byPath[f.path]; hit {
					conflict(i, "snapshot %d removed input file %s", s.SnapshotID, f.path)
				}
			case f.removed:
				// The rows it deleted are live again, and the rewrite,
				// which applied it, would drop them.
				for _, i := range byDelete[f.path] {
					conflict(i, "snapshot %d removed delete file %s, which applied to input files", s.SnapshotID, f.path)
				}
			case f.content == iceberg.EntryContentEqDeletes:
				// Rows of an older spec land in partitions of the current
				// one: a new equality delete may apply to the old files and
				// not the new, or the other way round.
				for i, out := range batch {
					if out.g.SpecID != currentSpec {
						conflict(i, "snapshot %d added equality deletes while files of partition spec %d were rewritten into spec %d",
							s.SnapshotID, out.g.SpecID, currentSpec)
					}
				}
			case f.content == iceberg.EntryContentPosDeletes:
				if f.ref != "" {
					if i, hit := byPath[f.ref]; hit {
						conflict(i, "snapshot %d added deletes for input file %s", s.SnapshotID, f.ref)
					}
				} else {
					for _, i := range byPartition[f.partition] {
						conflict(i, "snapshot %d added position deletes in partition %s", s.SnapshotID, batch[i].g.Partition)
					}
				}
			}
		}
	}
	for i, out := range batch {
		if err := reasons[i]; err != nil {
			out.err = err
			conflicted = append(conflicted, out)
		} else {
			ok = append(ok, out)
		}
	}
	return ok, conflicted
}

// stillDead returns the delete files of dead that the snapshots since the
// plan left dead. A delete file a concurrent commit removed is no longer
// this rewrite's to remove; and a data file added with a data sequence
// number at or below the planned one (a rewrite elsewhere that kept old
// sequence numbers) may be one those deletes apply to, so none is removed
// then. New data files of ordinary commits have greater sequence numbers
// than every delete that existed at the plan, which cannot apply to them.
func (e *executor) stillDead(dead []iceberg.DataFile) ([]iceberg.DataFile, error) {
	if len(dead) == 0 {
		return nil, nil
	}
	snaps, _ := e.sincePlan(e.current.Metadata(), e.current.CurrentSnapshot())
	gone := map[string]bool{}
	for _, s := range snaps {
		c, err := e.changesOf(s)
		if err != nil {
			return nil, err
		}
		for _, f := range c.files {
			switch {
			case f.removed && f.content != iceberg.EntryContentData:
				gone[f.path] = true
			case !f.removed && f.content == iceberg.EntryContentData && f.seq <= e.plan.SequenceNumber:
				return nil, nil
			}
		}
	}
	var out []iceberg.DataFile
	for _, d := range dead {
		if !gone[d.FilePath()] {
			out = append(out, d)
		}
	}
	return out, nil
}

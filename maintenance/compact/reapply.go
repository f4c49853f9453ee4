package compact

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/iceberg-maintainer/maintainer/internal/manifestlist"
)

// A commit that lost the race to another writer is re-applied on the new
// base as it was built, as Iceberg Java's commit retry does: the same data
// files, the same manifests (the added files, the removed entries, the
// base's manifests rewritten without the removed files), with the manifests
// committed since in place of the old base's. Building the rewrite again
// would read every manifest of the table on each attempt; re-applying it
// reads two manifest lists and the snapshots committed since the last
// attempt, so a retry costs the same however large the table grows.

// errRebuild: the staged rewrite cannot be re-applied on the new base (a
// concurrent commit rewrote manifests it replaces, or the table is not one
// it re-applies on), so it is built again from the new base.
var errRebuild = errors.New("rewrite must be built again on the new base")

// stagedRewrite is one rewrite snapshot that iceberg-go built on a base.
type stagedRewrite struct {
	snap     table.Snapshot  // as built: its manifest list says what it wrote
	built    *table.Snapshot // the head it was built on (its totals)
	applied  *table.Snapshot // the head it was last built or re-applied on
	resolved bool            // own, replaced and known are filled in
	// own are the manifests written for the rewrite.
	own []iceberg.ManifestFile
	// replaced are the base manifests it leaves out: rewritten without
	// the removed files, or dropped when every entry was removed.
	replaced map[string]bool
	// known are the manifests of the heads it was built or re-applied on.
	known map[string]bool
}

// stage keeps the snapshot txn failed to commit on base, for a retry to
// re-apply. Only format v2 tables are re-applied: v1 has no sequence
// numbers to keep, and v3 assigns row ids per commit, which the rebuild
// does for it.
func (e *executor) stage(txn *table.Transaction, base *table.Snapshot) *stagedRewrite {
	if _, ok := e.cat.(table.CatalogIO); !ok || base == nil || e.plan.FormatVersion != 2 {
		return nil
	}
	if _, ok := e.fs.(iceio.WriteFileIO); !ok {
		return nil
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return nil
	}
	snap := staged.SnapshotByName(table.MainBranch)
	if snap == nil || snap.ParentSnapshotID == nil || *snap.ParentSnapshotID != base.SnapshotID {
		return nil
	}
	return &stagedRewrite{snap: *snap, built: base, applied: base}
}

// resolve reads which manifests the rewrite wrote and which of its base's
// it replaces: the difference of the two manifest lists.
func (e *executor) resolve(st *stagedRewrite) error {
	if st.resolved {
		return nil
	}
	baseList, err := st.built.Manifests(e.fs)
	if err != nil {
		return fmt.Errorf("read manifest list of snapshot %d: %w", st.built.SnapshotID, err)
	}
	ownList, err := st.snap.Manifests(e.fs)
	if err != nil {
		return fmt.Errorf("read manifest list of staged snapshot %d: %w", st.snap.SnapshotID, err)
	}
	st.known, st.replaced = map[string]bool{}, map[string]bool{}
	for _, m := range baseList {
		st.known[m.FilePath()] = true
		st.replaced[m.FilePath()] = true
	}
	for _, m := range ownList {
		if st.known[m.FilePath()] {
			delete(st.replaced, m.FilePath())
			continue
		}
		if m.SnapshotID() != st.snap.SnapshotID {
			return fmt.Errorf("%w: manifest %s of the staged snapshot was written by snapshot %d", errRebuild, m.FilePath(), m.SnapshotID())
		}
		st.own = append(st.own, m)
	}
	st.resolved = true
	return nil
}

// reapply commits st on the re-loaded table e.current. Every snapshot since
// the head st was last applied on must have been checked by dropConflicts
// first.
func (e *executor) reapply(ctx context.Context, st *stagedRewrite, attempt int) (*table.Snapshot, error) {
	meta := e.current.Metadata()
	head := e.current.CurrentSnapshot()
	if head == nil {
		return nil, fmt.Errorf("%w: the table has no current snapshot", errRebuild)
	}
	if meta.Version() != 2 {
		return nil, fmt.Errorf("%w: the table is format v%d now", errRebuild, meta.Version())
	}
	if err := e.resolve(st); err != nil {
		return nil, fmt.Errorf("%w: %w", errRebuild, err)
	}
	// The manifests committed since the last attempt were written by the
	// snapshots committed since; anything else is a rewrite of history
	// that only a rebuild handles.
	written := map[string]bool{}
	for s := head; s.SnapshotID != st.applied.SnapshotID; {
		c, err := e.changesOf(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errRebuild, err)
		}
		for m := range c.manifests {
			written[m] = true
		}
		if s = parent(meta, s); s == nil {
			return nil, fmt.Errorf("%w: head %d does not descend from %d", errRebuild, head.SnapshotID, st.applied.SnapshotID)
		}
	}
	headList, err := head.Manifests(e.fs)
	if err != nil {
		return nil, fmt.Errorf("%w: read manifest list of snapshot %d: %w", errRebuild, head.SnapshotID, err)
	}
	seq := meta.LastSequenceNumber() + 1
	list := make([]iceberg.ManifestFile, 0, len(st.own)+len(headList))
	for _, m := range st.own {
		list = append(list, reassign(m, st.snap.SequenceNumber))
	}
	present := map[string]bool{}
	for _, m := range headList {
		p := m.FilePath()
		present[p] = true
		switch {
		case st.replaced[p]:
		case st.known[p] || written[p]:
			list = append(list, m)
		default:
			return nil, fmt.Errorf("%w: manifest %s of head %d was not written since the last attempt", errRebuild, p, head.SnapshotID)
		}
	}
	for p := range st.replaced {
		if !present[p] {
			return nil, fmt.Errorf("%w: a concurrent commit rewrote manifest %s, which this rewrite replaces", errRebuild, p)
		}
	}

	snap := st.snap
	parentID := head.SnapshotID
	snap.ParentSnapshotID = &parentID
	snap.SequenceNumber = seq
	snap.TimestampMs = max(time.Now().UnixMilli(), head.TimestampMs+1)
	snap.Summary = rebaseTotals(st.snap.Summary, st.built, head)
	loc, err := e.current.LocationProvider()
	if err != nil {
		return nil, fmt.Errorf("%w: location provider: %w", errStage, err)
	}
	snap.ManifestList = loc.NewMetadataLocation(fmt.Sprintf("snap-%d-retry%d-%s.avro", snap.SnapshotID, attempt, uuid.NewString()))
	if err := writeManifestList(e.fs.(iceio.WriteFileIO), snap, list); err != nil {
		return nil, fmt.Errorf("%w: write manifest list %s: %w", errStage, snap.ManifestList, err)
	}
	// Should this attempt lose the race too, the next one starts from here.
	st.applied = head
	for p := range present {
		st.known[p] = true
	}
	return e.commitSnapshot(ctx, snap)
}

// reassign returns m with the sequence numbers the manifest list assigns
// to manifests of its own snapshot left unassigned, so the re-applied
// snapshot gives them its new sequence number; a minimum set by explicit
// entry sequence numbers (the kept data sequence number, the removed
// entries') stays.
func reassign(m iceberg.ManifestFile, oldSeq int64) iceberg.ManifestFile {
	minSeq := m.MinSequenceNum()
	if minSeq == oldSeq {
		minSeq = -1
	}
	return iceberg.NewManifestFile(m.Version(), m.FilePath(), m.Length(), m.PartitionSpecID(), m.SnapshotID()).
		Content(m.ManifestContent()).
		SequenceNum(-1, minSeq).
		AddedFiles(m.AddedDataFiles()).ExistingFiles(m.ExistingDataFiles()).DeletedFiles(m.DeletedDataFiles()).
		AddedRows(m.AddedRows()).ExistingRows(m.ExistingRows()).DeletedRows(m.DeletedRows()).
		Partitions(m.Partitions()).
		KeyMetadata(m.KeyMetadata()).
		Build()
}

func writeManifestList(fs iceio.WriteFileIO, snap table.Snapshot, list []iceberg.ManifestFile) error {
	return manifestlist.Write(fs, &snap, 2, 0, list) // only v2 is re-applied (stage)
}

// dropStaged removes the manifests written for st's snapshot when the
// rewrite gives it up: every attempt that sent it was refused, so nothing
// references them. Those of a snapshot iceberg-go staged are known only
// once resolved; unresolved, they are left to the orphan pass.
func (e *executor) dropStaged(st *stagedRewrite) {
	if st == nil || !st.resolved {
		return
	}
	for _, m := range st.own {
		e.removeList(m.FilePath())
	}
}

func (e *executor) removeList(path string) {
	if wfs, ok := e.fs.(iceio.WriteFileIO); ok {
		if err := wfs.Remove(path); err != nil {
			e.log.Warn("could not remove a manifest or manifest list this run wrote; the orphan pass will", "path", path, "err", err)
		}
	}
}

// rebaseTotals moves the table totals of a summary built on one head onto
// another: the rewrite's change to each total stays, the totals it starts
// from are the new head's. A total either head lacks is left out, as
// Iceberg does when it cannot know it.
func rebaseTotals(sum *table.Summary, built, head *table.Snapshot) *table.Summary {
	if sum == nil {
		return nil
	}
	out := &table.Summary{Operation: sum.Operation, Properties: iceberg.Properties{}}
	for k, v := range sum.Properties {
		if !strings.HasPrefix(k, "total-") {
			out.Properties[k] = v
			continue
		}
		mine, err1 := strconv.ParseInt(v, 10, 64)
		from, err2 := strconv.ParseInt(summaryProp(built, k), 10, 64)
		to, err3 := strconv.ParseInt(summaryProp(head, k), 10, 64)
		if err1 == nil && err2 == nil && err3 == nil {
			out.Properties[k] = strconv.FormatInt(to+mine-from, 10)
		}
	}
	return out
}

func summaryProp(s *table.Snapshot, key string) string {
	if s == nil || s.Summary == nil {
		return ""
	}
	return s.Summary.Properties[key]
}

package expire

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// checkRefs runs after the commit: it finds refs that the commit dropped
// without planning to (RemoveSnapshots silently drops every ref pointing at a
// removed snapshot), restores those whose snapshot still exists, and fails
// with ErrRefLost for the others. It returns the freshly loaded table.
func checkRefs(ctx context.Context, cat TableLoader, ident table.Identifier, committed table.Metadata,
	p *Plan, req *refsRequirement, res *Result, log *slog.Logger,
) (*table.Table, error) {
	fresh, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, fmt.Errorf("%w: re-load after commit: %v", ErrUnverifiable, err)
	}
	base := p.refs
	if !req.validated.Load() {
		// The catalog did not run our requirement (REST): read the refs of
		// the metadata the commit was applied to.
		if base, err = baseRefs(ctx, ident, committed, fresh); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnverifiable, err)
		}
	}
	now := maps.Collect(committed.Refs())
	var lost []string
	for _, name := range slices.Sorted(maps.Keys(base)) {
		if _, ok := now[name]; !ok && !p.removesRef(name, base[name].SnapshotID) {
			lost = append(lost, name)
		}
	}
	if len(lost) == 0 {
		return fresh, nil
	}
	freshRefs := maps.Collect(fresh.Metadata().Refs())
	for _, name := range lost {
		ref := base[name]
		if _, back := freshRefs[name]; back {
			continue // someone re-created it meanwhile
		}
		if fresh.Metadata().SnapshotByID(ref.SnapshotID) == nil {
			res.RefsLost = append(res.RefsLost, name)
			log.Error("ref lost with its snapshot; deleting nothing", "ref", name, "snapshot_id", ref.SnapshotID)
			continue
		}
		if err := restoreRef(ctx, cat, ident, fresh, name, ref, log); err != nil {
			res.RefsLost = append(res.RefsLost, name)
			log.Error("ref lost and not restored; deleting nothing", "ref", name, "snapshot_id", ref.SnapshotID, "err", err)
			continue
		}
		res.RefsRestored = append(res.RefsRestored, name)
		log.Warn("ref dropped by the expiry commit was restored", "ref", name, "snapshot_id", ref.SnapshotID)
	}
	if len(res.RefsLost) > 0 {
		return nil, fmt.Errorf("%w: %v (their snapshots were expired; no file was deleted, so their data is still on storage)",
			ErrRefLost, res.RefsLost)
	}
	if fresh, err = cat.LoadTable(ctx, ident); err != nil {
		return nil, fmt.Errorf("%w: re-load after restoring refs: %v", ErrUnverifiable, err)
	}
	return fresh, nil
}

// baseRefs reads the refs of the metadata file the commit replaced, the last
// entry of the committed metadata's log.
func baseRefs(ctx context.Context, ident table.Identifier, committed table.Metadata, fresh *table.Table) (map[string]table.SnapshotRef, error) {
	var prev string
	for e := range committed.PreviousFiles() {
		prev = e.MetadataFile
	}
	if prev == "" {
		return nil, fmt.Errorf("the committed metadata has no metadata log; cannot tell which refs the commit replaced")
	}
	fsF := func(ctx context.Context) (iceio.IO, error) { return fresh.FS(ctx) }
	base, err := table.NewFromLocation(ctx, ident, prev, fsF, nil)
	if err != nil {
		return nil, fmt.Errorf("read the replaced metadata %s: %w", prev, err)
	}
	return maps.Collect(base.Metadata().Refs()), nil
}

func restoreRef(ctx context.Context, cat TableLoader, ident table.Identifier, fresh *table.Table, name string, ref table.SnapshotRef,
	log *slog.Logger) error {
	var maxRefAge, maxSnapAge int64
	var minKeep int
	if ref.MaxRefAgeMs != nil {
		maxRefAge = *ref.MaxRefAgeMs
	}
	if ref.MaxSnapshotAgeMs != nil {
		maxSnapAge = *ref.MaxSnapshotAgeMs
	}
	if ref.MinSnapshotsToKeep != nil {
		minKeep = *ref.MinSnapshotsToKeep
	}
	reqs := []table.Requirement{table.AssertTableUUID(fresh.Metadata().TableUUID()), table.AssertRefSnapshotID(name, nil)}
	ups := []table.Update{table.NewSetSnapshotRefUpdate(name, ref.SnapshotID, ref.SnapshotRefType, maxRefAge, maxSnapAge, minKeep)}
	committed, _, err := cat.CommitTable(ctx, ident, reqs, ups)
	if err == nil {
		removeDroppedMetadata(ctx, fresh, committed, log)
	}
	return err
}

package compact

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/iceberg-maintainer/maintainer/internal/manifestlist"
	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
	"github.com/iceberg-maintainer/maintainer/internal/metacommit"
)

// The rewrite snapshot of a batch is written here, not by iceberg-go's
// RewriteFiles, on format v1 and v2 tables: iceberg-go keeps every removed
// entry (with its column statistics) and every rewritten manifest's
// surviving entries in memory until it commits, which at 40,000 input files
// is most of a run's peak. Here the removed files are a set of paths, each
// base manifest is streamed entry by entry into its rewrite, and nothing
// holds more than one entry's statistics at a time. The snapshot is what
// iceberg-go would commit: the same summary, the planned data sequence
// number on the added files, DELETED entries (with their sequence numbers)
// for the removed ones, which the conflict checks of other runs read
// (changesOf), and EXISTING entries for what stays, keeping theirs.
//
// Format v3 goes through iceberg-go, which assigns the row ids of the
// manifests it writes (the rewritten manifests' EXISTING rows keep theirs);
// so do tables that ask for per-partition summaries
// (write.summary.partition-limit), which iceberg-go computes.

// ownCommit reports whether build writes the batch's snapshot itself.
func (e *executor) ownCommit() bool {
	if e.plan.FormatVersion > 2 || e.current.Metadata().Version() > 2 || e.current.CurrentSnapshot() == nil {
		return false
	}
	if _, ok := e.cat.(table.CatalogIO); !ok {
		return false
	}
	if _, ok := e.fs.(iceio.WriteFileIO); !ok {
		return false
	}
	return e.current.Properties().GetInt(table.WritePartitionSummaryLimitKey, table.WritePartitionSummaryLimitDefault) <= 0
}

// gone is what a rewrite removes, by path, with how often each was found
// live in the base's manifests.
type gone struct {
	data, deletes map[string]int
}

func (g gone) has(content int32, path string) bool {
	if content == int32(iceberg.EntryContentData) {
		_, ok := g.data[path]
		return ok
	}
	_, ok := g.deletes[path]
	return ok
}

func (g gone) mark(content iceberg.ManifestEntryContent, path string) {
	if content == iceberg.EntryContentData {
		g.data[path]++
	} else {
		g.deletes[path]++
	}
}

// check fails unless every removed file was live exactly once in the base.
func (g gone) check(baseID int64) error {
	for _, set := range []map[string]int{g.data, g.deletes} {
		for p, n := range set {
			if n != 1 {
				return fmt.Errorf("file %s to be replaced is live %d times in snapshot %d, not once", p, n, baseID)
			}
		}
	}
	return nil
}

// buildOwn writes the rewrite of the batch on e.current and commits it;
// when the commit loses a race, the staged rewrite is returned for the next
// attempt to re-apply.
func (e *executor) buildOwn(ctx context.Context, batch []groupOutput, batchID string, dead []iceberg.DataFile) (*stagedRewrite, *table.Snapshot, error) {
	meta := e.current.Metadata()
	base := e.current.CurrentSnapshot()
	loc, err := e.current.LocationProvider()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: location provider: %w", errStage, err)
	}
	w := &snapshotWriter{fs: e.fs.(iceio.WriteFileIO), meta: meta, loc: loc, id: manifestlist.NewSnapshotID(meta),
		commit: uuid.NewString(), partitions: map[string]struct{}{},
		target: e.current.Properties().GetInt64(table.ManifestTargetSizeBytesKey, table.ManifestTargetSizeBytesDefault)}
	if meta.Version() >= 2 {
		w.seq = meta.LastSequenceNumber() + 1
	}
	g := gone{data: map[string]int{}, deletes: map[string]int{}}
	var added []iceberg.DataFile
	for _, out := range batch {
		for t := range out.g.files.all() {
			g.data[t.File.FilePath()] = 0
		}
		for _, dv := range safeDeletionVectors(out.g) {
			g.deletes[dv.FilePath()] = 0
		}
		added = append(added, out.files...)
	}
	for _, d := range dead {
		g.deletes[d.FilePath()] = 0
	}

	snap, err := w.write(ctx, base, g, added, e.plan.SequenceNumber)
	if err != nil {
		w.removeAll(e)
		return nil, nil, fmt.Errorf("%w: %w", errStage, err)
	}
	props := iceberg.Properties{}
	e.markers(props, batch, batchID)
	snap.Summary = w.summary(base, props)

	landed, err := e.commitSnapshot(ctx, snap)
	if err == nil {
		return nil, landed, nil
	}
	if errors.Is(err, errStage) { // not sent
		w.removeAll(e)
		return nil, nil, err
	}
	if !isDefiniteFailure(err) {
		return nil, nil, err // unknown: what it wrote may be live
	}
	if meta.Version() == 2 {
		// Re-applied on the next head as it is (reapply.go).
		st := &stagedRewrite{snap: snap, built: base, applied: base, resolved: true,
			own: w.own, replaced: w.replaced, known: w.baseManifests}
		return st, nil, err
	}
	w.removeAll(e)
	return nil, nil, err
}

// commitSnapshot commits snap on e.current's head, its parent, with the
// requirements every commit carries: the table and main's head unchanged.
// A manifest list that a definite failure leaves unreferenced is removed
// (a retry writes its own).
func (e *executor) commitSnapshot(ctx context.Context, snap table.Snapshot) (*table.Snapshot, error) {
	cat := e.cat.(table.CatalogIO)
	meta := e.current.Metadata()
	builder, err := table.MetadataBuilderFromBase(meta, e.current.MetadataLocation())
	if err != nil {
		e.removeList(snap.ManifestList)
		return nil, fmt.Errorf("%w: %w", errStage, err)
	}
	updates := []table.Update{
		table.NewAddSnapshotUpdate(&snap),
		// The catalog replaces the ref as a whole: keep main's retention.
		builder.NewRetainingSnapshotRefUpdate(table.MainBranch, snap.SnapshotID, table.BranchRef),
	}
	reqs := []table.Requirement{
		table.AssertTableUUID(meta.TableUUID()),
		table.AssertRefSnapshotID(table.MainBranch, snap.ParentSnapshotID),
	}
	if ctx.Err() != nil {
		// Stopped (a lost lease, shutdown) before sending: nothing to find
		// out, and nothing of the batch is live.
		e.removeList(snap.ManifestList)
		return nil, fmt.Errorf("%w: commit snapshot %d: stopped: %w", errStage, snap.SnapshotID, context.Cause(ctx))
	}
	var newMeta table.Metadata
	var newLoc string
	if e.opts.Swap != nil && metacommit.Version(e.current.MetadataLocation()) >= 0 {
		newMeta, newLoc, err = metacommit.Commit(ctx, e.opts.Swap, e.current, reqs, updates)
	} else {
		newMeta, newLoc, err = cat.CommitTable(ctx, e.current.Identifier(), reqs, updates)
	}
	if errors.Is(err, metacommit.ErrNotSent) {
		e.removeList(snap.ManifestList)
		return nil, fmt.Errorf("%w: commit snapshot %d: %w", errStage, snap.SnapshotID, err)
	}
	if err != nil {
		if isDefiniteFailure(err) {
			e.removeList(snap.ManifestList)
		}
		return nil, fmt.Errorf("commit snapshot %d: %w", snap.SnapshotID, err)
	}
	e.current = table.New(e.current.Identifier(), newMeta, newLoc, e.current.FS, cat)
	metacommit.RemoveDropped(ctx, e.fs, meta, newMeta, e.log)
	return e.current.SnapshotByID(snap.SnapshotID), nil
}

// snapshotWriter writes the manifests and the manifest list of one rewrite
// snapshot.
type snapshotWriter struct {
	fs     iceio.WriteFileIO
	meta   table.Metadata
	loc    table.LocationProvider
	id     int64 // the snapshot's id
	seq    int64 // its sequence number; 0 on v1
	commit string
	n      int // manifests written

	target        int64 // manifest size to roll rewritten manifests at
	open          map[manifestKey]*openManifest
	own           []iceberg.ManifestFile // written and read back for this snapshot
	replaced      map[string]bool        // base manifests it rewrote
	baseManifests map[string]bool

	sum        updateTotals
	partitions map[string]struct{} // partition keys of the files added and removed
}

// write writes the added files' manifests, rewrites each base manifest that
// holds a removed file, and writes the manifest list: the new manifests
// first, then the base's untouched ones.
func (w *snapshotWriter) write(ctx context.Context, base *table.Snapshot, g gone, added []iceberg.DataFile, dataSeq int64) (table.Snapshot, error) {
	snap := table.Snapshot{SnapshotID: w.id, ParentSnapshotID: &base.SnapshotID, SequenceNumber: w.seq}
	schemaID := w.meta.CurrentSchema().ID
	snap.SchemaID = &schemaID
	baseList, err := base.Manifests(w.fs)
	if err != nil {
		return snap, fmt.Errorf("read manifest list of snapshot %d: %w", base.SnapshotID, err)
	}
	if err := w.writeAdded(added, dataSeq); err != nil {
		return snap, err
	}
	w.replaced, w.baseManifests = map[string]bool{}, map[string]bool{}
	var kept []iceberg.ManifestFile
	for _, m := range baseList {
		w.baseManifests[m.FilePath()] = true
		if err := ctx.Err(); err != nil {
			return snap, err
		}
		hit, err := holdsAny(w.fs, m, g)
		if err != nil {
			return snap, err
		}
		if !hit {
			kept = append(kept, m)
			continue
		}
		if err := w.rewriteManifest(m, g); err != nil {
			return snap, err
		}
		w.replaced[m.FilePath()] = true
	}
	if err := w.finishAll(); err != nil {
		return snap, err
	}
	if err := g.check(base.SnapshotID); err != nil {
		return snap, err
	}
	snap.TimestampMs = max(time.Now().UnixMilli(), base.TimestampMs+1)
	snap.ManifestList = w.loc.NewMetadataLocation(fmt.Sprintf("snap-%d-0-%s.avro", w.id, w.commit))
	list := append(append([]iceberg.ManifestFile{}, w.own...), kept...)
	if err := manifestlist.Write(w.fs, &snap, w.meta.Version(), 0, list); err != nil {
		return snap, fmt.Errorf("write manifest list %s: %w", snap.ManifestList, err)
	}
	return snap, nil
}

// holdsAny reads only the paths of m's entries: whether it lists a live
// file the rewrite removes.
func holdsAny(fs iceio.IO, m iceberg.ManifestFile, g gone) (bool, error) {
	if m.ManifestContent() == iceberg.ManifestContentData && len(g.data) == 0 ||
		m.ManifestContent() == iceberg.ManifestContentDeletes && len(g.deletes) == 0 {
		return false, nil
	}
	errHit := errors.New("hit")
	err := manifestscan.ReadManifest(fs, m.FilePath(), manifestscan.ManifestOptions{Fields: manifestscan.ManifestContent},
		func(ent *manifestscan.ManifestEntry) error {
			if ent.Status != manifestscan.StatusDeleted && g.has(ent.Content, string(ent.FilePath)) {
				return errHit
			}
			return nil
		})
	if errors.Is(err, errHit) {
		return true, nil
	}
	return false, err
}

// writeAdded writes the added data files, one manifest per partition spec,
// with the planned data sequence number (v2): equality deletes committed
// after the plan still apply to the rewritten rows.
func (w *snapshotWriter) writeAdded(added []iceberg.DataFile, dataSeq int64) error {
	var seq *int64
	if w.meta.Version() >= 2 {
		seq = &dataSeq
	}
	for _, df := range added {
		om, err := w.output(df.SpecID(), iceberg.ManifestContentData, false)
		if err != nil {
			return err
		}
		if err := om.w.Add(iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &w.id, seq, nil, df)); err != nil {
			return fmt.Errorf("write manifest %s: add %s: %w", om.path, df.FilePath(), err)
		}
		om.sig.add(manifestscan.StatusAdded, df.FilePath())
		w.count(df, true)
	}
	return w.finishAll()
}

// rewriteManifest streams the live entries of m into the snapshot's
// rewritten manifests: the removed files as DELETED, the others as
// EXISTING, each with the snapshot id and sequence numbers it had; m's
// DELETED entries (an older snapshot's) are left out, as Iceberg does. The
// entries of every rewritten base manifest of a spec and content go into
// the same manifests, rolled at the table's manifest target size, so that
// each is read back once.
func (w *snapshotWriter) rewriteManifest(m iceberg.ManifestFile, g gone) error {
	for ent, err := range m.Entries(w.fs, true) {
		if err != nil {
			return fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
		}
		om, err := w.output(m.PartitionSpecID(), m.ManifestContent(), true)
		if err != nil {
			return err
		}
		df := ent.DataFile()
		seq, snapID := ent.SequenceNum(), ent.SnapshotID()
		var seqp *int64
		if w.meta.Version() >= 2 {
			seqp = &seq
		}
		if !g.has(int32(df.ContentType()), df.FilePath()) {
			if err := om.w.Existing(iceberg.NewManifestEntry(iceberg.EntryStatusEXISTING, &snapID, seqp, ent.FileSequenceNum(), df)); err != nil {
				return fmt.Errorf("rewrite manifest %s into %s: keep %s: %w", m.FilePath(), om.path, df.FilePath(), err)
			}
			om.sig.add(manifestscan.StatusExisting, df.FilePath())
			continue
		}
		if err := om.w.Delete(iceberg.NewManifestEntry(iceberg.EntryStatusDELETED, &w.id, seqp, ent.FileSequenceNum(), df)); err != nil {
			return fmt.Errorf("rewrite manifest %s into %s: remove %s: %w", m.FilePath(), om.path, df.FilePath(), err)
		}
		om.sig.add(manifestscan.StatusDeleted, df.FilePath())
		g.mark(df.ContentType(), df.FilePath())
		w.count(df, false)
	}
	return nil
}

// openManifest is a manifest of the snapshot being written.
type openManifest struct {
	path string
	f    iceio.FileWriter
	cw   *countingWriter
	w    *iceberg.ManifestWriter
	sig  entrySig
	roll bool // finished once it reaches the target size
}

type manifestKey struct {
	spec    int32
	content iceberg.ManifestContent
}

// output returns the open manifest for files of spec and content, opening
// one, after finishing one that reached the target size when roll is set.
func (w *snapshotWriter) output(specID int32, content iceberg.ManifestContent, roll bool) (*openManifest, error) {
	k := manifestKey{specID, content}
	if om := w.open[k]; om != nil {
		if !om.roll || om.cw.n < w.target {
			return om, nil
		}
		delete(w.open, k)
		if err := w.finish(om); err != nil {
			return nil, err
		}
	}
	spec := w.meta.PartitionSpecByID(int(specID))
	if spec == nil {
		return nil, fmt.Errorf("partition spec %d not in the table metadata", specID)
	}
	w.n++
	om := &openManifest{path: w.loc.NewMetadataLocation(fmt.Sprintf("%s-m%d.avro", w.commit, w.n)), roll: roll}
	f, err := w.fs.Create(om.path)
	if err != nil {
		return nil, fmt.Errorf("create manifest %s: %w", om.path, err)
	}
	om.f, om.cw = f, &countingWriter{w: f}
	om.w, err = iceberg.NewManifestWriter(w.meta.Version(), om.cw, *spec, w.meta.CurrentSchema(), w.id, iceberg.WithManifestWriterContent(content))
	if err != nil {
		_ = f.Close()
		_ = w.fs.Remove(om.path)
		return nil, fmt.Errorf("write manifest %s: %w", om.path, err)
	}
	if w.open == nil {
		w.open = map[manifestKey]*openManifest{}
	}
	w.open[k] = om
	return om, nil
}

// finishAll finishes every open manifest.
func (w *snapshotWriter) finishAll() error {
	var errs []error
	for k, om := range w.open {
		delete(w.open, k)
		errs = append(errs, w.finish(om))
	}
	return errors.Join(errs...)
}

// finish closes om and reads it back: it must list the entries written to
// it, in order, by status and path. A manifest that fails is removed.
func (w *snapshotWriter) finish(om *openManifest) (err error) {
	defer func() {
		if err != nil {
			_ = w.fs.Remove(om.path)
		}
	}()
	werr := om.w.Close()
	if cerr := om.f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write manifest %s: %w", om.path, werr)
	}
	mf, err := om.w.ToManifestFile(om.path, om.cw.n)
	if err != nil {
		return fmt.Errorf("write manifest %s: %w", om.path, err)
	}
	var back entrySig
	err = manifestscan.ReadManifest(w.fs, om.path, manifestscan.ManifestOptions{Length: om.cw.n}, func(ent *manifestscan.ManifestEntry) error {
		back.add(ent.Status, string(ent.FilePath))
		return nil
	})
	if err != nil {
		return fmt.Errorf("read back manifest %s: %w", om.path, err)
	}
	if back != om.sig {
		return fmt.Errorf("read back manifest %s: %d entries, not the %d written, or other files", om.path, back.n, om.sig.n)
	}
	w.own = append(w.own, mf)
	return nil
}

// count adds df to the summary's changes.
func (w *snapshotWriter) count(df iceberg.DataFile, added bool) {
	if added {
		w.sum.add(df)
	} else {
		w.sum.remove(df)
	}
	if len(df.Partition()) > 0 {
		w.partitions[partitionKey(df.SpecID(), df.Partition())] = struct{}{}
	}
}

// removeAll removes the manifests w wrote (a rewrite that was definitely
// not committed).
func (w *snapshotWriter) removeAll(e *executor) {
	for k, om := range w.open {
		delete(w.open, k)
		_ = om.w.Close()
		_ = om.f.Close()
		e.removeList(om.path)
	}
	for _, m := range w.own {
		e.removeList(m.FilePath())
	}
}

// entrySig is an order-dependent digest of a manifest's entries (status
// and path) and their count: what was written is checked against what
// reads back without holding either.
type entrySig struct {
	n int64
	h uint64
}

func (s *entrySig) add(status int32, path string) {
	h := fnv.New64a()
	_, _ = h.Write([]byte{byte(status)})
	_, _ = io.WriteString(h, path)
	s.n++
	s.h = s.h*1099511628211 ^ h.Sum64()
}

// updateTotals counts what a snapshot adds and removes, under the summary
// keys Iceberg uses.
type updateTotals struct {
	addedFiles, addedRecords, addedSize                 int64
	removedData, removedRecords, removedSize            int64
	removedPosFiles, removedPosDeletes                  int64
	removedEqFiles, removedEqDeletes, removedDeleteFile int64
}

func (t *updateTotals) add(df iceberg.DataFile) {
	t.addedFiles++
	t.addedRecords += df.Count()
	t.addedSize += df.FileSizeBytes()
}

func (t *updateTotals) remove(df iceberg.DataFile) {
	t.removedSize += df.FileSizeBytes()
	switch df.ContentType() {
	case iceberg.EntryContentData:
		t.removedData++
		t.removedRecords += df.Count()
	case iceberg.EntryContentPosDeletes:
		t.removedDeleteFile++
		t.removedPosFiles++
		t.removedPosDeletes += df.Count()
	case iceberg.EntryContentEqDeletes:
		t.removedDeleteFile++
		t.removedEqFiles++
		t.removedEqDeletes += df.Count()
	}
}

// summary is the snapshot's summary: operation replace, props (the
// maintainer's markers), the changes, and the base's totals moved by them.
func (w *snapshotWriter) summary(base *table.Snapshot, props iceberg.Properties) *table.Summary {
	t := w.sum
	set := func(k string, v int64) {
		if v > 0 {
			props[k] = strconv.FormatInt(v, 10)
		}
	}
	set("added-files-size", t.addedSize)
	set("removed-files-size", t.removedSize)
	set("added-data-files", t.addedFiles)
	set("deleted-data-files", t.removedData)
	set("removed-equality-delete-files", t.removedEqFiles)
	set("removed-position-delete-files", t.removedPosFiles)
	set("removed-delete-files", t.removedDeleteFile)
	set("added-records", t.addedRecords)
	set("deleted-records", t.removedRecords)
	set("removed-position-deletes", t.removedPosDeletes)
	set("removed-equality-deletes", t.removedEqDeletes)
	set("changed-partition-count", int64(len(w.partitions)))
	prev := iceberg.Properties{}
	if base.Summary != nil {
		prev = base.Summary.Properties
	}
	total := func(k string, delta int64) {
		if n := prev.GetInt64(k, 0) + delta; n >= 0 {
			props[k] = strconv.FormatInt(n, 10)
		}
	}
	total("total-data-files", t.addedFiles-t.removedData)
	total("total-delete-files", -t.removedDeleteFile)
	total("total-records", t.addedRecords-t.removedRecords)
	total("total-files-size", t.addedSize-t.removedSize)
	total("total-position-deletes", -t.removedPosDeletes)
	total("total-equality-deletes", -t.removedEqDeletes)
	return &table.Summary{Operation: table.OpReplace, Properties: props}
}

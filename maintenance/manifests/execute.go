package manifests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/iceberg-maintainer/maintainer/internal/commitconflict"
	"github.com/iceberg-maintainer/maintainer/internal/manifestlist"
	"github.com/iceberg-maintainer/maintainer/internal/metacommit"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/turn"
)

// What callers tell apart with errors.Is.
var (
	// ErrEntriesChanged: the manifests written do not read back to the
	// entries they replace. Nothing is committed.
	ErrEntriesChanged = errors.New("rewritten manifests differ from the entries they replace")
	// ErrConflict: the retries ran out, a concurrent commit won each time.
	ErrConflict = errors.New("concurrent commits won every attempt")
	// ErrCommitUnknown: no answer said whether the commit landed; the
	// manifests written are kept, as they may be live.
	ErrCommitUnknown = errors.New("commit outcome unknown")
)

// Operation is the maintenance marker's value on this task's snapshots.
const Operation = "rewrite-manifests"

// Catalog is what Execute needs of a catalog.
type Catalog interface {
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
	CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error)
}

// Options carry what Execute needs besides the plan.
type Options struct {
	Logger *slog.Logger
	// RunID tags the snapshot of this run; a new UUID when empty.
	RunID string
	// Head reads the table's head cheaply, so that a retry after a
	// conflict starts right after the other writer's next commit
	// (internal/turn); nil: retries start at once.
	Head turn.HeadReader
}

// Result is what a rewrite did.
type Result struct {
	// ManifestsBefore and BytesBefore are the manifests of the snapshot the
	// rewrite was committed on; the After figures those of its own.
	ManifestsBefore, ManifestsAfter int
	BytesBefore, BytesAfter         int64
	ManifestsReplaced               int
	ManifestsWritten                int
	Entries                         int64 // live entries rewritten
	SnapshotID                      int64 // the snapshot committed; 0 if none
	CommitRetries                   int
	// Superseded says a concurrent commit left nothing to rewrite: the
	// re-plan on the new head was not due.
	Superseded string
}

// Execute rewrites the plan's groups and commits them as one replace
// snapshot on main, asserting main is still the head the commit was built
// on. Every commit first checks that the head holds every manifest it
// replaces: after a conflict (re-loaded) or with a plan made on an older
// snapshot, the same manifests are committed when it does, else it plans
// again on that head and rewrites. Nothing is deleted but
// the files this run wrote and certainly did not commit.
func Execute(ctx context.Context, cat Catalog, tbl *table.Table, plan *Plan, cfg Config, opts Options) (*Result, error) {
	res := &Result{}
	if plan.Empty() {
		return res, nil
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RunID == "" {
		opts.RunID = uuid.NewString()
	}
	e := &executor{cat: cat, cfg: cfg, opts: opts, res: res,
		log: opts.Logger.With("table", strings.Join(tbl.Identifier(), "."), "task", "manifests")}
	cur := tbl
	var out *written
	defer func() {
		if out != nil {
			e.discard(out)
		}
	}()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("stopped: %w", context.Cause(ctx))
		}
		if out == nil {
			var err error
			if out, err = e.rewrite(ctx, cur, plan); err != nil {
				return res, err
			}
		}
		err := e.commit(ctx, cur, out, attempt)
		if err == nil {
			out = nil // committed: the table owns them now
			return res, nil
		}
		if errors.Is(err, errStale) {
			// The head is not the one out was read from: never commit it.
			stale := out
			out = nil
			if plan, err = e.replan(ctx, cur, stale); err != nil {
				return res, err
			}
			if plan.Empty() {
				res.Superseded = plan.Reason
				return res, nil
			}
			continue
		}
		if errors.Is(err, errStage) {
			return res, err
		}
		if !commitconflict.Is(err) {
			// The catalog may have taken it: look for the snapshot, and
			// never delete manifests that may be live.
			if e.findOwn(ctx, cur.Identifier(), out) {
				out = nil
				return res, nil
			}
			out = nil
			return res, fmt.Errorf("%w: %w (written manifests kept; the orphan pass removes them if they are not live)", ErrCommitUnknown, err)
		}
		if attempt >= cfg.CommitRetries {
			return res, fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflict, attempt+1, err)
		}
		res.CommitRetries++
		e.log.Warn("manifest rewrite commit conflicted; re-loading and retrying", "attempt", attempt+1, "err", err)
		if _, ok := turn.Await(ctx, opts.Head, cur.Identifier(), 0); !ok {
			return res, fmt.Errorf("stopped: %w", context.Cause(ctx))
		}
		fresh, err := cat.LoadTable(ctx, cur.Identifier())
		if err != nil {
			return res, fmt.Errorf("re-load after conflict: %w", err)
		}
		// The next commit checks that every manifest out replaces is
		// still in the new head (only manifests were added: commit the
		// same ones), else it plans again there.
		cur = fresh
	}
}

// replan discards out, which the head of tbl no longer matches, and plans
// again on that head.
func (e *executor) replan(ctx context.Context, tbl *table.Table, out *written) (*Plan, error) {
	e.discard(out)
	plan, err := PlanTable(ctx, tbl, e.cfg)
	if err != nil {
		return nil, fmt.Errorf("plan again on snapshot %d: %w", tbl.CurrentSnapshot().SnapshotID, err)
	}
	return plan, nil
}

type executor struct {
	cat  Catalog
	cfg  Config
	opts Options
	res  *Result
	log  *slog.Logger
	// fs is the table's IO, set by the first rewrite.
	fs iceio.WriteFileIO
}

// errStage: reading or writing metadata failed before anything was sent,
// which is no conflict and which no retry mends.
var errStage = errors.New("stage manifest rewrite")

// errStale: the head lacks a manifest the rewrite replaces (a concurrent
// commit rewrote it, or the plan was made on an older snapshot): committed
// on that head the rewrite would bring back the files it removed, or list
// entries twice. Nothing was sent.
var errStale = errors.New("the head no longer holds the manifests rewritten")

// rewrite writes the manifests of the plan's groups, read from tbl.
func (e *executor) rewrite(ctx context.Context, tbl *table.Table, plan *Plan) (*written, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: open table IO: %w", errStage, err)
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("%w: the table's IO cannot write files", errStage)
	}
	e.fs = wfs
	loc, err := tbl.LocationProvider()
	if err != nil {
		return nil, fmt.Errorf("%w: location provider: %w", errStage, err)
	}
	w := &written{snapshotID: manifestlist.NewSnapshotID(tbl.Metadata()), replaced: map[string]bool{}}
	r := &rewriter{fs: wfs, loc: loc, meta: tbl.Metadata(), prefix: uuid.NewString()}
	for _, g := range plan.Groups {
		if err := ctx.Err(); err != nil {
			r.remove(w.manifests)
			return nil, fmt.Errorf("stopped: %w", context.Cause(ctx))
		}
		ms, n, err := r.rewriteGroup(g, plan.TargetSize, w.snapshotID)
		if err != nil {
			r.remove(w.manifests)
			return nil, fmt.Errorf("%w: rewrite the %s manifests of spec %d: %w", errStage, g.Content, g.SpecID, err)
		}
		w.manifests = append(w.manifests, ms...)
		w.entries += n
		for _, m := range g.inputs {
			w.replaced[m.FilePath()] = true
			w.bytesIn += m.Length()
		}
		for _, m := range ms {
			w.bytesOut += m.Length()
		}
	}
	return w, nil
}

func (e *executor) headManifests(ctx context.Context, tbl *table.Table, head *table.Snapshot) ([]iceberg.ManifestFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: open table IO: %w", errStage, err)
	}
	list, err := head.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("%w: read manifest list %s of snapshot %d: %w", errStage, head.ManifestList, head.SnapshotID, err)
	}
	return list, nil
}

// commit writes the manifest list of the new snapshot (the rewritten
// manifests, then every manifest of the head it does not replace) and
// commits it as a replace on main, requiring main to still be that head.
func (e *executor) commit(ctx context.Context, tbl *table.Table, out *written, attempt int) error {
	meta := tbl.Metadata()
	head := tbl.CurrentSnapshot()
	if head == nil {
		return fmt.Errorf("%w: the table has no current snapshot", errStage)
	}
	if meta.SnapshotByID(out.snapshotID) != nil {
		return fmt.Errorf("%w: snapshot id %d is taken", errStage, out.snapshotID)
	}
	headList, err := e.headManifests(ctx, tbl, head)
	if err != nil {
		return err
	}
	list := append([]iceberg.ManifestFile(nil), out.manifests...)
	var bytesBefore, bytesAfter int64
	for _, m := range out.manifests {
		bytesAfter += m.Length()
	}
	present := 0
	for _, m := range headList {
		bytesBefore += m.Length()
		if out.replaced[m.FilePath()] {
			present++
		} else {
			list = append(list, m)
			bytesAfter += m.Length()
		}
	}
	if present != len(out.replaced) {
		return fmt.Errorf("%w: snapshot %d holds %d of the %d manifests replaced", errStale, head.SnapshotID, present, len(out.replaced))
	}
	parentID := head.SnapshotID
	snap := table.Snapshot{
		SnapshotID:       out.snapshotID,
		ParentSnapshotID: &parentID,
		TimestampMs:      max(time.Now().UnixMilli(), head.TimestampMs+1),
		Summary:          e.summary(head, out, len(headList)-len(out.replaced)),
	}
	if meta.Version() >= 2 {
		snap.SequenceNumber = meta.LastSequenceNumber() + 1
	}
	schemaID := meta.CurrentSchema().ID
	snap.SchemaID = &schemaID
	loc, err := tbl.LocationProvider()
	if err != nil {
		return fmt.Errorf("%w: location provider: %w", errStage, err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("%w: open table IO: %w", errStage, err)
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return fmt.Errorf("%w: the table's IO cannot write files", errStage)
	}
	snap.ManifestList = loc.NewMetadataLocation(fmt.Sprintf("snap-%d-%d-%s.avro", snap.SnapshotID, attempt, uuid.NewString()))
	// On v3 the rewritten data manifests take row ids from next-row-id;
	// their entries keep their own first_row_id.
	if err := manifestlist.Write(wfs, &snap, meta.Version(), meta.NextRowID(), list); err != nil {
		return fmt.Errorf("%w: write manifest list %s: %w", errStage, snap.ManifestList, err)
	}
	builder, err := table.MetadataBuilderFromBase(meta, tbl.MetadataLocation())
	if err != nil {
		_ = wfs.Remove(snap.ManifestList)
		return fmt.Errorf("%w: %w", errStage, err)
	}
	updates := []table.Update{
		table.NewAddSnapshotUpdate(&snap),
		// The catalog replaces the ref as a whole: keep main's retention.
		builder.NewRetainingSnapshotRefUpdate(table.MainBranch, snap.SnapshotID, table.BranchRef),
	}
	reqs := []table.Requirement{
		table.AssertTableUUID(meta.TableUUID()),
		table.AssertRefSnapshotID(table.MainBranch, &parentID),
	}
	if err := ctx.Err(); err != nil {
		// Stopped (a lost lease, shutdown) before sending: nothing to find out.
		_ = wfs.Remove(snap.ManifestList)
		return fmt.Errorf("%w: stopped: %w", errStage, context.Cause(ctx))
	}
	committed, _, err := e.cat.CommitTable(ctx, tbl.Identifier(), reqs, updates)
	if err != nil {
		if commitconflict.Is(err) {
			_ = wfs.Remove(snap.ManifestList) // never referenced
		}
		return err
	}
	metacommit.RemoveDropped(ctx, wfs, meta, committed, e.log)
	e.res.ManifestsBefore, e.res.ManifestsAfter = len(headList), len(list)
	e.res.BytesBefore, e.res.BytesAfter = bytesBefore, bytesAfter
	e.res.ManifestsReplaced, e.res.ManifestsWritten = len(out.replaced), len(out.manifests)
	e.res.Entries, e.res.SnapshotID = out.entries, snap.SnapshotID
	e.log.Info("manifests rewritten", "snapshot_id", snap.SnapshotID, "manifests_before", len(headList),
		"manifests_after", len(list), "entries", out.entries)
	return nil
}

// summary is the replace snapshot's summary: the head's totals (a rewrite of
// manifests changes no file and no row), the maintenance marker, and the
// manifest counts Iceberg Java writes for a rewrite.
func (e *executor) summary(head *table.Snapshot, out *written, kept int) *table.Summary {
	props := iceberg.Properties{
		tableprops.SummaryOperation: Operation,
		tableprops.SummaryRunID:     e.opts.RunID,
		"manifests-created":         strconv.Itoa(len(out.manifests)),
		"manifests-replaced":        strconv.Itoa(len(out.replaced)),
		"manifests-kept":            strconv.Itoa(kept),
		"entries-processed":         strconv.FormatInt(out.entries, 10),
	}
	if head.Summary != nil {
		for k, v := range head.Summary.Properties {
			if strings.HasPrefix(k, "total-") {
				props[k] = v
			}
		}
	}
	return &table.Summary{Operation: table.OpReplace, Properties: props}
}

// findOwn re-loads the table and looks for the snapshot this run committed.
func (e *executor) findOwn(ctx context.Context, ident table.Identifier, out *written) bool {
	fresh, err := e.cat.LoadTable(context.WithoutCancel(ctx), ident)
	if err != nil {
		return false
	}
	s := fresh.Metadata().SnapshotByID(out.snapshotID)
	if s == nil || s.Summary == nil || s.Summary.Properties[tableprops.SummaryRunID] != e.opts.RunID {
		return false
	}
	e.res.SnapshotID, e.res.Entries = s.SnapshotID, out.entries
	e.res.ManifestsReplaced, e.res.ManifestsWritten = len(out.replaced), len(out.manifests)
	return true
}

// discard removes manifests this run wrote and certainly did not commit.
func (e *executor) discard(out *written) {
	for _, p := range out.paths() {
		if err := e.removeFile(p); err != nil {
			e.log.Warn("could not remove a manifest this run wrote; the orphan pass will", "path", p, "err", err)
		}
	}
}

func (e *executor) removeFile(path string) error {
	if e.fs == nil {
		return nil
	}
	return e.fs.Remove(path)
}

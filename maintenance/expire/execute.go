package expire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/iceberg-maintainer/maintainer/internal/commitconflict"
	"github.com/iceberg-maintainer/maintainer/internal/metacommit"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/turn"
)

// Sentinel errors of Execute; callers classify with errors.Is.
var (
	// ErrConflict: concurrent commits kept conflicting until CommitRetries
	// ran out. Nothing was committed or deleted.
	ErrConflict = errors.New("conflicting concurrent commit")
	// ErrCommitUnknown: the catalog did not say whether the commit landed.
	// Nothing is deleted; the next run re-plans from fresh metadata.
	ErrCommitUnknown = errors.New("commit outcome unknown")
	// ErrRefLost: a branch or tag that someone else created meanwhile went
	// with the expired snapshots and could not be restored. Nothing is
	// deleted, so the ref's files are all still there.
	ErrRefLost = errors.New("a branch or tag was lost by the expiry commit")
	// ErrUnverifiable: after the commit, the refs or the files the fresh
	// metadata references could not be established. Nothing is deleted.
	ErrUnverifiable = errors.New("cannot prove the planned files unreferenced")
)

// errRefsChanged marks our own requirement failing: a conflict to re-plan.
var errRefsChanged = errors.New("refs changed since planning")

// TableLoader loads and commits tables; an iceberg-go catalog.Catalog (and
// table.CatalogIO) satisfies it. Execute commits through CommitTable
// directly, so that the commit carries exactly the plan's updates and
// requirements and iceberg-go's own retry (which rewrites ref requirements
// to the new heads) never applies.
type TableLoader interface {
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
	CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error)
}

// Options carry what Execute needs besides the plan.
type Options struct {
	Logger *slog.Logger
	// Deleter deletes the files; required when the plan has any.
	Deleter Deleter
	// Head reads the table's head cheaply, so that a retry after a
	// conflict starts right after the other writer's next commit
	// (internal/turn); nil: retries back off.
	Head turn.HeadReader
	// Test hooks: beforeCommit runs before each commit attempt, afterCommit
	// once the commit landed.
	beforeCommit func(attempt int) error
	afterCommit  func() error
}

// Result is what an expiration run did.
type Result struct {
	Committed          bool     `json:"committed"`
	MetadataLocation   string   `json:"metadata_location,omitempty"`
	CommitRetries      int      `json:"commit_retries"`
	ExpiredSnapshotIDs []int64  `json:"expired_snapshot_ids,omitempty"`
	RefsRemoved        []string `json:"refs_removed,omitempty"`
	RefsRestored       []string `json:"refs_restored,omitempty"`
	RefsLost           []string `json:"refs_lost,omitempty"`
	// SchemasRemoved and SpecsRemoved are the ids the commit removed
	// (clean_expired_metadata).
	SchemasRemoved []int `json:"schemas_removed,omitempty"`
	SpecsRemoved   []int `json:"specs_removed,omitempty"`
	// Deleted counts files and bytes deleted, by kind.
	Deleted map[FileKind]Count `json:"deleted"`
	// FilesKept are planned files the fresh metadata references again; they
	// were not deleted.
	FilesKept int `json:"files_kept"`
	// FilesFailed could not be deleted (Execute then fails with
	// ErrDeleteFailed); DeleteFailures lists the first thousand, and
	// FailedPaths all of them, for the next run to retry. FailedPaths also
	// holds every planned file of a run that committed, then stopped or
	// could not check the files before deleting them (not for a lost ref,
	// or gc.enabled=false since planning).
	FilesFailed    int             `json:"files_failed"`
	DeleteFailures []DeleteFailure `json:"delete_failures,omitempty"`
	FilesBlocked   string          `json:"files_blocked,omitempty"`
	failed         []string
	unreachable    int // of FilesFailed, because the store was unreachable
}

// FailedPaths returns every file that could not be deleted.
func (r *Result) FailedPaths() []string { return r.failed }

// Count is a number of files and their bytes.
type Count struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// DeleteFailure is a file that could not be deleted.
type DeleteFailure struct {
	Path string   `json:"path"`
	Kind FileKind `json:"kind,omitempty"` // unknown for a retried file
	Err  string   `json:"error"`
}

// SnapshotsExpired is the number of snapshots the commit removed.
func (r *Result) SnapshotsExpired() int { return len(r.ExpiredSnapshotIDs) }

// FilesDeleted and BytesDeleted sum Deleted over the kinds.
func (r *Result) FilesDeleted() (n int) {
	for _, c := range r.Deleted {
		n += c.Files
	}
	return n
}

func (r *Result) BytesDeleted() (n int64) {
	for _, c := range r.Deleted {
		n += c.Bytes
	}
	return n
}

// Execute commits the plan's snapshot and ref removals, checks that no ref
// was lost, and deletes the planned files that the freshly loaded metadata
// does not reference.
//
// The commit requires the refs to be exactly those planned; on a conflict
// the table is re-loaded and re-planned (never beyond the given plan) up to
// CommitRetries times. A cancelled ctx before the commit commits nothing;
// after it, deletes nothing more, and the files not deleted are returned in
// Result.FailedPaths to retry. An empty plan writes nothing. Files that
// could not be deleted fail the run with ErrDeleteFailed after the others
// are deleted; Result.FailedPaths lists them for RetryDeletes.
func Execute(ctx context.Context, cat TableLoader, tbl *table.Table, plan *Plan, cfg Config, opts Options) (*Result, error) {
	res := &Result{Deleted: map[FileKind]Count{}}
	if plan.Empty() {
		return res, nil
	}
	if err := cfg.Validate(); err != nil {
		return res, fmt.Errorf("invalid expiration config: %w", err)
	}
	if len(plan.Files) > 0 && opts.Deleter == nil {
		return res, fmt.Errorf("expire %s: no Deleter for the planned files; nothing committed", strings.Join(tbl.Identifier(), "."))
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	name := strings.Join(tbl.Identifier(), ".")
	log := opts.Logger.With("table", name, "task", "expire")
	ident := tbl.Identifier()

	cur := plan
	var committed table.Metadata
	var req *refsRequirement
	for attempt := 0; ; attempt++ {
		if ctx.Err() == nil && opts.beforeCommit != nil {
			if err := opts.beforeCommit(attempt); err != nil {
				return res, err
			}
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("expire %s: stopped before commit, nothing changed: %w", name, context.Cause(ctx))
		}
		req = newRefsRequirement(cur)
		meta, loc, err := cat.CommitTable(ctx, ident, requirements(cur, req), updates(cur))
		if err == nil {
			committed, res.MetadataLocation = meta, loc
			removeDroppedMetadata(ctx, tbl, committed, log)
			break
		}
		switch {
		case errors.Is(err, ErrGCDisabled):
			return res, fmt.Errorf("commit expiry of %s: %w", name, ErrGCDisabled)
		case !isConflict(err):
			return res, fmt.Errorf("%w: commit expiry of %s: %v", ErrCommitUnknown, name, err)
		case attempt >= cfg.CommitRetries:
			return res, fmt.Errorf("%w: commit expiry of %s, %d attempts: %v", ErrConflict, name, attempt+1, err)
		}
		res.CommitRetries++
		// Our requirement held on the base the catalog committed on, so
		// the commit lost the catalog's compare-and-swap to a writer's
		// commit after it: the plan still holds (a writer moving a branch
		// on is accepted, anything else fails the requirement next time),
		// and the retry commits it again on whatever is current then.
		again := req.validated.Load() && !errors.Is(err, errRefsChanged)
		if again {
			log.Info("expiry commit conflicted; committing the same plan again", "attempt", attempt+1, "err", err)
		} else {
			log.Info("expiry commit conflicted; re-planning", "attempt", attempt+1, "err", err)
		}
		// Wait for the writer's next commit, or back off so that a busy
		// writer can finish.
		if _, ok := turn.Await(ctx, opts.Head, ident, min(50*time.Millisecond<<attempt, 5*time.Second)); !ok {
			return res, fmt.Errorf("expire %s: stopped before commit, nothing changed: %w", name, context.Cause(ctx))
		}
		if again {
			continue
		}
		fresh, err := cat.LoadTable(ctx, ident)
		if err != nil {
			return res, fmt.Errorf("re-load %s after a commit conflict: %w", name, err)
		}
		next, err := planTable(ctx, fresh, cfg, plan.Now, cur)
		if err != nil {
			return res, fmt.Errorf("re-plan expiry of %s after a commit conflict: %w", name, err)
		}
		if next.Empty() {
			log.Info("nothing left to expire after a concurrent commit")
			return res, nil
		}
		cur = next
	}
	res.Committed = true
	res.ExpiredSnapshotIDs = cur.ExpiredIDs()
	res.SchemasRemoved, res.SpecsRemoved = cur.RemovedSchemas, cur.RemovedSpecs
	for _, r := range cur.RemovedRefs {
		res.RefsRemoved = append(res.RefsRemoved, r.Name)
	}
	log.Info("snapshots expired", "snapshots", len(res.ExpiredSnapshotIDs), "refs_removed", len(res.RefsRemoved),
		"schemas_removed", len(res.SchemasRemoved), "specs_removed", len(res.SpecsRemoved), "metadata", res.MetadataLocation)

	// From here on the planned files' snapshots are gone: a run that stops
	// before deleting them keeps them all to retry (RetryDeletes checks them
	// against the metadata again), rather than leave them for the orphan
	// pass. A blocked plan has none.
	keepPlanned := func() {
		res.failed = make([]string, len(cur.Files))
		for i, f := range cur.Files {
			res.failed[i] = f.Path
		}
	}
	if opts.afterCommit != nil {
		if err := opts.afterCommit(); err != nil {
			keepPlanned()
			return res, err
		}
	}
	if ctx.Err() != nil {
		keepPlanned()
		return res, fmt.Errorf("expire %s: committed, then stopped before deleting files, none deleted: %w", name, context.Cause(ctx))
	}
	fresh, err := checkRefs(ctx, cat, ident, committed, cur, req, res, log)
	if err != nil {
		if !errors.Is(err, ErrRefLost) {
			// A lost ref's files stay on storage for good: its data.
			keepPlanned()
		}
		return res, stopped(ctx, name, fmt.Errorf("expire %s: %w", name, err))
	}
	if cur.FilesBlocked != "" {
		res.FilesBlocked = cur.FilesBlocked
		log.Warn("no file deleted", "reason", cur.FilesBlocked)
		return res, nil
	}
	if len(cur.Files) == 0 {
		return res, nil
	}
	if !tableprops.GCAllowed(fresh.Properties()) {
		// Not kept: its owner wants no file deleted, and a retry would
		// only fail on it each run.
		return res, fmt.Errorf("expire %s: deleting files: %w", name, ErrGCDisabled)
	}
	fs, err := fresh.FS(ctx)
	if err != nil {
		keepPlanned()
		return res, fmt.Errorf("open IO of %s: %w", name, err)
	}
	refd, err := referencedNow(ctx, fs, fresh.Metadata(), cur)
	if err != nil {
		keepPlanned()
		return res, stopped(ctx, name, fmt.Errorf("%w: %s: %v", ErrUnverifiable, name, err))
	}
	deletable := slices.DeleteFunc(slices.Clone(cur.Files), func(f File) bool { return refd[key(f.Path)] })
	res.FilesKept = len(cur.Files) - len(deletable)
	if res.FilesKept > 0 {
		log.Warn("planned files are referenced again; kept", "files", res.FilesKept)
	}
	res.failed = deleteFiles(ctx, opts.Deleter, deletable, cfg.batchSize(), cfg.DeleteConcurrency, res, log)
	log.Info("files deleted", "files", res.FilesDeleted(), "bytes", res.BytesDeleted(), "failed", res.FilesFailed)
	if ctx.Err() != nil {
		return res, fmt.Errorf("expire %s: stopped while deleting files: %w", name, context.Cause(ctx))
	}
	if len(res.failed) > 0 {
		return res, deleteError(name, res.failed, len(deletable))
	}
	return res, nil
}

// stopped reports a cancellation as such (a cancelled run is not a failed
// one) when ctx ended while err happened.
func stopped(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("expire %s: committed, then stopped before deleting files, none deleted: %w", name, context.Cause(ctx))
	}
	return err
}

func updates(p *Plan) []table.Update {
	ups := make([]table.Update, 0, len(p.RemovedRefs)+1)
	for _, r := range p.RemovedRefs {
		ups = append(ups, table.NewRemoveSnapshotRefUpdate(r.Name))
	}
	if len(p.Expired) > 0 {
		// postCommit=false: iceberg-go's own file cleanup must never run.
		ups = append(ups, table.NewRemoveSnapshotsUpdate(p.ExpiredIDs(), false))
	}
	// After the snapshots: the schemas and specs are unused once they go.
	if len(p.RemovedSpecs) > 0 {
		ups = append(ups, table.NewRemoveSpecUpdate(p.RemovedSpecs))
	}
	if len(p.RemovedSchemas) > 0 {
		ups = append(ups, table.NewRemoveSchemasUpdate(p.RemovedSchemas))
	}
	return ups
}

func requirements(p *Plan, own *refsRequirement) []table.Requirement {
	reqs := []table.Requirement{table.AssertTableUUID(own.uuid)}
	for _, name := range slices.Sorted(maps.Keys(p.Refs)) {
		reqs = append(reqs, refAt{name: name, id: p.Refs[name], own: own})
	}
	// A schema or spec made current meanwhile may be one planned unused.
	if len(p.RemovedSchemas) > 0 {
		reqs = append(reqs, table.AssertCurrentSchemaID(p.currentSchema))
	}
	if len(p.RemovedSpecs) > 0 {
		reqs = append(reqs, table.AssertDefaultSpecID(p.defaultSpec))
	}
	return append(reqs, own)
}

// refAt is the requirement that a ref is at its planned snapshot. A REST
// catalog receives it as Iceberg's assert-ref-snapshot-id, the most that
// can be asked of a server; in-process it is refsRequirement's check of
// that ref, which also accepts a kept branch that a writer moved on.
type refAt struct {
	name string
	id   int64
	own  *refsRequirement
}

func (r refAt) GetType() string { return "assert-ref-snapshot-id" }

func (r refAt) MarshalJSON() ([]byte, error) {
	id := r.id
	return json.Marshal(table.AssertRefSnapshotID(r.name, &id))
}

func (r refAt) Validate(meta table.Metadata) error {
	if meta == nil {
		return errors.New("requirement failed: table does not exist")
	}
	for name, ref := range meta.Refs() {
		if name == r.name {
			return r.own.refHolds(meta, r.name, ref, r.id)
		}
	}
	return fmt.Errorf("requirement failed: %w: %q was removed", errRefsChanged, r.name)
}

// refsRequirement asserts that the table has exactly the planned refs, at
// the planned snapshots or, for a branch the plan keeps, at a descendant of
// its planned snapshot through snapshots the plan does not expire (a
// writer's appends: the plan removes nothing they reach, and retention
// from the new head would expire more, not less), and still has gc enabled.
// A branch may move on only while what the plan's retention was worked out
// from holds: the ref's type and retention settings, the table's
// history.expire properties, and no schema or spec removed (a writer's
// snapshot may use one the plan found unused). Iceberg has no standard
// requirement for "no new ref": without it a tag created on an expiring
// snapshot after planning would silently go with the snapshot. Catalogs
// that validate requirements in-process against the metadata they commit on
// (sql, hadoop, glue, hive in iceberg-go) enforce it. A REST server only
// knows the spec's requirements, so it is sent as assert-table-uuid, and
// checkRefs detects a lost ref after the commit instead.
type refsRequirement struct {
	uuid      uuid.UUID
	refs      map[string]int64
	planned   map[string]table.SnapshotRef
	removed   map[string]bool // refs the plan removes: held where planned
	expired   map[int64]bool
	props     map[string]string // the history.expire properties planned with
	strict    bool              // no ref may move: the plan removes schemas or specs
	validated atomic.Bool       // Validate passed: the commit's base had the refs
}

// retentionProps are the table properties the plan's retention was
// resolved from.
var retentionProps = []string{PropMinSnapshotsToKeep, PropMaxSnapshotAgeMs, PropMaxRefAgeMs}

func newRefsRequirement(p *Plan) *refsRequirement {
	r := &refsRequirement{uuid: uuid.MustParse(p.TableUUID), refs: p.Refs, planned: p.refs,
		removed: map[string]bool{}, expired: map[int64]bool{}, props: p.retentionProps,
		strict: len(p.RemovedSchemas) > 0 || len(p.RemovedSpecs) > 0}
	for _, rr := range p.RemovedRefs {
		r.removed[rr.Name] = true
	}
	for _, id := range p.ExpiredIDs() {
		r.expired[id] = true
	}
	return r
}

// refHolds checks ref name, planned at id, against meta: at id, or moved on.
func (r *refsRequirement) refHolds(meta table.Metadata, name string, ref table.SnapshotRef, id int64) error {
	if id != ref.SnapshotID && !r.movedOn(meta, name, ref, id) {
		return fmt.Errorf("requirement failed: %w: %s %q moved to snapshot %d", errRefsChanged, ref.SnapshotRefType, name, ref.SnapshotID)
	}
	return nil
}

// movedOn reports whether branch ref, planned at id, is now at a
// descendant of id whose ancestors down to id are all kept by the plan,
// with the retention the plan was made with.
func (r *refsRequirement) movedOn(meta table.Metadata, name string, ref table.SnapshotRef, id int64) bool {
	was, ok := r.planned[name]
	if r.strict || !ok || r.removed[name] || r.expired[id] || ref.SnapshotRefType != table.BranchRef ||
		was.SnapshotRefType != table.BranchRef || !sameRetention(was, ref) {
		return false
	}
	props := meta.Properties()
	for _, k := range retentionProps {
		v, set := props[k]
		if w, was := r.props[k]; set != was || v != w {
			return false
		}
	}
	cur := ref.SnapshotID
	for range len(meta.Snapshots()) {
		if r.expired[cur] {
			return false
		}
		s := meta.SnapshotByID(cur)
		if s == nil || s.ParentSnapshotID == nil {
			return false
		}
		if cur = *s.ParentSnapshotID; cur == id {
			return true
		}
	}
	return false
}

func sameRetention(a, b table.SnapshotRef) bool {
	return ptrEq(a.MinSnapshotsToKeep, b.MinSnapshotsToKeep) && ptrEq(a.MaxSnapshotAgeMs, b.MaxSnapshotAgeMs) &&
		ptrEq(a.MaxRefAgeMs, b.MaxRefAgeMs)
}

func ptrEq[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func (r *refsRequirement) GetType() string { return "assert-table-uuid" }

func (r *refsRequirement) MarshalJSON() ([]byte, error) {
	return json.Marshal(table.AssertTableUUID(r.uuid))
}

func (r *refsRequirement) Validate(meta table.Metadata) error {
	if meta == nil {
		return errors.New("requirement failed: table does not exist")
	}
	if !tableprops.GCAllowed(meta.Properties()) {
		return fmt.Errorf("requirement failed: %w", ErrGCDisabled)
	}
	n := 0
	for name, ref := range meta.Refs() {
		n++
		id, ok := r.refs[name]
		if !ok {
			return fmt.Errorf("requirement failed: %w: %s %q was created", errRefsChanged, ref.SnapshotRefType, name)
		}
		if err := r.refHolds(meta, name, ref, id); err != nil {
			return err
		}
	}
	if n != len(r.refs) {
		return fmt.Errorf("requirement failed: %w: a ref was removed", errRefsChanged)
	}
	r.validated.Store(true)
	return nil
}

// isConflict reports a commit that definitely did not land because the
// table changed: a lost compare-and-swap or a failed requirement (the SQL
// and hadoop catalogs return the latter as plain errors).
func isConflict(err error) bool {
	return errors.Is(err, errRefsChanged) || commitconflict.Is(err)
}

// removeDroppedMetadata removes the metadata files the commit of committed
// dropped from the metadata log of tbl, the table as loaded, when the
// table asks for it (metacommit.RemoveDropped).
func removeDroppedMetadata(ctx context.Context, tbl *table.Table, committed table.Metadata, log *slog.Logger) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		log.Warn("metadata files the commit dropped from the metadata log were not removed; the orphan pass will", "err", err)
		return
	}
	metacommit.RemoveDropped(ctx, fs, tbl.Metadata(), committed, log)
}

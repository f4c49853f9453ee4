package expire

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

// Sentinel errors; callers classify with errors.Is.
var (
	// ErrGCDisabled: the table has gc.enabled=false; its files may be shared
	// with another table, so nothing is expired and nothing deleted.
	ErrGCDisabled = errors.New("garbage collection is disabled for this table (gc.enabled=false)")
	// ErrInvalidProperty: a history.expire.* table property is malformed.
	ErrInvalidProperty = errors.New("invalid table property")
	// ErrInvalidMetadata: a ref points at a snapshot the metadata lacks.
	ErrInvalidMetadata = errors.New("invalid table metadata")
	// ErrUnreadableRetained: a manifest list or manifest of a snapshot that
	// stays (a branch's or tag's current snapshot, or one retention keeps)
	// cannot be read in full. Nothing is committed and nothing deleted: the
	// snapshots that would expire may be the only readable ones.
	ErrUnreadableRetained = errors.New("a retained snapshot cannot be read")
)

// Reasons, stable strings that tests and users can rely on.
const (
	ReasonBeyondRetention = "older than max_snapshot_age and beyond retain_last on every branch that reaches it"
	ReasonUnreferenced    = "not reachable from any branch or tag and older than max_snapshot_age"
	ReasonRefTooOld       = "its snapshot is older than max_ref_age"
	ReasonDisabled        = "expiration disabled"
	ReasonNothingToExpire = "no snapshot is due to expire"
	// BlockedUnreadable starts Plan.FilesBlocked when a manifest list or
	// manifest of an expiring snapshot is missing or cannot be decoded; the
	// first such file and what is wrong with it follow. The snapshots still
	// expire, but no file at all is deleted: a reference set that could not
	// be read completely proves nothing. The files are left for the orphan
	// pass.
	BlockedUnreadable = "an expiring snapshot's manifest list or manifest cannot be read; no file is deleted"
)

// FileKind names what a planned file is.
type FileKind string

const (
	KindData                FileKind = "data"
	KindPositionDeletes     FileKind = "position_deletes"
	KindEqualityDeletes     FileKind = "equality_deletes"
	KindManifest            FileKind = "manifest"
	KindManifestList        FileKind = "manifest_list"
	KindStatistics          FileKind = "statistics"
	KindPartitionStatistics FileKind = "partition_statistics"
)

// Plan is what one expiration run will do to one table. It is a value: the
// plan that `plan` and `--dry-run` show is the plan Execute runs; a re-plan
// after a commit conflict only ever does less.
type Plan struct {
	TableUUID        string    `json:"table_uuid"`
	MetadataLocation string    `json:"metadata_location"` // the metadata planned from
	Now              time.Time `json:"now"`
	Policy           Policy    `json:"policy"`
	SnapshotsBefore  int       `json:"snapshots_before"`

	Expired     []ExpiredSnapshot `json:"expired,omitempty"`      // oldest first
	RemovedRefs []RemovedRef      `json:"removed_refs,omitempty"` // by name
	// Refs is every branch and tag at plan time; the commit requires the
	// table to have exactly these refs, at these snapshots.
	Refs map[string]int64 `json:"refs"`
	// Files become unreferenced when Expired is gone; each is re-checked
	// against fresh metadata before it is deleted.
	Files        []File       `json:"files,omitempty"`
	Unreadable   []Unreadable `json:"unreadable,omitempty"`
	FilesBlocked string       `json:"files_blocked,omitempty"`
	// RemovedSchemas and RemovedSpecs are the schemas and partition specs
	// the commit removes (clean_expired_metadata), by id.
	RemovedSchemas []int `json:"removed_schemas,omitempty"`
	RemovedSpecs   []int `json:"removed_specs,omitempty"`
	// currentSchema and defaultSpec are planned from; a commit that
	// removes schemas or specs requires them unchanged.
	currentSchema, defaultSpec int

	// retained maps each retained snapshot to its manifest list, and
	// retainedManifests holds their manifests: files are immutable, so the
	// post-commit check reads only what is new since.
	retained          map[int64]string
	retainedManifests map[string]struct{}
	// refs holds the planned refs in full, to restore one that was lost.
	refs map[string]table.SnapshotRef
	// retentionProps are the table's history.expire properties that are
	// set, as planned with.
	retentionProps map[string]string
}

// ExpiredSnapshot is one snapshot the plan removes, and why.
type ExpiredSnapshot struct {
	SnapshotID int64     `json:"snapshot_id"`
	Timestamp  time.Time `json:"timestamp"`
	Reason     string    `json:"reason"`
}

// RemovedRef is a branch or tag the plan removes.
type RemovedRef struct {
	Name       string        `json:"name"`
	Type       string        `json:"type"` // "branch" or "tag"
	SnapshotID int64         `json:"snapshot_id"`
	Age        time.Duration `json:"age"`
	MaxRefAge  time.Duration `json:"max_ref_age"`
	Reason     string        `json:"reason"`
}

// File is one file the plan deletes.
type File struct {
	Path string   `json:"path"`
	Kind FileKind `json:"kind"`
	Size int64    `json:"size_bytes"` // 0 when unknown (manifest lists on some stores)
}

// Unreadable is a manifest list or manifest of an expiring snapshot that is
// missing or cannot be decoded; while there is one, nothing is deleted
// (FilesBlocked). A retained one fails the plan instead.
type Unreadable struct {
	SnapshotID int64  `json:"snapshot_id,omitempty"` // 0 for a manifest
	Path       string `json:"path"`
	Err        string `json:"error"` // names the file and what is wrong
}

// Empty reports whether the plan changes nothing: Execute then writes no
// metadata and deletes nothing.
func (p *Plan) Empty() bool { return len(p.Expired) == 0 && len(p.RemovedRefs) == 0 }

// ExpiredIDs returns the ids of the expired snapshots, oldest first.
func (p *Plan) ExpiredIDs() []int64 {
	ids := make([]int64, len(p.Expired))
	for i, e := range p.Expired {
		ids[i] = e.SnapshotID
	}
	return ids
}

// FileBytes sums the known sizes of the planned files.
func (p *Plan) FileBytes() (n int64) {
	for _, f := range p.Files {
		n += f.Size
	}
	return n
}

// PlanTable decides which snapshots expire, which refs go, and which files
// become unreferenced. It reads manifest lists and manifests but writes
// nothing. now is injected so that retention is testable; snapshots with
// timestamps after now are never expired.
func PlanTable(ctx context.Context, tbl *table.Table, cfg Config, now time.Time) (*Plan, error) {
	return planTable(ctx, tbl, cfg, now, nil)
}

// planTable is PlanTable; a non-nil limit (the plan first shown) restricts
// the result to snapshots, refs and files limit also had.
func planTable(ctx context.Context, tbl *table.Table, cfg Config, now time.Time, limit *Plan) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid expiration config: %w", err)
	}
	meta := tbl.Metadata()
	if !tableprops.GCAllowed(meta.Properties()) {
		return nil, fmt.Errorf("expire %s: %w: its files may be shared with another table, so nothing is expired",
			strings.Join(tbl.Identifier(), "."), ErrGCDisabled)
	}
	pol, err := ResolvePolicy(cfg, meta.Properties())
	if err != nil {
		return nil, err
	}
	p := &Plan{
		TableUUID: meta.TableUUID().String(), MetadataLocation: tbl.MetadataLocation(),
		Now: now, Policy: pol, SnapshotsBefore: len(meta.Snapshots()),
		Refs: map[string]int64{}, refs: map[string]table.SnapshotRef{}, retentionProps: map[string]string{},
	}
	for _, k := range retentionProps {
		if v, ok := meta.Properties()[k]; ok {
			p.retentionProps[k] = v
		}
	}
	keep, err := selectSnapshots(meta, pol, now, p, limit)
	if err != nil {
		return nil, err
	}
	if p.Empty() {
		return p, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}
	var specs map[int32]bool
	if cfg.CleanExpiredMetadata {
		specs = map[int32]bool{}
	}
	if err := planFiles(ctx, fs, meta, keep, p, specs); err != nil {
		return nil, err
	}
	if specs != nil {
		p.unusedMetadata(meta, keep, specs, limit)
	}
	if limit != nil {
		allowed := make(map[string]struct{}, len(limit.Files))
		for _, f := range limit.Files {
			allowed[f.Path] = struct{}{}
		}
		p.Files = slices.DeleteFunc(p.Files, func(f File) bool { _, ok := allowed[f.Path]; return !ok })
	}
	return p, nil
}

// selectSnapshots applies the retention rules to the metadata alone and
// fills p.Expired, p.RemovedRefs and p.Refs. It returns the retained set.
//
// A ref older than its max-ref-age is removed (never main). A kept ref's
// snapshot is kept. On a branch, the newest retain-last ancestors are kept,
// and beyond them each ancestor no older than max-age: unlike Java's walk,
// it does not stop at the first old one, so a snapshot with a skewed future
// timestamp deeper in the history is never expired early. Snapshots no kept
// ref reaches are kept while younger than the table's max-age. With a limit,
// only refs and snapshots the limit also removes are removed.
func selectSnapshots(meta table.Metadata, pol Policy, now time.Time, p *Plan, limit *Plan) (map[int64]bool, error) {
	snaps := meta.Snapshots()
	byID := make(map[int64]*table.Snapshot, len(snaps))
	for i := range snaps {
		byID[snaps[i].SnapshotID] = &snaps[i]
	}
	nowMs := now.UnixMilli()
	// young reports whether ts is within maxAge of now (or in the future).
	young := func(ts int64, maxAge time.Duration) bool { return ts >= nowMs-maxAge.Milliseconds() }

	keep := map[int64]bool{}
	reachable := map[int64]bool{}
	refs := maps.Collect(meta.Refs())
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		ref := refs[name]
		p.Refs[name], p.refs[name] = ref.SnapshotID, ref
		head := byID[ref.SnapshotID]
		if head == nil {
			return nil, fmt.Errorf("%w: %s %q points at snapshot %d, which the metadata does not list",
				ErrInvalidMetadata, ref.SnapshotRefType, name, ref.SnapshotID)
		}
		maxRefAge := pol.MaxRefAge
		if ref.MaxRefAgeMs != nil && *ref.MaxRefAgeMs > 0 {
			maxRefAge = msDuration(*ref.MaxRefAgeMs)
		}
		if name != table.MainBranch && maxRefAge > 0 && !young(head.TimestampMs, maxRefAge) &&
			(limit == nil || limit.removesRef(name, ref.SnapshotID)) {
			p.RemovedRefs = append(p.RemovedRefs, RemovedRef{
				Name: name, Type: string(ref.SnapshotRefType), SnapshotID: ref.SnapshotID,
				Age: time.Duration(nowMs-head.TimestampMs) * time.Millisecond, MaxRefAge: maxRefAge,
				Reason: ReasonRefTooOld,
			})
			continue
		}
		keep[head.SnapshotID] = true
		reachable[head.SnapshotID] = true
		if ref.SnapshotRefType != table.BranchRef {
			continue
		}
		minKeep, maxAge := pol.RetainLast, pol.MaxSnapshotAge
		if ref.MinSnapshotsToKeep != nil {
			minKeep = max(*ref.MinSnapshotsToKeep, 1)
		}
		if ref.MaxSnapshotAgeMs != nil && *ref.MaxSnapshotAgeMs >= 0 {
			maxAge = msDuration(*ref.MaxSnapshotAgeMs)
		}
		seen := map[int64]bool{}
		for i, s := 0, head; s != nil && !seen[s.SnapshotID]; i++ {
			seen[s.SnapshotID] = true
			reachable[s.SnapshotID] = true
			if i < minKeep || young(s.TimestampMs, maxAge) {
				keep[s.SnapshotID] = true
			}
			if s.ParentSnapshotID == nil {
				break
			}
			s = byID[*s.ParentSnapshotID]
		}
	}
	// A table without a main ref (old v1 metadata) still has a current
	// snapshot; it is never expired.
	if cur := meta.CurrentSnapshot(); cur != nil {
		keep[cur.SnapshotID] = true
	}
	var allowed map[int64]bool
	if limit != nil {
		allowed = make(map[int64]bool, len(limit.Expired))
		for _, e := range limit.Expired {
			allowed[e.SnapshotID] = true
		}
	}
	for _, s := range snaps {
		if keep[s.SnapshotID] {
			continue
		}
		if allowed != nil && !allowed[s.SnapshotID] {
			keep[s.SnapshotID] = true
			continue
		}
		if !reachable[s.SnapshotID] && young(s.TimestampMs, pol.MaxSnapshotAge) {
			keep[s.SnapshotID] = true
			continue
		}
		reason := ReasonUnreferenced
		if reachable[s.SnapshotID] {
			reason = ReasonBeyondRetention
		}
		p.Expired = append(p.Expired, ExpiredSnapshot{
			SnapshotID: s.SnapshotID, Timestamp: time.UnixMilli(s.TimestampMs).UTC(), Reason: reason,
		})
	}
	slices.SortFunc(p.Expired, func(a, b ExpiredSnapshot) int {
		return cmp.Or(a.Timestamp.Compare(b.Timestamp), cmp.Compare(a.SnapshotID, b.SnapshotID))
	})
	return keep, nil
}

// unusedMetadata fills RemovedSchemas and RemovedSpecs: the schemas no
// retained snapshot names and the specs no retained manifest was written
// with (specs), never the current schema or the default spec. A retained
// snapshot that names no schema (old v1 metadata) could use any, so then no
// schema is removed. With a limit, only what the limit also removed.
func (p *Plan) unusedMetadata(meta table.Metadata, keep map[int64]bool, specs map[int32]bool, limit *Plan) {
	p.currentSchema, p.defaultSpec = meta.CurrentSchema().ID, meta.DefaultPartitionSpec()
	usedSchemas := map[int]bool{p.currentSchema: true}
	knowSchemas := true
	for _, s := range meta.Snapshots() {
		switch {
		case !keep[s.SnapshotID]:
		case s.SchemaID == nil:
			knowSchemas = false
		default:
			usedSchemas[*s.SchemaID] = true
		}
	}
	allowed := func(id int, before []int) bool { return limit == nil || slices.Contains(before, id) }
	if knowSchemas {
		for _, sc := range meta.Schemas() {
			if !usedSchemas[sc.ID] && allowed(sc.ID, limit.schemas()) {
				p.RemovedSchemas = append(p.RemovedSchemas, sc.ID)
			}
		}
	}
	for _, spec := range meta.PartitionSpecs() {
		id := spec.ID()
		if id != p.defaultSpec && !specs[int32(id)] && allowed(id, limit.specs()) {
			p.RemovedSpecs = append(p.RemovedSpecs, id)
		}
	}
	slices.Sort(p.RemovedSchemas)
	slices.Sort(p.RemovedSpecs)
}

func (p *Plan) schemas() []int {
	if p == nil {
		return nil
	}
	return p.RemovedSchemas
}

func (p *Plan) specs() []int {
	if p == nil {
		return nil
	}
	return p.RemovedSpecs
}

func (p *Plan) removesRef(name string, id int64) bool {
	return slices.ContainsFunc(p.RemovedRefs, func(r RemovedRef) bool { return r.Name == name && r.SnapshotID == id })
}

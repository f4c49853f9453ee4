package orphans

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/units"
)

// Sentinel errors; callers classify with errors.Is. Every one of them means
// nothing was deleted, except when Execute returns ErrGCDisabled,
// ErrTableChanged or ErrMetadataRead found at a later batch: its message
// then says how many files were deleted before.
var (
	// ErrGCDisabled: the table has gc.enabled=false (or a value that is not
	// a boolean): its files may be shared with other tables.
	ErrGCDisabled = errors.New("table has gc.enabled=false")
	// ErrLocationOutsideTable: the configured location is not inside the
	// table location.
	ErrLocationOutsideTable = errors.New("location is outside the table location")
	// ErrSharedLocation: another table of the catalog lives under the
	// listed location (or the table lives under another table's location).
	ErrSharedLocation = errors.New("location is shared with another table")
	// ErrPrefixMismatch: listed files match referenced paths only up to the
	// scheme or authority; see MismatchError for the pairs.
	ErrPrefixMismatch = errors.New("scheme or authority mismatch between listed and referenced files")
	// ErrListing: listing the location failed.
	ErrListing = errors.New("listing failed")
	// ErrTableChanged: between planning and deleting, the table was replaced
	// (another UUID) or moved to another location.
	ErrTableChanged = errors.New("table changed identity or location since planning")
	// ErrInvalidPlan: the plan handed to Execute holds a path it cannot
	// have produced (outside the location, hidden).
	ErrInvalidPlan = errors.New("invalid orphan plan")
	// ErrDeleteFailed: some deletions failed (the others went through).
	ErrDeleteFailed = errors.New("some orphan files could not be deleted")
)

// Reasons a listed file is not a candidate, stable strings for output.
const (
	ReasonDisabled         = "orphan removal disabled"
	ReasonHidden           = "hidden or staging path"
	ReasonTooYoung         = "younger than min_age"
	ReasonPrefixIgnored    = "same path as a referenced file under another scheme or authority (prefix_mismatch=ignore)"
	ReasonNothingToDelete  = "no orphan file older than min_age"
	listQueue              = 1 << 16 // listed files waiting for the referenced set
	propertyGCEnabled      = "gc.enabled"
	maxReportedMismatches  = 1000
	mismatchPairsInMessage = 10
)

// Plan is what one orphan-removal run will delete from one table. It is a
// value: the plan that `plan` and `--dry-run` show is the plan that Execute
// runs (after re-checking every candidate against fresh metadata).
type Plan struct {
	Table            string        `json:"table"`
	TableUUID        string        `json:"table_uuid"`
	TableLocation    string        `json:"table_location"`
	Location         string        `json:"location"` // the folder listed
	MetadataLocation string        `json:"metadata_location"`
	Now              time.Time     `json:"now"`
	MinAge           time.Duration `json:"-"`
	// Cutoff = Now - MinAge: only files modified before it are candidates.
	Cutoff time.Time `json:"cutoff"`
	// Reason says why the plan is empty when it is (disabled, nothing old).
	Reason string `json:"reason,omitempty"`

	// Candidates are the orphan files to delete, by path.
	Candidates []Candidate `json:"candidates"`
	// Skipped are the listed files (and unlisted hidden folders) that no
	// metadata references but that are kept, with the reason.
	Skipped []Skipped `json:"skipped,omitempty"`

	ListedFiles     int   `json:"listed_files"`
	ListedBytes     int64 `json:"listed_bytes"`
	ReferencedFiles int   `json:"referenced_files"` // listed files the metadata references
	Snapshots       int   `json:"snapshots"`
	ManifestLists   int   `json:"manifest_lists"`
	Manifests       int   `json:"manifests"` // distinct manifests read
	ManifestEntries int   `json:"manifest_entries"`

	// The matching rules the plan was made with; Execute re-checks with
	// the same ones.
	EqualSchemes     map[string]string `json:"equal_schemes,omitempty"`
	EqualAuthorities map[string]string `json:"equal_authorities,omitempty"`
	PrefixMismatch   string            `json:"prefix_mismatch"`
	hiddenFields     map[string]bool
}

// Candidate is one orphan file the plan deletes.
type Candidate struct {
	Path     string        `json:"path"`
	Size     int64         `json:"size_bytes"`
	Modified time.Time     `json:"modified"`
	Age      time.Duration `json:"-"` // Now - Modified
}

// candidateJSON is a Candidate with its age as a duration in the config's
// form ("4d").
type candidateJSON struct {
	plainCandidate
	Age units.Duration `json:"age"`
}

type plainCandidate Candidate

// MarshalJSON adds the age, to the second.
func (c Candidate) MarshalJSON() ([]byte, error) {
	return json.Marshal(candidateJSON{plainCandidate(c), units.Duration(c.Age.Round(time.Second))})
}

// UnmarshalJSON reads back what MarshalJSON writes, the age included.
func (c *Candidate) UnmarshalJSON(b []byte) error {
	var v candidateJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = Candidate(v.plainCandidate)
	c.Age = time.Duration(v.Age)
	return nil
}

// Skipped is a listed file (or an unlisted hidden folder, Dir set) that is
// unreferenced but kept.
type Skipped struct {
	Path     string    `json:"path"`
	Size     int64     `json:"size_bytes,omitempty"`
	Modified time.Time `json:"modified,omitzero"`
	Dir      bool      `json:"dir,omitempty"`
	Reason   string    `json:"reason"`
}

// Empty reports whether the plan deletes nothing.
func (p *Plan) Empty() bool { return len(p.Candidates) == 0 }

// CandidateBytes sums the candidates' sizes.
func (p *Plan) CandidateBytes() (n int64) {
	for _, c := range p.Candidates {
		n += c.Size
	}
	return n
}

// Mismatch is a listed file and a referenced path that differ only in
// scheme or authority.
type Mismatch struct {
	Listed     string `json:"listed"`
	Referenced string `json:"referenced"`
}

// MismatchError lists the conflicting pairs (up to 1000; Total counts all)
// of a run aborted in prefix_mismatch=error mode. It matches
// ErrPrefixMismatch.
type MismatchError struct {
	Pairs []Mismatch
	Total int
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d listed file(s) match a referenced path only up to the scheme or authority "+
		"(set equal_schemes / equal_authorities, or prefix_mismatch to ignore or delete)", ErrPrefixMismatch, e.Total)
	for i, p := range e.Pairs {
		if i == mismatchPairsInMessage {
			fmt.Fprintf(&b, "; and %d more", e.Total-i)
			break
		}
		fmt.Fprintf(&b, "; listed %s vs referenced %s", p.Listed, p.Referenced)
	}
	return b.String()
}

func (e *MismatchError) Unwrap() error { return ErrPrefixMismatch }

// resolveLocation returns the folder to list: cfg.Location (absolute, or
// relative to the table location) or the table location.
func resolveLocation(tableLocation, location string) string {
	if location == "" {
		return tableLocation
	}
	if schemeEnd(location) > 0 || strings.HasPrefix(location, "/") {
		return location
	}
	return join(tableLocation, location)
}

// hiddenPartitionFields are the partition field names, of any spec, that
// start with "_" or ".": folders "<name>=<value>" are partition folders,
// not hidden ones.
func hiddenPartitionFields(meta table.Metadata) map[string]bool {
	out := map[string]bool{}
	for _, spec := range meta.PartitionSpecs() {
		for _, f := range spec.Fields() {
			if strings.HasPrefix(f.Name, "_") || strings.HasPrefix(f.Name, ".") {
				out[f.Name] = true
			}
		}
	}
	return out
}

// scope is what PlanTable and Execute both derive from a table and a config.
type scope struct {
	norm     normalizer
	tableLoc loc
	listRaw  string
	listLoc  loc
}

func newScope(meta table.Metadata, cfg Config) (scope, error) {
	var s scope
	var err error
	if s.norm, err = newNormalizer(cfg); err != nil {
		return s, err
	}
	if s.tableLoc, err = parseLoc(meta.Location()); err != nil {
		return s, fmt.Errorf("table location: %w", err)
	}
	s.listRaw = resolveLocation(meta.Location(), cfg.Location)
	if s.listLoc, err = parseLoc(s.listRaw); err != nil {
		return s, fmt.Errorf("location: %w", err)
	}
	if !s.norm.under(s.listLoc, s.tableLoc) {
		return s, fmt.Errorf("%w: %s is not inside %s", ErrLocationOutsideTable, s.listRaw, meta.Location())
	}
	return s, nil
}

// relative returns l's path below the table location.
func (s scope) relative(l loc) string {
	return strings.TrimPrefix(strings.TrimPrefix(l.path, strings.TrimSuffix(s.tableLoc.path, "/")), "/")
}

// PlanTable lists the table's location (or cfg.Location inside it) through
// store, builds the set of every path the table's metadata references, and
// returns the unreferenced, non-hidden files older than cfg.MinAge as
// candidates. It deletes nothing. now is injected for the age check.
//
// otherTableLocations are the locations of the catalog's other tables
// (Listing.Neighbours collects them); the plan refuses when one lies
// inside the listed location or contains the table.
//
// It refuses (returns an error, no plan) when gc.enabled is false, the
// location is outside the table or shared, any listing or metadata read
// fails, or, in prefix_mismatch=error mode, a listed file matches a
// referenced path only up to its scheme or authority (*MismatchError).
func PlanTable(ctx context.Context, tbl *table.Table, store objstore.Store, cfg Config, now time.Time, otherTableLocations []string) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid orphan config: %w", err)
	}
	meta := tbl.Metadata()
	p := &Plan{
		Table:            strings.Join(tbl.Identifier(), "."),
		TableUUID:        meta.TableUUID().String(),
		TableLocation:    meta.Location(),
		MetadataLocation: tbl.MetadataLocation(),
		Now:              now,
		MinAge:           cfg.MinAge,
		Cutoff:           now.Add(-cfg.MinAge),
		PrefixMismatch:   cfg.PrefixMismatch,
		hiddenFields:     hiddenPartitionFields(meta),
	}
	p.EqualSchemes, _ = flattenEquivalences(cfg.EqualSchemes, true)
	p.EqualAuthorities, _ = flattenEquivalences(cfg.EqualAuthorities, false)
	if !cfg.Enabled {
		p.Reason = ReasonDisabled
		return p, nil
	}
	if !tableprops.GCAllowed(meta.Properties()) {
		return nil, fmt.Errorf("%w (%s=%q): its files may be shared with other tables", ErrGCDisabled, propertyGCEnabled, meta.Properties()[propertyGCEnabled])
	}
	sc, err := newScope(meta, cfg)
	if err != nil {
		return nil, err
	}
	p.Location = sc.listRaw
	for _, other := range otherTableLocations {
		ol, err := parseLoc(other)
		if err != nil {
			return nil, fmt.Errorf("%w: cannot compare another table's location: %v", ErrSharedLocation, err)
		}
		if sc.norm.under(ol, sc.listLoc) || sc.norm.under(sc.tableLoc, ol) {
			return nil, fmt.Errorf("%w: table at %s and another table at %s", ErrSharedLocation, sc.listRaw, other)
		}
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}

	// List and collect the references at the same time. Listed files wait
	// in a bounded queue until the referenced set is complete, then are
	// classified as they come: memory holds the references (as hashes),
	// the queue and the plan, never the whole listing. The first failure
	// stops both and is the error reported.
	refs := newRefSet(newHasher(), sc.norm, sc.listLoc.path)
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	listed := make(chan objstore.FileInfo, listQueue)
	go func() {
		defer close(listed)
		skipDir := func(dir string) bool {
			l, err := parseLoc(dir)
			return err == nil && hiddenSegment(sc.relative(l), p.hiddenFields) != ""
		}
		for fi, err := range store.List(runCtx, sc.listRaw, objstore.ListOptions{SkipDir: skipDir, Concurrency: cfg.ListConcurrency}) {
			if err != nil {
				cancel(fmt.Errorf("%w: %s: %w", ErrListing, sc.listRaw, err))
				return
			}
			select {
			case listed <- fi:
			case <-runCtx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel(nil)
		for range listed { // let the lister finish
		}
	}()
	st, err := walkReferences(runCtx, fs, meta, tbl.MetadataLocation(), cfg.ListConcurrency, newWalked(), refs.add)
	if err != nil {
		cancel(fmt.Errorf("collect referenced files: %w", err))
	}
	p.Snapshots, p.ManifestLists, p.Manifests, p.ManifestEntries = st.Snapshots, st.ManifestLists, st.Manifests, st.Entries

	mismatch := &MismatchError{}
	for fi := range listed {
		if runCtx.Err() != nil {
			break
		}
		if fi.Dir {
			p.Skipped = append(p.Skipped, Skipped{Path: fi.Path, Dir: true, Reason: ReasonHidden})
			continue
		}
		l, err := parseLoc(fi.Path)
		if err != nil {
			return nil, fmt.Errorf("%w: listed path: %w", ErrListing, err)
		}
		if !sc.norm.under(l, sc.listLoc) {
			return nil, fmt.Errorf("%w: the store listed %s, which is not under %s", ErrListing, fi.Path, sc.listRaw)
		}
		p.ListedFiles++
		p.ListedBytes += fi.Size
		if hiddenSegment(sc.relative(l), p.hiddenFields) != "" {
			p.Skipped = append(p.Skipped, Skipped{Path: fi.Path, Size: fi.Size, Modified: fi.ModTime, Reason: ReasonHidden})
			continue
		}
		referenced, others := refs.match(l)
		if referenced {
			p.ReferencedFiles++
			continue
		}
		if fi.ModTime.After(p.Cutoff) {
			p.Skipped = append(p.Skipped, Skipped{Path: fi.Path, Size: fi.Size, Modified: fi.ModTime, Reason: ReasonTooYoung})
			continue
		}
		if len(others) > 0 {
			switch cfg.PrefixMismatch {
			case PrefixMismatchError:
				mismatch.Total++
				if len(mismatch.Pairs) < maxReportedMismatches {
					mismatch.Pairs = append(mismatch.Pairs, Mismatch{Listed: fi.Path, Referenced: others[0]})
				}
				continue
			case PrefixMismatchIgnore:
				p.Skipped = append(p.Skipped, Skipped{Path: fi.Path, Size: fi.Size, Modified: fi.ModTime, Reason: ReasonPrefixIgnored})
				continue
			}
		}
		p.Candidates = append(p.Candidates, Candidate{Path: fi.Path, Size: fi.Size, Modified: fi.ModTime, Age: now.Sub(fi.ModTime)})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("plan orphan removal: %w", context.Cause(ctx))
	}
	if runCtx.Err() != nil {
		return nil, context.Cause(runCtx)
	}
	if mismatch.Total > 0 {
		slices.SortFunc(mismatch.Pairs, func(a, b Mismatch) int { return cmp.Compare(a.Listed, b.Listed) })
		return nil, mismatch
	}
	slices.SortFunc(p.Candidates, func(a, b Candidate) int { return cmp.Compare(a.Path, b.Path) })
	slices.SortFunc(p.Skipped, func(a, b Skipped) int { return cmp.Compare(a.Path, b.Path) })
	if p.Empty() {
		p.Reason = ReasonNothingToDelete
	}
	return p, nil
}

// config rebuilds the matching part of the config the plan was made with.
func (p *Plan) config(cfg Config) Config {
	cfg.EqualSchemes = maps.Clone(p.EqualSchemes)
	cfg.EqualAuthorities = maps.Clone(p.EqualAuthorities)
	cfg.PrefixMismatch = p.PrefixMismatch
	cfg.MinAge = p.Now.Sub(p.Cutoff) // = MinAge, and survives a JSON round trip
	cfg.Location = p.Location
	return cfg
}

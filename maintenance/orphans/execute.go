package orphans

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

// TableLoader re-loads a table; the catalog satisfies it.
type TableLoader interface {
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
}

// Options carry what Execute needs besides the plan.
type Options struct {
	Logger *slog.Logger
	// BatchSize is the number of paths handed to Store.Delete at once (one
	// DeleteObjects call on S3); 0 or more than MaxDeleteBatch means
	// MaxDeleteBatch.
	BatchSize int
	// beforeDelete, a test hook, runs before each batch is deleted.
	beforeDelete func(batch int)
}

// Result is what an orphan-removal run did.
type Result struct {
	FilesFound   int   // candidates in the plan
	BytesFound   int64 // their bytes
	FilesDeleted int
	BytesDeleted int64
	// NowReferenced are candidates that the freshly loaded metadata
	// references (a writer committed them after planning); kept.
	NowReferenced []string
	// Failed are the deletions that failed; the files are still there.
	Failed []Failure
	// NotAttempted counts candidates left because the run was cancelled.
	NotAttempted int
	// DeleteBatches is the number of Store.Delete calls made.
	DeleteBatches int
}

// Failure is one file that could not be deleted.
type Failure struct {
	Path string
	Err  error
}

// Execute deletes the plan's candidates. Just before deleting it re-loads
// the table through cat and re-checks every candidate against the fresh
// metadata (every snapshot, manifest and metadata file, read as in
// planning): a candidate the fresh metadata references is kept and listed
// in Result.NowReferenced. It refuses, deleting nothing, when the table now
// has gc.enabled=false, has another UUID or location, or its metadata
// cannot be read. Deletes run in batches of Options.BatchSize,
// cfg.DeleteConcurrency at a time; once ctx is done no further batch
// starts. The matching rules and the location are the plan's; cfg supplies
// the concurrency.
//
// A writer that commits a candidate after the re-check and before its
// batch is deleted is not seen; what protects that file is MinAge: it was
// already older than MinAge when planned, and the floor of 24h assumes no
// writer holds an uncommitted file that long.
//
// The returned error is non-nil when anything was refused, cancelled or
// failed; Result says what was deleted.
func Execute(ctx context.Context, cat TableLoader, tbl *table.Table, store Store, plan *Plan, cfg Config, opts Options) (*Result, error) {
	res := &Result{FilesFound: len(plan.Candidates), BytesFound: plan.CandidateBytes()}
	if plan.Empty() {
		return res, nil
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BatchSize <= 0 || opts.BatchSize > MaxDeleteBatch {
		opts.BatchSize = MaxDeleteBatch
	}
	cfg = plan.config(cfg)
	if err := cfg.Validate(); err != nil {
		return res, fmt.Errorf("invalid orphan config: %w", err)
	}
	log := opts.Logger.With("table", plan.Table, "task", "orphans")
	if err := ctx.Err(); err != nil {
		res.NotAttempted = len(plan.Candidates)
		return res, fmt.Errorf("orphan removal cancelled before deleting: %w", context.Cause(ctx))
	}

	toDelete, err := recheck(ctx, cat, tbl, plan, cfg, res)
	if err != nil {
		res.NowReferenced = nil
		if ctx.Err() != nil {
			res.NotAttempted = len(plan.Candidates)
		}
		return res, err
	}
	if len(res.NowReferenced) > 0 {
		log.Warn("candidates committed since planning are kept", "files", len(res.NowReferenced))
	}

	// Delete in batches; a cancelled context stops new batches.
	var batches [][]Candidate
	for c := range slices.Chunk(toDelete, opts.BatchSize) {
		batches = append(batches, c)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(cfg.DeleteConcurrency, len(batches)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b := batches[i]
				if opts.beforeDelete != nil {
					opts.beforeDelete(i)
				}
				if ctx.Err() != nil {
					mu.Lock()
					res.NotAttempted += len(b)
					mu.Unlock()
					continue
				}
				paths := make([]string, len(b))
				size := make(map[string]int64, len(b))
				for j, c := range b {
					paths[j] = c.Path
					size[c.Path] = c.Size
				}
				deleted, failed := store.Delete(ctx, paths)
				mu.Lock()
				res.DeleteBatches++
				for _, p := range deleted {
					res.FilesDeleted++
					res.BytesDeleted += size[p]
				}
				for _, p := range paths {
					err, ok := failed[p]
					switch {
					case !ok:
					case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
						res.NotAttempted++
					default:
						res.Failed = append(res.Failed, Failure{Path: p, Err: err})
					}
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range batches {
		select {
		case next <- i:
		case <-ctx.Done():
			for _, b := range batches[i:] {
				mu.Lock()
				res.NotAttempted += len(b)
				mu.Unlock()
			}
			break feed
		}
	}
	close(next)
	wg.Wait()
	slices.SortFunc(res.Failed, func(a, b Failure) int { return strings.Compare(a.Path, b.Path) })

	log.Info("orphan files removed", "found", res.FilesFound, "bytes_found", res.BytesFound,
		"deleted", res.FilesDeleted, "bytes_deleted", res.BytesDeleted, "now_referenced", len(res.NowReferenced),
		"failed", len(res.Failed), "not_attempted", res.NotAttempted)
	if ctx.Err() != nil && res.NotAttempted > 0 {
		return res, fmt.Errorf("orphan removal cancelled after deleting %d of %d files: %w",
			res.FilesDeleted, len(toDelete), context.Cause(ctx))
	}
	if len(res.Failed) > 0 {
		errs := make([]error, 0, min(len(res.Failed), 10))
		for _, f := range res.Failed[:min(len(res.Failed), 10)] {
			errs = append(errs, fmt.Errorf("delete %s: %w", f.Path, f.Err))
		}
		return res, fmt.Errorf("%w: %d of %d: %w", ErrDeleteFailed, len(res.Failed), len(toDelete), errors.Join(errs...))
	}
	return res, nil
}

// recheck re-loads the table and returns the candidates that the fresh
// metadata still does not reference; the others go to res.NowReferenced.
func recheck(ctx context.Context, cat TableLoader, tbl *table.Table, plan *Plan, cfg Config, res *Result) ([]Candidate, error) {
	fresh, err := cat.LoadTable(ctx, tbl.Identifier())
	if err != nil {
		return nil, fmt.Errorf("re-load table %s before deleting: %w", plan.Table, err)
	}
	meta := fresh.Metadata()
	if !tableprops.GCAllowed(meta.Properties()) {
		return nil, fmt.Errorf("%w (%s=%q, set since planning)", ErrGCDisabled, propertyGCEnabled, meta.Properties()[propertyGCEnabled])
	}
	if got := meta.TableUUID().String(); got != plan.TableUUID {
		return nil, fmt.Errorf("%w: table UUID was %s, is %s", ErrTableChanged, plan.TableUUID, got)
	}
	sc, err := newScope(meta, cfg)
	if err != nil {
		return nil, err
	}
	planned, err := parseLoc(plan.TableLocation)
	if err != nil || sc.norm.prefix(planned) != sc.norm.prefix(sc.tableLoc) || planned.path != sc.tableLoc.path {
		return nil, fmt.Errorf("%w: location was %s, is %s", ErrTableChanged, plan.TableLocation, meta.Location())
	}

	// Candidates must be what a plan of this table can hold.
	hidden := hiddenPartitionFields(meta)
	h := newHasher()
	locs := make([]loc, len(plan.Candidates))
	want := make(map[pathHash]struct{}, len(plan.Candidates))
	for i, c := range plan.Candidates {
		l, err := parseLoc(c.Path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidPlan, err)
		}
		if !sc.norm.under(l, sc.listLoc) {
			return nil, fmt.Errorf("%w: %s is not under %s", ErrInvalidPlan, c.Path, sc.listRaw)
		}
		if seg := hiddenSegment(sc.relative(l), hidden); seg != "" {
			return nil, fmt.Errorf("%w: %s is in hidden %q", ErrInvalidPlan, c.Path, seg)
		}
		if c.Modified.After(plan.Cutoff) || plan.Now.Sub(plan.Cutoff) < MinAgeFloor {
			return nil, fmt.Errorf("%w: %s is younger than min_age", ErrInvalidPlan, c.Path)
		}
		locs[i] = l
		want[h.sum(l.path)] = struct{}{}
	}

	fs, err := fresh.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}
	refs := newRefSet(h, sc.norm, sc.listLoc.path)
	refs.keep = func(ph pathHash) bool { _, ok := want[ph]; return ok }
	if _, err := walkReferences(ctx, fs, meta, fresh.MetadataLocation(), cfg.ListConcurrency, refs.add); err != nil {
		return nil, fmt.Errorf("re-check candidates against fresh metadata: %w", err)
	}

	out := make([]Candidate, 0, len(plan.Candidates))
	mismatch := &MismatchError{}
	for i, c := range plan.Candidates {
		referenced, others := refs.match(locs[i])
		switch {
		case referenced:
			res.NowReferenced = append(res.NowReferenced, c.Path)
		case len(others) > 0 && cfg.PrefixMismatch == PrefixMismatchError:
			mismatch.Total++
			if len(mismatch.Pairs) < maxReportedMismatches {
				mismatch.Pairs = append(mismatch.Pairs, Mismatch{Listed: c.Path, Referenced: others[0]})
			}
		case len(others) > 0 && cfg.PrefixMismatch == PrefixMismatchIgnore:
			res.NowReferenced = append(res.NowReferenced, c.Path)
		default:
			out = append(out, c)
		}
	}
	if mismatch.Total > 0 {
		return nil, mismatch
	}
	return out, ctx.Err()
}

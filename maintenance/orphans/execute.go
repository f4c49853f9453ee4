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

	"github.com/iceberg-maintainer/maintainer/internal/catchup"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

// ErrDeletedReferenced: a file was deleted that the table's metadata,
// re-loaded after the deletes, references; the table has lost a live file.
var ErrDeletedReferenced = catchup.ErrDeletedReferenced

// TableLoader re-loads a table; the catalog satisfies it.
type TableLoader interface {
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
}

// Options carry what Execute needs besides the plan.
type Options struct {
	Logger *slog.Logger
	// BatchSize is the number of paths handed to Store.Delete at once (one
	// DeleteObjects call on S3); 0 or more than objstore.MaxDeleteBatch
	// means objstore.MaxDeleteBatch.
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
	// DeletedReferenced are deleted files that the metadata re-loaded after
	// the deletes references: a writer committed them in the last moment
	// (see Execute). Execute then fails with ErrDeletedReferenced.
	DeletedReferenced []string
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
// Before each batch it re-loads the table again and, if the metadata moved,
// reads what the new commits added (new metadata files, snapshots, manifests
// not read before, statistics) until a re-load shows no move, and keeps
// every candidate of the batch now referenced (also, unless
// prefix_mismatch=delete, under another scheme or authority). The refusals
// above apply at each catch-up and stop the remaining batches. When the
// metadata did not move this costs one LoadTable per batch.
//
// What is not covered is a writer whose commit lands after the last
// re-load and before the batch's delete request (one request), or whose
// commit reads a file, then lands after it was deleted: MinAge protects
// those (the file was older than MinAge when planned, and the floor of 24h
// assumes no writer holds an uncommitted file that long). After the
// deletes Execute catches up once more; a deleted file the metadata now
// references goes to Result.DeletedReferenced, is logged as an error, and
// the run fails with ErrDeletedReferenced naming it.
//
// The returned error is non-nil when anything was refused, cancelled or
// failed; Result says what was deleted.
func Execute(ctx context.Context, cat TableLoader, tbl *table.Table, store objstore.Store, plan *Plan, cfg Config, opts Options) (*Result, error) {
	res := &Result{FilesFound: len(plan.Candidates), BytesFound: plan.CandidateBytes()}
	if plan.Empty() {
		return res, nil
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BatchSize <= 0 || opts.BatchSize > objstore.MaxDeleteBatch {
		opts.BatchSize = objstore.MaxDeleteBatch
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

	toDelete, tr, err := recheck(ctx, cat, tbl, plan, cfg, res)
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

	// Delete in batches; a cancelled context or a failed catch-up stops
	// new batches.
	var batches [][]Candidate
	for c := range slices.Chunk(toDelete, opts.BatchSize) {
		batches = append(batches, c)
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var mu sync.Mutex
	var deleted []string
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
				if runCtx.Err() == nil {
					if err := tr.catchUp(runCtx); err != nil {
						stop(fmt.Errorf("before deleting batch %d: %w", i, err))
					}
				}
				if runCtx.Err() != nil {
					mu.Lock()
					res.NotAttempted += len(b)
					mu.Unlock()
					continue
				}
				paths := make([]string, 0, len(b))
				size := make(map[string]int64, len(b))
				var kept []string
				for _, c := range b {
					if tr.referenced(c.Path) {
						kept = append(kept, c.Path)
						continue
					}
					paths = append(paths, c.Path)
					size[c.Path] = c.Size
				}
				if len(kept) > 0 {
					log.Warn("candidates committed while deleting are kept", "batch", i, "files", kept)
				}
				var done []string
				var failed map[string]error
				if len(paths) > 0 {
					done, failed = store.Delete(runCtx, paths)
				}
				mu.Lock()
				res.NowReferenced = append(res.NowReferenced, kept...)
				if len(paths) > 0 {
					res.DeleteBatches++
				}
				for _, p := range done {
					res.FilesDeleted++
					res.BytesDeleted += size[p]
				}
				deleted = append(deleted, done...)
				for _, p := range paths {
					err, ok := failed[p]
					switch {
					case !ok:
					case runCtx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
						// Left by the run's own end. A store request that timed
						// out is a deadline error too, but a failure.
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
		case <-runCtx.Done():
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
	slices.Sort(res.NowReferenced)

	// A writer that committed a file after the last re-load and before its
	// delete landed is not seen above: look once more, and say so loudly.
	var verifyErr error
	if len(deleted) > 0 {
		// Also after a cancellation: what was deleted must be checked.
		if err := tr.catchUp(context.WithoutCancel(ctx)); err != nil {
			verifyErr = fmt.Errorf("check the deleted files against the metadata after deleting: %w", err)
		} else {
			for _, p := range deleted {
				if tr.referenced(p) {
					res.DeletedReferenced = append(res.DeletedReferenced, p)
				}
			}
			slices.Sort(res.DeletedReferenced)
		}
	}

	log.Info("orphan files removed", "found", res.FilesFound, "bytes_found", res.BytesFound,
		"deleted", res.FilesDeleted, "bytes_deleted", res.BytesDeleted, "now_referenced", len(res.NowReferenced),
		"failed", len(res.Failed), "not_attempted", res.NotAttempted)
	err = nil
	switch {
	case ctx.Err() != nil && res.NotAttempted > 0:
		err = fmt.Errorf("orphan removal cancelled after deleting %d of %d files: %w",
			res.FilesDeleted, len(toDelete), context.Cause(ctx))
	case runCtx.Err() != nil && res.NotAttempted > 0:
		err = fmt.Errorf("orphan removal stopped after deleting %d of %d files: %w",
			res.FilesDeleted, len(toDelete), context.Cause(runCtx))
	case len(res.Failed) > 0:
		errs := make([]error, 0, min(len(res.Failed), 10))
		for _, f := range res.Failed[:min(len(res.Failed), 10)] {
			errs = append(errs, fmt.Errorf("delete %s: %w", f.Path, f.Err))
		}
		err = fmt.Errorf("%w: %d of %d: %w", ErrDeleteFailed, len(res.Failed), len(toDelete), errors.Join(errs...))
	}
	if n := len(res.DeletedReferenced); n > 0 {
		log.Error("deleted files that the table references: a writer committed them while they were deleted",
			"files", res.DeletedReferenced)
		shown := strings.Join(res.DeletedReferenced[:min(n, 10)], ", ")
		if n > 10 {
			shown += fmt.Sprintf(" and %d more", n-10)
		}
		err = errors.Join(fmt.Errorf("%w: %d file(s), committed while being deleted: %s", ErrDeletedReferenced, n, shown), err)
	}
	if verifyErr != nil {
		log.Error("cannot check the deleted files against the table's metadata", "error", verifyErr)
		err = errors.Join(verifyErr, err)
	}
	return res, err
}

// recheck re-loads the table and returns the candidates that the fresh
// metadata still does not reference, the others going to res.NowReferenced,
// and the tracker that keeps that referenced set current for the deletes.
func recheck(ctx context.Context, cat TableLoader, tbl *table.Table, plan *Plan, cfg Config, res *Result) ([]Candidate, *tracker, error) {
	tr := &tracker{cat: cat, ident: tbl.Identifier(), plan: plan, cfg: cfg, known: newWalked()}
	fresh, err := tr.load(ctx)
	if err != nil {
		return nil, nil, err
	}
	sc, err := tr.admit(fresh)
	if err != nil {
		return nil, nil, err
	}

	// Candidates must be what a plan of this table can hold.
	hidden := hiddenPartitionFields(fresh.Metadata())
	h := newHasher()
	locs := make([]loc, len(plan.Candidates))
	want := make(map[pathHash]struct{}, len(plan.Candidates))
	for i, c := range plan.Candidates {
		l, err := parseLoc(c.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalidPlan, err)
		}
		if !sc.norm.under(l, sc.listLoc) {
			return nil, nil, fmt.Errorf("%w: %s is not under %s", ErrInvalidPlan, c.Path, sc.listRaw)
		}
		if seg := hiddenSegment(sc.relative(l), hidden); seg != "" {
			return nil, nil, fmt.Errorf("%w: %s is in hidden %q", ErrInvalidPlan, c.Path, seg)
		}
		if c.Modified.After(plan.Cutoff) || plan.Now.Sub(plan.Cutoff) < MinAgeFloor {
			return nil, nil, fmt.Errorf("%w: %s is younger than min_age", ErrInvalidPlan, c.Path)
		}
		locs[i] = l
		want[h.sum(l.path)] = struct{}{}
	}

	// Only the candidates' references matter: the set holds those alone.
	tr.refs = newRefSet(h, sc.norm, sc.listLoc.path)
	tr.refs.keep = func(ph pathHash) bool { _, ok := want[ph]; return ok }
	if err := tr.advance(ctx, fresh); err != nil {
		return nil, nil, err
	}

	out := make([]Candidate, 0, len(plan.Candidates))
	mismatch := &MismatchError{}
	for i, c := range plan.Candidates {
		referenced, others := tr.refs.match(locs[i])
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
		return nil, nil, mismatch
	}
	return out, tr, ctx.Err()
}

// tracker keeps the referenced set of a run (the candidates' references)
// up to date with the table's current metadata. A commit only adds to the
// metadata (a metadata file, snapshots, their manifest lists, manifests,
// statistics), so catching up reads only what is new. It never removes an
// entry: expiry may drop snapshots meanwhile, but that only shrinks the true
// referenced set, and a superset is safe.
type tracker struct {
	cat   TableLoader
	ident table.Identifier
	plan  *Plan
	cfg   Config
	refs  *refSet
	known *walked

	mu sync.Mutex
	// at is the metadata location refs is up to date with.
	at string
	// err is the last walk's failure. That walk may have marked manifests
	// read that it never finished, so the next catch-up walks everything
	// again (into the same, only growing, set): the check after a cancelled
	// run's deletes must not inherit the cancellation.
	err error
}

func (t *tracker) load(ctx context.Context) (*table.Table, error) {
	fresh, err := t.cat.LoadTable(ctx, t.ident)
	if err != nil {
		return nil, fmt.Errorf("re-load table %s: %w", t.plan.Table, err)
	}
	return fresh, nil
}

// admit refuses a table that may no longer lose files: gc.enabled is now
// false, or it is another table (UUID) or lives elsewhere than planned.
func (t *tracker) admit(fresh *table.Table) (scope, error) {
	meta := fresh.Metadata()
	if !tableprops.GCAllowed(meta.Properties()) {
		return scope{}, fmt.Errorf("%w (%s=%q, set since planning)", ErrGCDisabled, propertyGCEnabled, meta.Properties()[propertyGCEnabled])
	}
	if got := meta.TableUUID().String(); got != t.plan.TableUUID {
		return scope{}, fmt.Errorf("%w: table UUID was %s, is %s", ErrTableChanged, t.plan.TableUUID, got)
	}
	sc, err := newScope(meta, t.cfg)
	if err != nil {
		return scope{}, err
	}
	planned, err := parseLoc(t.plan.TableLocation)
	if err != nil || sc.norm.prefix(planned) != sc.norm.prefix(sc.tableLoc) || planned.path != sc.tableLoc.path {
		return scope{}, fmt.Errorf("%w: location was %s, is %s", ErrTableChanged, t.plan.TableLocation, meta.Location())
	}
	return sc, nil
}

// catchUp brings refs up to the table's current metadata: it re-loads the
// table and, while the metadata location differs from the one refs was
// built from, adds what is new and re-loads again. When nothing moved it
// costs one LoadTable.
func (t *tracker) catchUp(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		t.known, t.at, t.err = newWalked(), "", nil
	}
	fresh, err := t.load(ctx)
	if err != nil {
		return err
	}
	return catchup.Run(ctx, fresh, func() string { return t.at }, t.load, t.advance)
}

// advance adds to refs what fresh references and was not read before.
// The re-check calls it alone: the catch-up before the first batch then
// re-loads, so the set is confirmed current before anything is deleted.
func (t *tracker) advance(ctx context.Context, fresh *table.Table) (err error) {
	defer func() { t.err = err }()
	if _, err := t.admit(fresh); err != nil {
		return err
	}
	fs, err := fresh.FS(ctx)
	if err != nil {
		return fmt.Errorf("open table IO: %w", err)
	}
	at := fresh.MetadataLocation()
	if _, err := walkReferences(ctx, fs, fresh.Metadata(), at, t.cfg.ListConcurrency, t.known, t.refs.add); err != nil {
		return fmt.Errorf("re-check candidates against fresh metadata %s: %w", at, err)
	}
	t.at = at
	return nil
}

// referenced reports whether the metadata caught up with may reference path:
// it holds path, or, unless prefix_mismatch=delete, the same path under
// another scheme or authority.
func (t *tracker) referenced(path string) bool {
	l, err := parseLoc(path)
	if err != nil {
		return true // recheck parsed every candidate; keep what it cannot
	}
	referenced, others := t.refs.match(l)
	return referenced || len(others) > 0 && t.cfg.PrefixMismatch != PrefixMismatchDelete
}

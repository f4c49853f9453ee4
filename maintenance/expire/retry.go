package expire

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

// ErrDeletedReferenced: a retried file was deleted that the table's
// metadata, caught up after the deletes, references: a writer committed it
// while it was being deleted, and the table has lost a live file.
var ErrDeletedReferenced = catchup.ErrDeletedReferenced

// RetryOptions carry what RetryDeletes needs besides the paths.
type RetryOptions struct {
	Logger  *slog.Logger
	Deleter Deleter
	// beforeDelete, a test hook, runs before each batch catches up.
	beforeDelete func()
}

// RetryResult is what RetryDeletes did with the files earlier runs failed
// to delete.
type RetryResult struct {
	Files int `json:"files"` // paths retried
	// Deleted were deleted now, or were already gone.
	Deleted int `json:"deleted"`
	// Referenced are referenced by the table's current metadata again (a
	// rollback, a re-added file): not deleted, and not retried again; a
	// later expiry plans them anew if they become unreferenced.
	Referenced int `json:"referenced"`
	// Failed could not be deleted again; DeleteFailures lists the first
	// thousand and FailedPaths all of them (with those not attempted).
	Failed         int             `json:"failed"`
	DeleteFailures []DeleteFailure `json:"delete_failures,omitempty"`
	// DeletedReferenced were deleted although a writer committed them
	// meanwhile (see RetryDeletes); RetryDeletes then fails naming them.
	DeletedReferenced []string `json:"deleted_referenced,omitempty"`
	failed            []string
	unreachable       int
	sent              map[string]bool // paths whose delete was sent
}

// FailedPaths returns every retried file that still could not be deleted.
func (r *RetryResult) FailedPaths() []string { return r.failed }

// Attempted reports whether path's delete was sent: a path of a batch the
// run never sent (it stopped, or could not catch up first) failed through
// no fault of its own.
func (r *RetryResult) Attempted(path string) bool { return r.sent[path] }

// Unreachable reports that deletes were sent and every one failed because
// the object store could not be reached: the paths are not at fault.
func (r *RetryResult) Unreachable() bool { return r.Failed > 0 && r.unreachable == r.Failed }

// RetryDeletes deletes paths, the files earlier runs proved unreferenced but
// failed to delete, that the table does not reference. The reference set is
// built from every snapshot of tbl (loaded fresh by the caller): a file
// expired before may have been brought back since. That read can take
// minutes, so, as the orphan pass does, before each batch of deletes the
// table is re-loaded through cat and what new commits added is read, until
// the metadata location stops moving; after the deletes it catches up once
// more, and a deleted file now referenced fails the call with
// ErrDeletedReferenced naming it. If the references cannot be read in full,
// or the table has gc.enabled=false or another UUID, nothing more is deleted
// and the rest stay to retry. Paths that fail again are returned in
// FailedPaths, with an ErrDeleteFailed error.
func RetryDeletes(ctx context.Context, cat TableLoader, tbl *table.Table, paths []string, cfg Config, opts RetryOptions) (*RetryResult, error) {
	res := &RetryResult{Files: len(paths), failed: paths, sent: map[string]bool{}}
	if len(paths) == 0 {
		return res, nil
	}
	name := strings.Join(tbl.Identifier(), ".")
	if err := cfg.Validate(); err != nil {
		return res, fmt.Errorf("retry deletes of %s: invalid expiration config: %w", name, err)
	}
	if opts.Deleter == nil {
		return res, fmt.Errorf("retry deletes of %s: no Deleter", name)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger.With("table", name, "task", "expire")
	tr := newRetryTracker(cat, tbl, paths)
	if err := tr.advance(ctx, tbl); err != nil {
		return res, fmt.Errorf("retry deletes of %s: %w", name, err)
	}
	var files []File
	for _, p := range paths {
		if !tr.referenced(p) {
			files = append(files, File{Path: p})
		}
	}

	var mu sync.Mutex
	deleted := map[string]bool{}
	loopErr := forEachN(ctx, cfg.DeleteConcurrency, slices.Collect(slices.Chunk(files, cfg.batchSize())), func(batch []File) error {
		if opts.beforeDelete != nil {
			opts.beforeDelete()
		}
		// The reference read took a while: a writer may have re-added a
		// path meanwhile.
		if err := tr.catchUp(ctx); err != nil {
			return fmt.Errorf("before deleting: %w", err)
		}
		send := slices.DeleteFunc(slices.Clone(batch), func(f File) bool { return tr.referenced(f.Path) })
		one := Result{Deleted: map[FileKind]Count{}}
		failed := deleteFiles(ctx, opts.Deleter, send, cfg.batchSize(), 1, &one, log)
		mu.Lock()
		defer mu.Unlock()
		for _, f := range send {
			deleted[f.Path] = true
			res.sent[f.Path] = true
		}
		for _, p := range failed {
			delete(deleted, p)
		}
		res.unreachable += one.unreachable
		res.DeleteFailures = append(res.DeleteFailures, one.DeleteFailures[:min(len(one.DeleteFailures), maxListedFailures-len(res.DeleteFailures))]...)
		return nil
	})
	// Every path not deleted is referenced (kept for good) or still to retry,
	// those of batches never sent included.
	res.failed = nil
	for _, p := range paths {
		switch {
		case deleted[p]:
		case tr.referenced(p):
			res.Referenced++
		default:
			res.failed = append(res.failed, p)
		}
	}
	res.Deleted, res.Failed = len(deleted), len(res.failed)
	if res.Referenced > 0 {
		log.Warn("files kept to retry deleting are referenced again; not deleted", "files", res.Referenced)
	}

	// A writer that committed a path after the last catch-up and before its
	// delete landed is not seen above: look once more, and say so loudly.
	var verifyErr error
	if len(deleted) > 0 {
		// Also after a cancellation: what was deleted must be checked.
		if err := tr.catchUp(context.WithoutCancel(ctx)); err != nil {
			verifyErr = fmt.Errorf("check the deleted files against the metadata after deleting: %w", err)
		}
		for _, p := range paths {
			if deleted[p] && tr.referenced(p) {
				res.DeletedReferenced = append(res.DeletedReferenced, p)
			}
		}
	}
	log.Info("retried failed deletes", "files", res.Files, "deleted", res.Deleted,
		"referenced", res.Referenced, "failed", res.Failed)

	var errs []error
	if n := len(res.DeletedReferenced); n > 0 {
		log.Error("deleted retried files that the table references: a writer committed them while they were deleted",
			"files", res.DeletedReferenced)
		errs = append(errs, fmt.Errorf("retry deletes of %s: %w: %d file(s), committed while being deleted: %s",
			name, ErrDeletedReferenced, n, strings.Join(res.DeletedReferenced[:min(n, 10)], ", ")))
	}
	if verifyErr != nil {
		errs = append(errs, fmt.Errorf("retry deletes of %s: %w", name, verifyErr))
	}
	if loopErr != nil {
		errs = append(errs, fmt.Errorf("retry deletes of %s: %w", name, loopErr))
	}
	if len(res.failed) > 0 {
		err := deleteError(name, res.failed, len(files))
		if res.Unreachable() {
			err = fmt.Errorf("%w: %w", objstore.ErrUnreachable, err)
		}
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// retryTracker keeps the set of retried paths that the table references
// up to date with its current metadata. A commit only adds to the metadata,
// so catching up reads only the snapshots and manifests not read before.
// It never forgets a reference: a superset only keeps more files.
type retryTracker struct {
	cat   TableLoader
	ident table.Identifier
	uuid  string
	want  map[string]bool

	mu    sync.Mutex
	at    string // the metadata location refd is up to date with
	lists map[int64]string
	mans  map[string]struct{}
	refd  map[string]bool
}

func newRetryTracker(cat TableLoader, tbl *table.Table, paths []string) *retryTracker {
	t := &retryTracker{cat: cat, ident: tbl.Identifier(), uuid: tbl.Metadata().TableUUID().String(),
		want: make(map[string]bool, len(paths)), lists: map[int64]string{}, mans: map[string]struct{}{}, refd: map[string]bool{}}
	for _, p := range paths {
		t.want[key(p)] = true
	}
	return t
}

// advance adds what fresh references and was not read before.
func (t *retryTracker) advance(ctx context.Context, fresh *table.Table) error {
	meta := fresh.Metadata()
	if !tableprops.GCAllowed(meta.Properties()) {
		return ErrGCDisabled
	}
	if got := meta.TableUUID().String(); got != t.uuid {
		return fmt.Errorf("%w: the table's UUID was %s, is %s", ErrUnverifiable, t.uuid, got)
	}
	fs, err := fresh.FS(ctx)
	if err != nil {
		return fmt.Errorf("open table IO: %w", err)
	}
	learn := func(lists []table.Snapshot, mans []listEntry) {
		for _, s := range lists {
			t.lists[s.SnapshotID] = s.ManifestList
		}
		for _, m := range mans {
			t.mans[key(m.Path)] = struct{}{}
		}
	}
	refd, err := referenced(ctx, fs, meta, t.want, true, t.lists, t.mans, learn)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnverifiable, err)
	}
	for k := range refd {
		t.refd[k] = true
	}
	t.at = fresh.MetadataLocation()
	return nil
}

// catchUp re-loads the table and, while its metadata location differs from
// the one refd is up to date with, reads what is new and re-loads again.
// When nothing moved it costs one LoadTable.
func (t *retryTracker) catchUp(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	fresh, err := t.load(ctx)
	if err != nil {
		return err
	}
	return catchup.Run(ctx, fresh, func() string { return t.at }, t.load, t.advance)
}

func (t *retryTracker) load(ctx context.Context) (*table.Table, error) {
	fresh, err := t.cat.LoadTable(ctx, t.ident)
	if err != nil {
		return nil, fmt.Errorf("%w: re-load the table: %w", ErrUnverifiable, err)
	}
	return fresh, nil
}

func (t *retryTracker) referenced(path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refd[key(path)]
}

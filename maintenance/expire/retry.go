package expire

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

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
	// thousand and FailedPaths all of them.
	Failed         int             `json:"failed"`
	DeleteFailures []DeleteFailure `json:"delete_failures,omitempty"`
	failed         []string
}

// FailedPaths returns every retried file that still could not be deleted.
func (r *RetryResult) FailedPaths() []string { return r.failed }

// RetryDeletes deletes paths, the files earlier runs proved unreferenced but
// failed to delete, that tbl's metadata (loaded fresh by the caller) still
// does not reference. The reference set is rebuilt from every snapshot of
// tbl: a file expired before may have been brought back since. If that set
// cannot be read in full, or the table has gc.enabled=false, nothing is
// deleted and every path stays to retry. Paths that fail again are returned
// in FailedPaths, with an ErrDeleteFailed error.
func RetryDeletes(ctx context.Context, tbl *table.Table, paths []string, cfg Config, d Deleter, log *slog.Logger) (*RetryResult, error) {
	res := &RetryResult{Files: len(paths), failed: paths}
	if len(paths) == 0 {
		return res, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := strings.Join(tbl.Identifier(), ".")
	meta := tbl.Metadata()
	if !tableprops.GCAllowed(meta.Properties()) {
		return res, fmt.Errorf("retry deletes of %s: %w", name, ErrGCDisabled)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return res, fmt.Errorf("retry deletes of %s: open table IO: %w", name, err)
	}
	want := make(map[string]bool, len(paths))
	for _, p := range paths {
		want[key(p)] = true
	}
	refd, err := referenced(ctx, fs, meta, want, true, nil, nil)
	if err != nil {
		return res, fmt.Errorf("retry deletes of %s: %w: %v", name, ErrUnverifiable, err)
	}
	files := make([]File, 0, len(paths))
	for _, p := range paths {
		if !refd[key(p)] {
			files = append(files, File{Path: p})
		}
	}
	res.Referenced = len(paths) - len(files)
	if res.Referenced > 0 {
		log.Warn("files kept to retry deleting are referenced again; not deleted", "table", name, "files", res.Referenced)
	}
	var del Result
	del.Deleted = map[FileKind]Count{}
	res.failed = deleteFiles(ctx, d, files, cfg.DeleteConcurrency, &del, log.With("table", name, "task", "expire"))
	res.Deleted, res.Failed, res.DeleteFailures = del.FilesDeleted(), del.FilesFailed, del.DeleteFailures
	log.Info("retried failed deletes", "table", name, "files", res.Files, "deleted", res.Deleted,
		"referenced", res.Referenced, "failed", res.Failed)
	if len(res.failed) > 0 {
		return res, deleteError(name, res.failed, len(files))
	}
	return res, nil
}

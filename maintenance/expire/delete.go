package expire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/iceberg-maintainer/maintainer/internal/objstore"
)

// Deleter removes files; the orphan pass's store (batched DeleteObjects on
// S3, the table's IO elsewhere) satisfies it. Every path comes back either
// deleted (a file already gone counts as deleted) or failed.
type Deleter interface {
	Delete(ctx context.Context, paths []string) (deleted []string, failed map[string]error)
}

// ErrDeleteFailed: files the plan proved unreferenced could not be deleted.
// The commit stands; Result lists the files, and the caller keeps them to
// retry (RetryDeletes).
var ErrDeleteFailed = errors.New("files could not be deleted")

// maxListedFailures bounds Result.DeleteFailures; FilesFailed counts all.
const maxListedFailures = 1000

// deleteFiles removes files in batches of batch files (one Delete call
// each, Config.DeleteBatchSize), concurrency batches at a time. A cancelled ctx stops before the next batch; the files of the
// batches not sent count as failed, so that they are retried. It returns
// the paths that failed, all of them.
func deleteFiles(ctx context.Context, d Deleter, files []File, batch, concurrency int, res *Result, log *slog.Logger) []string {
	var mu sync.Mutex
	var failed []string
	record := func(batch []File, deleted []string, errs map[string]error) {
		ok := make(map[string]bool, len(deleted))
		for _, p := range deleted {
			ok[p] = true
		}
		mu.Lock()
		defer mu.Unlock()
		for _, f := range batch {
			err, bad := errs[f.Path]
			if !bad && ok[f.Path] {
				c := res.Deleted[f.Kind]
				c.Files++
				c.Bytes += f.Size
				res.Deleted[f.Kind] = c
				continue
			}
			if err == nil {
				err = errors.New("the store reported it neither deleted nor failed")
			}
			failed = append(failed, f.Path)
			res.FilesFailed++
			if errors.Is(err, objstore.ErrUnreachable) {
				res.unreachable++
			}
			if len(res.DeleteFailures) < maxListedFailures {
				res.DeleteFailures = append(res.DeleteFailures, DeleteFailure{Path: f.Path, Kind: f.Kind, Err: err.Error()})
			}
			if res.FilesFailed <= 10 { // a store that is down fails every file
				log.Warn("delete failed; kept for the next expiry run to retry", "path", f.Path, "err", err)
			}
		}
	}
	batches := make(chan []File)
	var wg sync.WaitGroup
	for range min(concurrency, (len(files)+batch-1)/batch) {
		wg.Go(func() {
			for chunk := range batches {
				if ctx.Err() != nil { // sent as the run was cancelled
					record(chunk, nil, notAttempted(ctx, chunk))
					continue
				}
				paths := make([]string, len(chunk))
				for i, f := range chunk {
					paths[i] = f.Path
				}
				deleted, errs := d.Delete(ctx, paths)
				record(chunk, deleted, errs)
			}
		})
	}
	sent := 0
	for chunk := range slices.Chunk(files, batch) {
		if ctx.Err() != nil {
			break
		}
		select {
		case batches <- chunk:
			sent += len(chunk)
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	if rest := files[sent:]; len(rest) > 0 {
		record(rest, nil, notAttempted(ctx, rest))
	}
	return failed
}

func notAttempted(ctx context.Context, files []File) map[string]error {
	errs := make(map[string]error, len(files))
	for _, f := range files {
		errs[f.Path] = fmt.Errorf("not attempted: %w", context.Cause(ctx))
	}
	return errs
}

// deleteError is ErrDeleteFailed with the count and the first paths.
func deleteError(name string, failed []string, total int) error {
	first := failed[:min(len(failed), 3)]
	return fmt.Errorf("expire %s: %w: %d of %d (first: %s)", name, ErrDeleteFailed, len(failed), total, strings.Join(first, ", "))
}

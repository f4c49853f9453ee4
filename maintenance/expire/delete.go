package expire

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	iceio "github.com/apache/iceberg-go/io"
)

// Batch sizes: S3 DeleteObjects takes up to 1,000 keys a call; single-file
// removes are grouped only so that workers pick up work in useful chunks.
const (
	bulkBatch   = 1000
	singleBatch = 64
	// maxListedFailures bounds Result.DeleteFailures; FilesFailed counts all.
	maxListedFailures = 1000
)

// deleteFiles removes files in parallel batches, concurrency at a time,
// through BulkRemovableIO when fs has it. Failures are recorded, not
// returned: the files are unreferenced and the orphan pass will retry them.
// A cancelled ctx stops before the next batch or file.
func deleteFiles(ctx context.Context, fs iceio.IO, files []File, concurrency int, res *Result, log *slog.Logger) {
	bulk, isBulk := fs.(iceio.BulkRemovableIO)
	size := singleBatch
	if isBulk {
		size = bulkBatch
	}
	var mu sync.Mutex
	done := func(f File) {
		c := res.Deleted[f.Kind]
		c.Files++
		c.Bytes += f.Size
		res.Deleted[f.Kind] = c
	}
	fail := func(f File, err error) {
		res.FilesFailed++
		if len(res.DeleteFailures) < maxListedFailures {
			res.DeleteFailures = append(res.DeleteFailures, DeleteFailure{Path: f.Path, Kind: f.Kind, Err: err.Error()})
		}
		if res.FilesFailed <= 10 { // a store that is down fails every file
			log.Warn("delete failed; left for the orphan pass", "path", f.Path, "err", err)
		}
	}

	batches := make(chan []File)
	var wg sync.WaitGroup
	for range min(concurrency, (len(files)+size-1)/size) {
		wg.Go(func() {
			for batch := range batches {
				if isBulk {
					deleteBulk(ctx, bulk, batch, &mu, done, fail)
					continue
				}
				for _, f := range batch {
					if ctx.Err() != nil {
						break
					}
					err := fs.Remove(f.Path)
					mu.Lock()
					switch {
					case err == nil:
						done(f)
					case missing(err):
						res.FilesMissing++
					default:
						fail(f, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for chunk := range slices.Chunk(files, size) {
		if ctx.Err() != nil {
			break
		}
		select {
		case batches <- chunk:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
}

func deleteBulk(ctx context.Context, bulk iceio.BulkRemovableIO, batch []File, mu *sync.Mutex, done func(File), fail func(File, error)) {
	if ctx.Err() != nil {
		return
	}
	paths := make([]string, len(batch))
	for i, f := range batch {
		paths[i] = f.Path
	}
	deleted, err := bulk.DeleteFiles(ctx, paths)
	ok := make(map[string]bool, len(deleted))
	for _, p := range deleted {
		ok[p] = true
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range batch {
		if err == nil || ok[f.Path] { // no error: all deleted (missing counts as deleted)
			done(f)
		} else {
			fail(f, errFor(f.Path, err))
		}
	}
}

// errFor picks the line of a joined bulk error that names path.
func errFor(path string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for _, l := range lines {
		if strings.Contains(l, path) {
			return errors.New(l)
		}
	}
	return errors.New(lines[0])
}

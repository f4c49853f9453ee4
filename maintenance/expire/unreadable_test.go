package expire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
)

// damages are the ways a manifest list or manifest goes bad; each must be
// treated the same way.
var damages = map[string]func(t *testing.T, path string){
	"missing": func(t *testing.T, path string) {
		if err := os.Remove(localPath(path)); err != nil {
			t.Fatal(err)
		}
	},
	"truncated": func(t *testing.T, path string) {
		b, err := os.ReadFile(localPath(path))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(localPath(path), b[:len(b)/2], 0o644); err != nil {
			t.Fatal(err)
		}
	},
	// The same length, but the last block's sync marker is wrong.
	"corrupt": func(t *testing.T, path string) {
		b, err := os.ReadFile(localPath(path))
		if err != nil {
			t.Fatal(err)
		}
		for i := len(b) - 16; i < len(b); i++ {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(localPath(path), b, 0o644); err != nil {
			t.Fatal(err)
		}
	},
}

// A snapshot that stays (here the current one) whose manifest list, or a
// manifest, cannot be read fails the plan naming the file: nothing can be
// committed or deleted. The shared manifest case has nothing to delete but
// manifest lists, so the retained manifests are read for no other reason
// than to prove them readable.
func TestUnreadableRetainedSnapshotFailsThePlan(t *testing.T) {
	for _, what := range []string{"current manifest list", "manifest shared by every snapshot"} {
		for how, damage := range damages {
			t.Run(what+"/"+how, func(t *testing.T) {
				ctx := context.Background()
				f := newTable(t, 5, 30, 2, nil)
				cur := f.tbl.CurrentSnapshot()
				victim := cur.ManifestList
				if what != "current manifest list" {
					fs, err := f.tbl.FS(ctx)
					if err != nil {
						t.Fatal(err)
					}
					first := f.tbl.Metadata().Snapshots()[0]
					mans, err := readList(fs, first)
					if err != nil || len(mans) != 1 {
						t.Fatalf("first snapshot's manifests %v: %v", mans, err)
					}
					victim = mans[0].Path
				}
				damage(t, victim)
				files := filesOnDisk(t, f.dir+"/wh")
				plan, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
				if !errors.Is(err, ErrUnreadableRetained) || !strings.Contains(err.Error(), victim) {
					t.Fatalf("plan %+v, err %v; want ErrUnreadableRetained naming %s", plan, err, victim)
				}
				var se *manifestscan.Error
				if !errors.As(err, &se) {
					t.Fatalf("%v does not say what is wrong with the file", err)
				}
				if slices.Compare(files, filesOnDisk(t, f.dir+"/wh")) != 0 {
					t.Fatal("planning changed files")
				}
			})
		}
	}
}

// An expiring snapshot whose manifest list or manifest is missing,
// truncated or corrupt: the snapshots still expire, but no file at all is
// deleted, and FilesBlocked names the file.
func TestUnreadableExpiringSnapshotBlocksEveryDelete(t *testing.T) {
	for _, kind := range []FileKind{KindManifestList, KindManifest} {
		for how, damage := range damages {
			t.Run(string(kind)+"/"+how, func(t *testing.T) {
				ctx := context.Background()
				f, _, before, plan := history(t)
				i := slices.IndexFunc(plan.Files, func(fl File) bool { return fl.Kind == kind })
				if i < 0 {
					t.Fatalf("no %s planned", kind)
				}
				victim := plan.Files[i].Path
				damage(t, victim)
				plan, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				if len(plan.Expired) != 5 || len(plan.Files) != 0 || !strings.HasPrefix(plan.FilesBlocked, BlockedUnreadable) ||
					!strings.Contains(plan.FilesBlocked, victim) || len(plan.Unreadable) != 1 || plan.Unreadable[0].Path != victim {
					t.Fatalf("plan: %d expired, %d files, blocked %q, unreadable %+v", len(plan.Expired), len(plan.Files), plan.FilesBlocked, plan.Unreadable)
				}
				files := filesOnDisk(t, f.dir+"/wh")
				d := &localDeleter{}
				res, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), Options{Deleter: d})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Committed || res.SnapshotsExpired() != 5 || res.FilesDeleted() != 0 || res.FilesBlocked != plan.FilesBlocked || d.calls.Load() != 0 {
					t.Fatalf("result %+v, %d Delete calls", res, d.calls.Load())
				}
				for _, p := range files {
					if !exists(t, p) && p != localPath(victim) {
						t.Fatalf("%s deleted", p)
					}
				}
				checkKept(t, before, f.reload(t), true)
			})
		}
	}
}

// Retried files are deleted only when the table's current metadata does not
// reference them; one referenced again is kept and not retried again, one
// already gone counts as deleted, and one that fails again is returned.
func TestRetryDeletesOnlyWhatIsStillUnreferenced(t *testing.T) {
	ctx := context.Background()
	f, _, _, plan := history(t)
	var gone, stuck File
	for _, fl := range plan.Files {
		if fl.Kind == KindData {
			gone, stuck = stuck, fl
		}
	}
	if gone.Path == "" {
		t.Fatal("fewer than two data files planned")
	}
	// The first run deletes nothing: every delete fails.
	res, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{fail: "/"}})
	if !errors.Is(err, ErrDeleteFailed) || len(res.FailedPaths()) != len(plan.Files) {
		t.Fatalf("err %v, %d failed of %d", err, len(res.FailedPaths()), len(plan.Files))
	}
	fresh := f.reload(t)
	live := fresh.CurrentSnapshot().ManifestList
	if err := os.Remove(localPath(gone.Path)); err != nil { // the orphan pass got it
		t.Fatal(err)
	}
	paths := append(res.FailedPaths(), live)

	retry, err := RetryDeletes(ctx, f.cat, fresh, paths, strictConfig(), RetryOptions{Deleter: &localDeleter{fail: stuck.Path}})
	if !errors.Is(err, ErrDeleteFailed) || !strings.Contains(err.Error(), stuck.Path) {
		t.Fatalf("err %v, want ErrDeleteFailed naming %s", err, stuck.Path)
	}
	if retry.Files != len(paths) || retry.Referenced != 1 || retry.Failed != 1 || retry.Deleted != len(paths)-2 ||
		!slices.Equal(retry.FailedPaths(), []string{stuck.Path}) {
		t.Fatalf("retry %+v", retry)
	}
	if !exists(t, live) || !exists(t, stuck.Path) {
		t.Fatal("a referenced or failing file is gone")
	}
	for _, p := range res.FailedPaths() {
		if p != stuck.Path && exists(t, p) {
			t.Fatalf("%s not deleted by the retry", p)
		}
	}
	rows, _, err := gen.Checksum(ctx, f.reload(t))
	if err != nil || rows == 0 {
		t.Fatalf("current snapshot reads %d rows: %v", rows, err)
	}
}

// A retry whose reference set cannot be read in full deletes nothing.
func TestRetryDeletesNothingWhenTheMetadataCannotBeRead(t *testing.T) {
	ctx := context.Background()
	f, _, _, plan := history(t)
	res, _ := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{fail: "/"}})
	fresh := f.reload(t)
	damages["truncated"](t, fresh.CurrentSnapshot().ManifestList)
	d := &localDeleter{}
	retry, err := RetryDeletes(ctx, f.cat, fresh, res.FailedPaths(), strictConfig(), RetryOptions{Deleter: d})
	if !errors.Is(err, ErrUnverifiable) || !strings.Contains(err.Error(), fresh.CurrentSnapshot().ManifestList) || d.calls.Load() != 0 ||
		len(retry.FailedPaths()) != len(res.FailedPaths()) {
		t.Fatalf("err %v, %d Delete calls, %d kept to retry", err, d.calls.Load(), len(retry.FailedPaths()))
	}
}

// cancelAfterFirst deletes what it is given and cancels the run after its
// first call.
type cancelAfterFirst struct {
	cancel context.CancelFunc
	calls  int
}

func (d *cancelAfterFirst) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	d.calls++
	d.cancel()
	return paths, nil
}

// A run cancelled part way through its deletes returns the files of the
// batches it did not send as failed, so that they are kept to retry.
func TestCancelledDeletesAreKeptToRetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	files := make([]File, 2500)
	for i := range files {
		files[i] = File{Path: fmt.Sprintf("s3://b/t/data/%04d.parquet", i), Kind: KindData, Size: 1}
	}
	d := &cancelAfterFirst{cancel: cancel}
	res := &Result{Deleted: map[FileKind]Count{}}
	deleteBatch := DefaultConfig().DeleteBatchSize
	failed := deleteFiles(ctx, d, files, deleteBatch, 1, res, slog.New(slog.DiscardHandler))
	if d.calls != 1 || res.FilesDeleted() != deleteBatch || len(failed) != len(files)-deleteBatch || res.FilesFailed != len(failed) ||
		failed[0] != files[deleteBatch].Path || !strings.Contains(res.DeleteFailures[0].Err, "not attempted") {
		t.Fatalf("%d calls, %d deleted, %d failed (first %v)", d.calls, res.FilesDeleted(), len(failed), res.DeleteFailures[:1])
	}
}

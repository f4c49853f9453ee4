package expire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/iceberg-maintainer/maintainer/internal/objstore"
)

// failedRun runs history's plan with every delete failing and returns the
// fixture, the paths kept to retry and a data file among them.
func failedRun(t *testing.T) (*fixture, []string, iceberg.DataFile) {
	t.Helper()
	f, ids, _, plan := history(t)
	readd := firstDataFile(t, f, ids[0])
	res, err := Execute(context.Background(), f.cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{fail: "/"}})
	if !errors.Is(err, ErrDeleteFailed) || !slices.Contains(res.FailedPaths(), readd.FilePath()) {
		t.Fatalf("err %v, %d failed; want %s among them", err, len(res.FailedPaths()), readd.FilePath())
	}
	return f, res.FailedPaths(), readd
}

// A writer re-adds a retried file (AddDataFiles of an existing file) after
// the retry read the table's references and before it deletes: the catch-up
// before the batch sees it, so it is kept and the rest are deleted.
func TestRetriedFileReAddedBeforeTheDeleteIsKept(t *testing.T) {
	ctx := context.Background()
	f, paths, df := failedRun(t)
	readd := df.FilePath()
	fresh := f.reload(t) // after the expiry commit: df's snapshot is gone
	other := f.handle(t)
	var once sync.Once
	opts := RetryOptions{Deleter: &localDeleter{}, beforeDelete: func() {
		once.Do(func() {
			if err := addFile(ctx, other, f, df); err != nil {
				t.Error(err)
			}
		})
	}}
	retry, err := RetryDeletes(ctx, f.cat, fresh, paths, strictConfig(), opts)
	if err != nil || retry.Referenced != 1 || retry.Deleted != len(paths)-1 || len(retry.FailedPaths()) != 0 {
		t.Fatalf("retry %+v: %v", retry, err)
	}
	if !exists(t, readd) {
		t.Fatalf("re-added %s was deleted", readd)
	}
	for _, p := range paths {
		if p != readd && exists(t, p) {
			t.Fatalf("%s not deleted", p)
		}
	}
}

// commitThenDelete re-adds df through cat inside its first Delete call,
// after the catch-up before the batch, then deletes: the case no check
// before the delete can see.
type commitThenDelete struct {
	localDeleter
	once   sync.Once
	commit func() error
	err    error
}

func (d *commitThenDelete) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	d.once.Do(func() { d.err = d.commit() })
	return d.localDeleter.Delete(ctx, paths)
}

// A retried file a writer commits while its delete is in flight is found by
// the check after the deletes: the retry fails loudly naming it.
func TestRetriedFileCommittedWhileDeletedFailsLoudly(t *testing.T) {
	ctx := context.Background()
	f, paths, df := failedRun(t)
	other := f.handle(t)
	d := &commitThenDelete{commit: func() error { return addFile(ctx, other, f, df) }}
	retry, err := RetryDeletes(ctx, f.cat, f.reload(t), paths, strictConfig(), RetryOptions{Deleter: d})
	if d.err != nil {
		t.Fatal(d.err)
	}
	if !errors.Is(err, ErrDeletedReferenced) || !strings.Contains(err.Error(), df.FilePath()) ||
		!slices.Equal(retry.DeletedReferenced, []string{df.FilePath()}) {
		t.Fatalf("retry %+v: err %v; want ErrDeletedReferenced naming %s", retry, err, df.FilePath())
	}
}

// An invalid config (a DeleteConcurrency of 0 would start no deleter and
// wait for ever) is refused before anything is deleted.
func TestRetryDeletesValidatesItsConfig(t *testing.T) {
	f, paths, _ := failedRun(t)
	cfg := strictConfig()
	cfg.DeleteConcurrency = 0
	d := &localDeleter{}
	retry, err := RetryDeletes(context.Background(), f.cat, f.reload(t), paths, cfg, RetryOptions{Deleter: d})
	if err == nil || !strings.Contains(err.Error(), "delete_concurrency") || d.calls.Load() != 0 || len(retry.FailedPaths()) != len(paths) {
		t.Fatalf("retry %+v, %d Delete calls: %v", retry, d.calls.Load(), err)
	}
}

// unreachableDeleter fails every path as a store that cannot be reached.
type unreachableDeleter struct{}

func (unreachableDeleter) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	failed := make(map[string]error, len(paths))
	for _, p := range paths {
		failed[p] = fmt.Errorf("%w: dial tcp: connection refused", objstore.ErrUnreachable)
	}
	return nil, failed
}

// A retry whose every delete failed on an unreachable store says so
// (objstore.ErrUnreachable, Unreachable), so that the task stops early and
// does not count the run against the paths; one path failing otherwise
// does not make it unreachable.
func TestRetryDeletesReportsAnUnreachableStore(t *testing.T) {
	f, paths, _ := failedRun(t)
	retry, err := RetryDeletes(context.Background(), f.cat, f.reload(t), paths, strictConfig(), RetryOptions{Deleter: unreachableDeleter{}})
	if !errors.Is(err, objstore.ErrUnreachable) || !errors.Is(err, ErrDeleteFailed) || !retry.Unreachable() || len(retry.FailedPaths()) != len(paths) {
		t.Fatalf("retry %+v: %v", retry, err)
	}
	retry, err = RetryDeletes(context.Background(), f.cat, f.reload(t), paths, strictConfig(), RetryOptions{Deleter: &localDeleter{fail: paths[0]}})
	if errors.Is(err, objstore.ErrUnreachable) || retry.Unreachable() || !slices.Equal(retry.FailedPaths(), paths[:1]) {
		t.Fatalf("retry %+v: %v", retry, err)
	}
}

// gc.enabled turned off after the retry read the references and before its
// first batch: the catch-up before the batch sees it, nothing is deleted,
// and every path stays to retry without a run counted against it (none
// was sent).
func TestRetryStopsWhenGCIsDisabledBeforeABatch(t *testing.T) {
	ctx := context.Background()
	f, paths, _ := failedRun(t)
	other := f.handle(t)
	var once sync.Once
	opts := RetryOptions{Deleter: &localDeleter{}, beforeDelete: func() {
		once.Do(func() {
			tbl, err := other.LoadTable(ctx, f.opt.Identifier())
			if err == nil {
				txn := tbl.NewTransaction()
				if err = txn.SetProperties(iceberg.Properties{"gc.enabled": "false"}); err == nil {
					_, err = txn.Commit(ctx)
				}
			}
			if err != nil {
				t.Error(err)
			}
		})
	}}
	retry, err := RetryDeletes(ctx, f.cat, f.reload(t), paths, strictConfig(), opts)
	if err == nil || !strings.Contains(err.Error(), "gc.enabled") {
		t.Fatalf("retry after gc.enabled=false: %v; want an error naming gc.enabled", err)
	}
	if retry.Deleted != 0 || len(retry.FailedPaths()) != len(paths) {
		t.Fatalf("retry %+v; want nothing deleted and all %d paths kept", retry, len(paths))
	}
	for _, p := range paths {
		if !exists(t, p) {
			t.Fatalf("%s deleted with gc.enabled=false", p)
		}
		if retry.Attempted(p) {
			t.Fatalf("%s counted as attempted; no batch was sent", p)
		}
	}
}

package orphans

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// slowWriterFile copies a live data file of lt into a new file of the same
// partition folder, made older than min_age: a writer's file that a plan
// lists as an orphan until the writer commits it.
func slowWriterFile(t *testing.T, lt *localTable, name string) string {
	t.Helper()
	src := firstDataFile(t, lt)
	p := filepath.Join(filepath.Dir(src), name)
	copyFile(t, src, p)
	age(t, p, lt.now, old)
	return p
}

// commitFile commits path (a Parquet file of lt's schema) through the
// catalog, as a writer's Transaction.AddFiles does.
func commitFile(ctx context.Context, lt *localTable, path string) error {
	tbl, err := lt.cat.LoadTable(ctx, lt.tbl.Identifier())
	if err != nil {
		return err
	}
	tx := tbl.NewTransaction()
	if err := tx.AddFiles(ctx, []string{gen.FileURI(path)}, nil, false); err != nil {
		return fmt.Errorf("add %s: %w", path, err)
	}
	_, err = tx.Commit(ctx)
	return err
}

func batchOf(t *testing.T, plan *Plan, path string, size int) int {
	t.Helper()
	i := slices.Index(candidatePaths(plan), path)
	if i < 0 {
		t.Fatalf("%s is not a candidate", path)
	}
	return i / size
}

// TestCommitBetweenRecheckAndDeleteIsKept: the writer commits a planned
// candidate after the re-check, just before the batch holding it is
// deleted. The catch-up before the batch sees the commit.
func TestCommitBetweenRecheckAndDeleteIsKept(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 6, 2)
	slow := slowWriterFile(t, lt, "00000-9-slow-writer.parquet")
	other := plant(t, filepath.Join(lt.dir, "data", "real-orphan.parquet"), lt.now, old)
	cfg := DefaultConfig()
	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Candidates) != 2 {
		t.Fatalf("candidates %v", candidatePaths(plan))
	}
	opts := Options{beforeDelete: func(int) {
		if err := commitFile(ctx, lt, slow); err != nil {
			t.Error(err)
		}
	}}
	res, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), plan, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.NowReferenced, []string{slow}) || res.FilesDeleted != 1 || len(res.DeletedReferenced) != 0 {
		t.Fatalf("result %+v", res)
	}
	if !exists(slow) || exists(other) {
		t.Fatalf("committed file exists=%v, real orphan exists=%v", exists(slow), exists(other))
	}
	if rows, _ := checksum(t, lt.reload(t)); rows != lt.rows+50 {
		t.Fatalf("table reads %d rows, want %d", rows, lt.rows+50)
	}
	lt.assertLiveIntactPlus(t, 50)
}

// TestCommitBetweenBatchesIsKept: in a run of many batches, the writer
// commits a candidate of a later batch after earlier batches were deleted.
func TestCommitBetweenBatchesIsKept(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 4, 2)
	var junk []string
	for i := range 30 {
		junk = append(junk, plant(t, filepath.Join(lt.dir, "data", "a-junk", fmt.Sprintf("%04d.parquet", i)), lt.now, old))
	}
	slow := slowWriterFile(t, lt, "zz-slow-writer.parquet")
	cfg := DefaultConfig()
	cfg.DeleteConcurrency = 1
	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	const size = 4
	at := batchOf(t, plan, slow, size)
	if at < 2 {
		t.Fatalf("the committed file is in batch %d; the test wants it after two batches", at)
	}
	commitAt := at - 1 // between two batches, after the re-check of both
	opts := Options{BatchSize: size, beforeDelete: func(i int) {
		if i == commitAt {
			if err := commitFile(ctx, lt, slow); err != nil {
				t.Error(err)
			}
		}
	}}
	res, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), plan, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.NowReferenced, []string{slow}) || res.FilesDeleted != len(junk) {
		t.Fatalf("result %+v", res)
	}
	for _, p := range junk {
		if exists(p) {
			t.Errorf("orphan kept: %s", p)
		}
	}
	if !exists(slow) {
		t.Fatal("the file committed between batches was deleted")
	}
	lt.assertLiveIntactPlus(t, 50)
}

// committingStore makes the writer's commit land in the last moment: after
// the catch-up before the batch and before the delete itself.
type committingStore struct {
	Store
	commit func()
	once   sync.Once
}

func (s *committingStore) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	s.once.Do(s.commit)
	return s.Store.Delete(ctx, paths)
}

// TestDeletedFileCommittedMeanwhileFailsTheRun: a commit that lands after
// the last re-load and before the delete cannot be kept; the check after
// the deletes finds it and fails the run naming the file.
func TestDeletedFileCommittedMeanwhileFailsTheRun(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 4, 1)
	slow := slowWriterFile(t, lt, "00000-9-slow-writer.parquet")
	other := plant(t, filepath.Join(lt.dir, "data", "real-orphan.parquet"), lt.now, old)
	cfg := DefaultConfig()
	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := &committingStore{Store: lt.store(t), commit: func() {
		if err := commitFile(ctx, lt, slow); err != nil {
			t.Error(err)
		}
	}}
	res, err := Execute(ctx, lt.cat, lt.tbl, store, plan, cfg, Options{})
	if !errors.Is(err, ErrDeletedReferenced) {
		t.Fatalf("err %v; want ErrDeletedReferenced", err)
	}
	if !slices.Equal(res.DeletedReferenced, []string{slow}) || res.FilesDeleted != 2 {
		t.Fatalf("result %+v", res)
	}
	if msg := err.Error(); !strings.Contains(msg, slow) || strings.Contains(msg, other) {
		t.Fatalf("error %q does not name exactly the lost file", msg)
	}
}

// TestConcurrentWriterLosesNothingSilently: a writer commits old files of
// the table location, one commit each, while orphan removal deletes them
// in small batches. A file whose commit landed before the run ended is
// either kept or named in DeletedReferenced with the run failed; never
// silently lost. (A commit in flight while its file is deleted cannot be
// kept: that is what min_age is for.)
func TestConcurrentWriterLosesNothingSilently(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 3, 1)
	src := firstDataFile(t, lt)
	cfg := DefaultConfig()
	cfg.DeleteConcurrency = 2
	committedRows := int64(0)
	for round := range 20 {
		var files []string
		for i := range 4 {
			p := filepath.Join(filepath.Dir(src), fmt.Sprintf("r%02d-%d-writer.parquet", round, i))
			copyFile(t, src, p)
			age(t, p, lt.now, old)
			files = append(files, p)
		}
		for i := range 4 {
			plant(t, filepath.Join(lt.dir, "data", "junk", fmt.Sprintf("r%02d-%d.bin", round, i)), lt.now, old)
		}
		tbl := lt.reload(t)
		plan, err := PlanTable(ctx, tbl, lt.store(t), cfg, lt.now, nil)
		if err != nil {
			t.Fatal(err)
		}

		var executed atomic.Bool
		var mu sync.Mutex
		early := map[string]bool{} // committed before Execute returned
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range files {
				if err := commitFile(ctx, lt, p); err != nil {
					continue // deleted before the writer read it
				}
				mu.Lock()
				early[p] = !executed.Load()
				mu.Unlock()
			}
		}()
		res, err := Execute(ctx, lt.cat, tbl, lt.store(t), plan, cfg, Options{BatchSize: 1})
		executed.Store(true)
		wg.Wait()
		if err != nil && !errors.Is(err, ErrDeletedReferenced) {
			t.Fatalf("round %d: %v", round, err)
		}
		if (err != nil) != (len(res.DeletedReferenced) > 0) {
			t.Fatalf("round %d: err %v with deleted_referenced %v", round, err, res.DeletedReferenced)
		}
		for p, before := range early {
			switch {
			case exists(p):
			case slices.Contains(res.DeletedReferenced, p):
				t.Logf("round %d: %s deleted while its commit was in flight; reported", round, p)
				copyFile(t, src, p)
			case before:
				t.Fatalf("round %d: %s committed before the run ended, deleted and not reported (result %+v)", round, p, res)
			default:
				t.Logf("round %d: %s committed after the run ended, while it was deleted", round, p)
				copyFile(t, src, p)
			}
			committedRows += 50
		}
		// Every file the current snapshot references exists (the lost ones
		// restored above): nothing else was deleted.
		cur := lt.reload(t)
		tasks, err := cur.Scan().PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if p := localPath(t, task.File.FilePath()); !exists(p) {
				t.Fatalf("round %d: referenced file %s is missing", round, p)
			}
		}
		if rows, _ := checksum(t, cur); rows != lt.rows+committedRows {
			t.Fatalf("round %d: table reads %d rows, want %d", round, rows, lt.rows+committedRows)
		}
	}
	for f := range lt.files {
		if !exists(f) {
			t.Errorf("live file deleted: %s", f)
		}
	}
}

// assertLiveIntactPlus checks that every file the table had is still there
// and that it reads its rows plus added.
func (lt *localTable) assertLiveIntactPlus(t *testing.T, added int64) {
	t.Helper()
	for f := range lt.files {
		if !exists(f) {
			t.Errorf("live file deleted: %s", f)
		}
	}
	if rows, _ := checksum(t, lt.reload(t)); rows != lt.rows+added {
		t.Fatalf("table reads %d rows, had %d plus %d added", rows, lt.rows, added)
	}
}

package maintenance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/s3test"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

// The store fails part way through expiry's deletes on S3: the run fails,
// the commit stands, and the failed paths are kept in the trigger state.
// The next run, with the store healthy, deletes them first (batched, one
// DeleteObjects per 1,000 keys, never HeadObject or DeleteObject) and
// succeeds; a kept path that the table references again is not deleted.
func TestExpireFailedDeletesFailTheRunAndAreRetried(t *testing.T) {
	ctx := context.Background()
	const bucket = "warehouse"
	srv := s3test.Start(t, bucket)
	cat := srv.SQLCatalog(t, bucket)
	tbl, err := gen.Create(ctx, cat, gen.Options{Appends: 3, RowsPerAppend: 50, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	rows, sum, err := gen.Checksum(ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}
	head := tbl.CurrentSnapshot().SnapshotID
	copies := addCopies(t, srv, tbl, 1100) // a snapshot of 1,100 data files, then rolled back
	tbl, err = cat.LoadTable(ctx, tbl.Identifier())
	if err != nil || tbl.CurrentSnapshot().SnapshotID != head {
		t.Fatalf("rollback: %v", err)
	}

	ex := expire.DefaultConfig()
	ex.RetainLast, ex.MaxSnapshotAge = 1, time.Millisecond
	off := orphans.DefaultConfig()
	off.Enabled = false
	cmp := compact.DefaultConfig()
	cmp.Enabled = false
	pol := Policy{Compact: cmp, Expire: ex, Orphans: off}
	state := trigger.NewMemStore()
	later := time.Now().Add(time.Hour)
	r := NewRunner(Deps{
		Catalog: cat, CatalogProps: srv.Props(),
		Policy:   func(string, iceberg.Properties) (Policy, error) { return pol, nil },
		Selected: func(string) bool { return true },
		State:    state, Metrics: NewMetrics(prometheus.NewRegistry(), metrics.NewTables(true, 10)),
		Now: func() time.Time { return later },
	})
	name := strings.Join(tbl.Identifier(), ".")

	// Run 1: the second DeleteObjects request fails.
	var mu sync.Mutex
	perKey := map[string]bool{} // keys of the table sent HeadObject or DeleteObject
	observe := func(op string, r *http.Request) {
		if op == "HeadObject" || op == "DeleteObject" {
			mu.Lock()
			perKey[r.URL.Path] = true
			mu.Unlock()
		}
	}
	var deletes atomic.Int32
	srv.FailWhen(func(op string, r *http.Request) bool {
		observe(op, r)
		return op == "DeleteObjects" && deletes.Add(1) == 2
	})
	o := one(t, r.RunTable(ctx, tbl.Identifier(), Request{Tasks: []string{TaskExpire}}), TaskExpire)
	if o.Status != StatusFailed || !errors.Is(o.Err(), expire.ErrDeleteFailed) || o.Expire == nil || o.Expire.Result == nil {
		t.Fatalf("run 1: %+v", o)
	}
	res := o.Expire.Result
	planned := o.Expire.FilesPlanned
	if !res.Committed || res.FilesFailed == 0 || res.FilesFailed == planned || res.FilesDeleted()+res.FilesFailed != planned ||
		!strings.Contains(o.Reason, fmt.Sprintf("%d deletes failed", res.FilesFailed)) || !strings.Contains(o.Reason, res.DeleteFailures[0].Path) {
		t.Fatalf("run 1: planned %d, result %+v, reason %q", planned, res, o.Reason)
	}
	if n := srv.Count("DeleteObjects"); n != 2 {
		t.Fatalf("run 1: %d DeleteObjects for %d files, want 2", n, planned)
	}
	st, err := state.Load(ctx, name, TaskExpire)
	if err != nil {
		t.Fatal(err)
	}
	if st.Retry == nil || len(st.Retry.Paths) != res.FilesFailed || st.LastResult != ResultFailure {
		t.Fatalf("run 1 state: %+v", st)
	}
	keys := srv.Keys(t, bucket)
	for _, p := range st.Retry.Paths {
		if !keys[strings.TrimPrefix(p, "s3://"+bucket+"/")] {
			t.Fatalf("%s is kept to retry but gone", p)
		}
	}

	// A path kept to retry that the table references again stays.
	tbl, err = cat.LoadTable(ctx, tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	live := tbl.CurrentSnapshot().ManifestList
	failed := st.Retry.Paths
	st.Retry = trigger.NewRetry(st.Retry.TableUUID, failed, []string{live})
	if err := state.Save(ctx, name, TaskExpire, st); err != nil {
		t.Fatal(err)
	}

	// Run 2: the store is healthy; the retry deletes the rest first.
	srv.ResetCounts()
	srv.FailWhen(func(op string, r *http.Request) bool { observe(op, r); return false })
	o = one(t, r.RunTable(ctx, tbl.Identifier(), Request{Tasks: []string{TaskExpire}}), TaskExpire)
	if o.Status != StatusSucceeded || o.Expire.Retry == nil {
		t.Fatalf("run 2: %+v (%v)", o, o.Err())
	}
	if rt := o.Expire.Retry; rt.Files != len(failed)+1 || rt.Deleted != len(failed) || rt.Referenced != 1 || rt.Failed != 0 {
		t.Fatalf("run 2 retry %+v", rt)
	}
	if n := srv.Count("DeleteObjects"); n != 1 {
		t.Fatalf("run 2: %d DeleteObjects for %d files, want 1", n, len(failed))
	}
	st, err = state.Load(ctx, name, TaskExpire)
	if err != nil || st.Retry != nil || st.LastResult != ResultSuccess {
		t.Fatalf("run 2 state %+v (%v)", st, err)
	}
	keys = srv.Keys(t, bucket)
	for _, p := range copies {
		if keys[strings.TrimPrefix(p, "s3://"+bucket+"/")] {
			t.Fatalf("%s left behind", p)
		}
	}
	if !keys[strings.TrimPrefix(live, "s3://"+bucket+"/")] {
		t.Fatalf("the live manifest list %s was deleted", live)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range append(copies, failed...) {
		if k := "/" + strings.TrimPrefix(p, "s3://"); perKey[k] {
			t.Fatalf("%s was sent a HeadObject or DeleteObject", p)
		}
	}
	tbl, err = cat.LoadTable(ctx, tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	if r2, s2, err := gen.Checksum(ctx, tbl); err != nil || r2 != rows || s2 != sum {
		t.Fatalf("table reads %d rows (%x, %v), had %d (%x)", r2, s2, err, rows, sum)
	}
}

// addCopies commits n copies of a live data file in one snapshot, then
// rolls main back to the snapshot before it: the copies become files only
// an expiring snapshot references.
func addCopies(t *testing.T, srv *s3test.Server, tbl *table.Table, n int) []string {
	t.Helper()
	ctx := context.Background()
	client, err := objstore.NewS3Client(ctx, nil, srv.Props())
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src := tasks[0].File
	bucket, key, _ := strings.Cut(strings.TrimPrefix(src.FilePath(), "s3://"), "/")
	obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var files []iceberg.DataFile
	for i := range n {
		k := fmt.Sprintf("%s-copy-%04d.parquet", strings.TrimSuffix(key, ".parquet"), i)
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		p := "s3://" + bucket + "/" + k
		b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, p, src.FileFormat(), nil, nil, nil, src.Count(), src.FileSizeBytes())
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		files = append(files, b.Build())
	}
	head := tbl.CurrentSnapshot().SnapshotID
	tx := tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, files, nil); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx = tbl.NewTransaction()
	if err := tx.RollbackToSnapshot(head); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return paths
}

// With the current snapshot's manifest list missing, expiry fails naming it
// and commits nothing: the older snapshots may be the only readable ones.
func TestExpireRefusesWhenTheCurrentSnapshotCannotBeRead(t *testing.T) {
	e := newEnv(t, 4)
	e.policy.Compact.Enabled = false
	e.policy.Expire.Enabled = true
	e.policy.Expire.RetainLast, e.policy.Expire.MaxSnapshotAge = 1, time.Millisecond
	list := e.tbl.CurrentSnapshot().ManifestList
	if err := os.Remove(strings.TrimPrefix(strings.TrimPrefix(list, "file://"), "file:")); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	r := e.runner(t, nil, func() time.Time { return later })
	o := one(t, r.RunTable(t.Context(), e.tbl.Identifier(), Request{Tasks: []string{TaskExpire}}), TaskExpire)
	if o.Status != StatusFailed || !errors.Is(o.Err(), expire.ErrUnreadableRetained) || !strings.Contains(o.Error, list) {
		t.Fatalf("%+v", o)
	}
	after, err := e.cat.LoadTable(t.Context(), e.tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	if after.MetadataLocation() != e.tbl.MetadataLocation() || len(after.Metadata().Snapshots()) != 4 {
		t.Fatalf("committed: %s, %d snapshots", after.MetadataLocation(), len(after.Metadata().Snapshots()))
	}
}

// Files kept to retry by a table dropped and re-created under the same name
// are not this table's: they are not deleted, and the list is cleared.
func TestExpireRetryListOfAnotherTableIsDropped(t *testing.T) {
	e := newEnv(t, 3)
	e.policy.Compact.Enabled = false
	e.policy.Expire.Enabled = true
	planted := strings.TrimPrefix(strings.TrimPrefix(e.tbl.Location(), "file://"), "file:") + "/data/left-by-the-old-table.parquet"
	if err := os.WriteFile(planted, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := strings.Join(e.tbl.Identifier(), ".")
	if err := e.state.Save(t.Context(), name, TaskExpire, trigger.State{Retry: trigger.NewRetry("another-uuid", []string{planted})}); err != nil {
		t.Fatal(err)
	}
	r := e.runner(t, nil, time.Now)
	o := one(t, r.RunTable(t.Context(), e.tbl.Identifier(), Request{Tasks: []string{TaskExpire}}), TaskExpire)
	if o.Err() != nil || o.Expire.Retry != nil {
		t.Fatalf("%+v", o)
	}
	if _, err := os.Stat(planted); err != nil {
		t.Fatalf("another table's file was deleted: %v", err)
	}
	st, err := e.state.Load(t.Context(), name, TaskExpire)
	if err != nil || st.Retry != nil {
		t.Fatalf("state %+v (%v)", st, err)
	}
}

// A kept path that can never be deleted (here a non-empty directory, as a
// key under an object lock would be) fails each run, but does not stop the
// table's expiry: the first run still expires its snapshots. After
// trigger.MaxRetryRuns runs the path is dropped from the list, left for the
// orphan pass, and the next run succeeds.
func TestExpireUndeletableRetriedPathDoesNotStopExpiry(t *testing.T) {
	e := newEnv(t, 3)
	e.policy.Compact.Enabled = false
	e.policy.Expire.Enabled = true
	e.policy.Expire.RetainLast, e.policy.Expire.MaxSnapshotAge = 1, time.Millisecond
	locked := strings.TrimPrefix(strings.TrimPrefix(e.tbl.Location(), "file://"), "file:") + "/data/locked.parquet"
	if err := os.MkdirAll(locked+"/held", 0o755); err != nil {
		t.Fatal(err)
	}
	name := strings.Join(e.tbl.Identifier(), ".")
	uuid := e.tbl.Metadata().TableUUID().String()
	if err := e.state.Save(t.Context(), name, TaskExpire, trigger.State{Retry: trigger.NewRetry(uuid, []string{locked})}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	r := e.runner(t, nil, func() time.Time { return later })
	for run := 1; run <= trigger.MaxRetryRuns; run++ {
		o := one(t, r.RunTable(t.Context(), e.tbl.Identifier(), Request{Tasks: []string{TaskExpire}}), TaskExpire)
		if o.Status != StatusFailed || !errors.Is(o.Err(), expire.ErrDeleteFailed) || !strings.Contains(o.Reason, locked) ||
			o.Expire.Retry == nil || o.Expire.Retry.Failed != 1 {
			t.Fatalf("run %d: %+v (%v)", run, o, o.Err())
		}
		if run == 1 && o.Expire.SnapshotsExpired != 2 {
			t.Fatalf("run 1 expired %d snapshots, want 2: %s", o.Expire.SnapshotsExpired, o.Reason)
		}
		st, err := e.state.Load(t.Context(), name, TaskExpire)
		if err != nil {
			t.Fatal(err)
		}
		if run < trigger.MaxRetryRuns {
			if st.Retry == nil || !slices.Equal(st.Retry.Paths, []string{locked}) || st.Retry.Runs[locked] != run || o.Expire.RetryDropped != 0 {
				t.Fatalf("run %d: state %+v, dropped %d", run, st.Retry, o.Expire.RetryDropped)
			}
		} else if st.Retry != nil || o.Expire.RetryDropped != 1 || !strings.Contains(o.Reason, "left for the orphan pass") {
			t.Fatalf("run %d: state %+v, dropped %d, reason %q", run, st.Retry, o.Expire.RetryDropped, o.Reason)
		}
	}
	o := one(t, r.RunTable(t.Context(), e.tbl.Identifier(), Request{Tasks: []string{TaskExpire}}), TaskExpire)
	if o.Err() != nil || o.Expire.Retry != nil {
		t.Fatalf("after the path was dropped: %+v (%v)", o, o.Err())
	}
	if _, err := os.Stat(locked + "/held"); err != nil {
		t.Fatal(err)
	}
	if n := counter(t, r.metrics.retryDropped.WithLabelValues(name)); n != 1 {
		t.Fatalf("expire_retry_dropped_files_total %v, want 1", n)
	}
}

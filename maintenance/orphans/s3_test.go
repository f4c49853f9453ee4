package orphans

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/s3"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/s3test"
)

const bucket = "warehouse"

type s3Table struct {
	srv    *s3test.Server
	cat    *sqlcat.Catalog
	tbl    *table.Table
	client *s3.Client
	store  *objstore.S3Store
	root   s3Loc // the table location
	rows   int64
	sum    uint64
	keys   []string // every object of the table before anything was planted
	t0     time.Time
}

// newS3Table writes a generated table through iceberg-go's S3 IO into an
// in-process S3 server; every object is stamped with the server clock t0.
func newS3Table(t *testing.T, appends, parts int, buckets ...string) *s3Table {
	t.Helper()
	ctx := context.Background()
	srv := s3test.Start(t, append([]string{bucket}, buckets...)...)
	cat := srv.SQLCatalog(t, bucket)
	tbl, err := gen.Create(ctx, cat, gen.Options{Appends: appends, RowsPerAppend: 50, Partitions: parts, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	client, err := objstore.NewS3Client(ctx, objstore.NewTransport(objstore.DefaultConfig(), nil), srv.Props())
	if err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewStore(ctx, tbl, objstore.S3{}, srv.Props())
	if err != nil {
		t.Fatal(err)
	}
	s3store, ok := store.(*objstore.S3Store)
	if !ok {
		t.Fatalf("NewStore for %s: %T, want *S3Store", tbl.Location(), store)
	}
	st := &s3Table{srv: srv, cat: cat, tbl: tbl, client: client, store: s3store, t0: srv.Clock.Now()}
	st.root = parseS3(t, tbl.Location())
	st.rows, st.sum = checksum(t, tbl)
	st.keys = st.list(t, bucket, st.root.key)
	return st
}

// s3Loc is an s3:// location split into bucket and key.
type s3Loc struct{ bucket, key string }

func parseS3(t *testing.T, location string) s3Loc {
	t.Helper()
	rest, ok := strings.CutPrefix(location, "s3://")
	b, k, _ := strings.Cut(rest, "/")
	if !ok || b == "" {
		t.Fatalf("%q is not an s3:// location", location)
	}
	return s3Loc{bucket: b, key: k}
}

func (p s3Loc) location(key string) string { return "s3://" + p.bucket + "/" + key }

func (st *s3Table) list(t *testing.T, b, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(st.client, &s3.ListObjectsV2Input{Bucket: aws.String(b), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// put stores an object at the current server time and returns its location.
func (st *s3Table) put(t *testing.T, b, key string, body []byte) string {
	t.Helper()
	_, err := st.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return "s3://" + b + "/" + key
}

func (st *s3Table) get(t *testing.T, location string) []byte {
	t.Helper()
	p := parseS3(t, location)
	out, err := st.client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(p.bucket), Key: aws.String(p.key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (st *s3Table) exists(t *testing.T, location string) bool {
	t.Helper()
	p := parseS3(t, location)
	_, err := st.client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(p.bucket), Key: aws.String(p.key)})
	return err == nil
}

func (st *s3Table) reload(t *testing.T) *table.Table {
	t.Helper()
	tbl, err := st.cat.LoadTable(context.Background(), st.tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func (st *s3Table) assertLiveIntact(t *testing.T) {
	t.Helper()
	for _, k := range st.keys {
		if !st.exists(t, st.root.location(k)) {
			t.Errorf("live object deleted: %s", k)
		}
	}
	rows, sum := checksum(t, st.reload(t))
	if rows != st.rows || sum != st.sum {
		t.Fatalf("table reads %d rows (%x), had %d (%x)", rows, sum, st.rows, st.sum)
	}
}

func (st *s3Table) liveDataFile(t *testing.T) iceberg.DataFile {
	t.Helper()
	tasks, err := st.tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tasks[0].File
}

// withPath copies a data file's metadata under another path.
func withPath(t *testing.T, tbl *table.Table, df iceberg.DataFile, path string) iceberg.DataFile {
	t.Helper()
	logical := map[int]string{}
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		if _, ok := f.Transform.(iceberg.DayTransform); ok {
			logical[f.FieldID] = "date"
		}
	}
	b, err := iceberg.NewDataFileBuilder(spec, df.ContentType(), path, df.FileFormat(), df.Partition(), logical, nil, df.Count(), df.FileSizeBytes())
	if err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

func commitFiles(t *testing.T, tbl *table.Table, files ...iceberg.DataFile) *table.Table {
	t.Helper()
	tx := tbl.NewTransaction()
	if err := tx.AddDataFiles(context.Background(), files, nil); err != nil {
		t.Fatal(err)
	}
	out, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ---------------------------------------------------------------------------

func TestS3RemovesOldOrphansWithPagedListingAndBatchedDeletes(t *testing.T) {
	ctx := context.Background()
	st := newS3Table(t, 6, 2)
	loc := func(rel string) string { return st.root.location(st.root.key + "/" + rel) }
	partDir := strings.TrimPrefix(filepath.Dir(strings.TrimPrefix(st.liveDataFile(t).FilePath(), st.root.location(st.root.key)+"/")), "/")
	oldOrphans := []string{
		st.put(t, bucket, st.root.key+"/"+partDir+"/00000-0-crashed.parquet", []byte("x")),
		st.put(t, bucket, st.root.key+"/metadata/snap-lost.avro", []byte("x")),
	}
	for i := range 2500 {
		oldOrphans = append(oldOrphans, st.put(t, bucket, fmt.Sprintf("%s/data/junk/%04d.parquet", st.root.key, i), []byte("junk")))
	}
	hidden := []string{
		st.put(t, bucket, st.root.key+"/data/_temporary/0/x.parquet", []byte("x")),
		st.put(t, bucket, st.root.key+"/.spark-staging/y.parquet", []byte("x")),
		st.put(t, bucket, st.root.key+"/"+partDir+"/.x.parquet.crc", []byte("x")),
	}
	st.srv.Clock.Advance(99 * time.Hour)
	youngOrphan := st.put(t, bucket, st.root.key+"/data/young.parquet", []byte("x"))
	now := st.t0.Add(old)

	var mu sync.Mutex
	var listed []string
	st.srv.FailWhen(func(op string, r *http.Request) bool {
		if op == "ListObjectsV2" {
			mu.Lock()
			listed = append(listed, r.URL.Query().Get("prefix"))
			mu.Unlock()
		}
		return false
	})
	st.srv.ResetCounts()
	cfg := DefaultConfig()
	plan, err := PlanTable(ctx, st.tbl, st.store, cfg, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := candidatePaths(plan), slices.Sorted(slices.Values(oldOrphans)); !slices.Equal(got, want) {
		t.Fatalf("%d candidates, want %d", len(got), len(want))
	}
	if r := skippedReason(plan, youngOrphan); r != ReasonTooYoung {
		t.Errorf("young orphan skipped as %q", r)
	}
	for _, p := range []string{loc("data/_temporary"), loc(".spark-staging"), hidden[2]} {
		if r := skippedReason(plan, p); r != ReasonHidden {
			t.Errorf("%s skipped as %q, want hidden", p, r)
		}
	}
	// 2500 objects in one folder take three pages; hidden folders are never listed.
	junkPages := 0
	for _, p := range listed {
		if strings.Contains(p, "/_temporary") || strings.Contains(p, ".spark-staging") {
			t.Errorf("listed hidden prefix %s", p)
		}
		if strings.HasSuffix(p, "/data/junk/") {
			junkPages++
		}
	}
	if junkPages != 3 {
		t.Errorf("data/junk/ listed in %d pages, want 3 (prefixes listed: %v)", junkPages, listed)
	}
	if st.srv.Count("DeleteObjects") != 0 {
		t.Fatal("planning deleted something")
	}

	res, err := Execute(ctx, st.cat, st.tbl, st.store, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesDeleted != 2502 || res.DeleteBatches != 3 || st.srv.Count("DeleteObjects") != 3 {
		t.Fatalf("deleted %d in %d batches (%d DeleteObjects calls); want 2502 in 3", res.FilesDeleted, res.DeleteBatches, st.srv.Count("DeleteObjects"))
	}
	for _, p := range oldOrphans[:2] {
		if st.exists(t, p) {
			t.Errorf("old orphan kept: %s", p)
		}
	}
	if left := st.list(t, bucket, st.root.key+"/data/junk/"); len(left) != 0 {
		t.Errorf("%d junk objects left", len(left))
	}
	for _, p := range append(hidden, youngOrphan) {
		if !st.exists(t, p) {
			t.Errorf("deleted %s", p)
		}
	}
	st.assertLiveIntact(t)
}

func TestS3FileCommittedBetweenPlanAndExecuteIsKept(t *testing.T) {
	ctx := context.Background()
	st := newS3Table(t, 4, 1)
	df := st.liveDataFile(t)
	slowKey := strings.TrimPrefix(strings.TrimSuffix(df.FilePath(), ".parquet")+"-slow.parquet", "s3://"+bucket+"/")
	slow := st.put(t, bucket, slowKey, st.get(t, df.FilePath()))
	other := st.put(t, bucket, st.root.key+"/data/orphan.parquet", []byte("x"))
	now := st.t0.Add(old)
	cfg := DefaultConfig()
	plan, err := PlanTable(ctx, st.tbl, st.store, cfg, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := candidatePaths(plan); len(got) != 2 || !slices.Contains(got, slow) {
		t.Fatalf("candidates %v", got)
	}
	tx := st.reload(t).NewTransaction()
	if err := tx.AddFiles(ctx, []string{slow}, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, st.cat, st.tbl, st.store, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.NowReferenced, []string{slow}) || res.FilesDeleted != 1 || !st.exists(t, slow) || st.exists(t, other) {
		t.Fatalf("result %+v", res)
	}
	if rows, _ := checksum(t, st.reload(t)); rows != st.rows+50 {
		t.Fatalf("table reads %d rows, want %d", rows, st.rows+50)
	}
}

// TestS3SchemeAndAuthorityMismatch: the metadata references a file as
// s3a://warehouse/K (a Hadoop writer) and another as s3://replica/K2 while
// the listing sees s3://warehouse/K and s3://warehouse/K2.
func TestS3SchemeAndAuthorityMismatch(t *testing.T) {
	ctx := context.Background()
	st := newS3Table(t, 3, 1, "replica")
	df := st.liveDataFile(t)
	body := st.get(t, df.FilePath())
	base := strings.TrimPrefix(strings.TrimSuffix(df.FilePath(), ".parquet"), "s3://"+bucket+"/")
	hadoopKey, replicaKey := base+"-hadoop.parquet", base+"-replica.parquet"
	st.put(t, bucket, hadoopKey, body)
	st.put(t, bucket, replicaKey, body)
	st.put(t, "replica", replicaKey, body)
	s3aRef := "s3a://" + bucket + "/" + hadoopKey
	replicaRef := "s3://replica/" + replicaKey
	st.tbl = commitFiles(t, st.tbl, withPath(t, st.tbl, df, s3aRef), withPath(t, st.tbl, df, replicaRef))
	hadoopListed, replicaListed := "s3://"+bucket+"/"+hadoopKey, "s3://"+bucket+"/"+replicaKey
	now := st.t0.Add(old)

	plan := func(edit func(*Config)) (*Plan, error) {
		cfg := DefaultConfig()
		edit(&cfg)
		return PlanTable(ctx, st.tbl, st.store, cfg, now, nil)
	}
	pairs := func(err error) []Mismatch {
		var me *MismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrPrefixMismatch) {
			t.Fatalf("err %v; want a MismatchError", err)
		}
		return me.Pairs
	}

	// Defaults: s3a equals s3; the other bucket is a mismatch: abort.
	_, err := plan(func(*Config) {})
	if got := pairs(err); !slices.Equal(got, []Mismatch{{Listed: replicaListed, Referenced: replicaRef}}) {
		t.Fatalf("pairs %v", got)
	}
	if !strings.Contains(err.Error(), replicaListed) || !strings.Contains(err.Error(), replicaRef) {
		t.Fatalf("message does not name the pair: %v", err)
	}
	// Without scheme equivalence both conflict.
	_, err = plan(func(c *Config) { c.EqualSchemes = nil })
	if got := pairs(err); !slices.Equal(got, []Mismatch{{hadoopListed, s3aRef}, {replicaListed, replicaRef}}) {
		t.Fatalf("pairs %v", got)
	}
	// Authority equivalence resolves the replica.
	p, err := plan(func(c *Config) { c.EqualAuthorities = map[string]string{"replica": bucket} })
	if err != nil || !p.Empty() {
		t.Fatalf("with equal_authorities: plan %v err %v", p, err)
	}
	// ignore: same file, kept and reported.
	p, err = plan(func(c *Config) { c.EqualSchemes = nil; c.PrefixMismatch = PrefixMismatchIgnore })
	if err != nil || !p.Empty() || skippedReason(p, hadoopListed) != ReasonPrefixIgnored || skippedReason(p, replicaListed) != ReasonPrefixIgnored {
		t.Fatalf("ignore: candidates %v skipped %v err %v", candidatePaths(p), p.Skipped, err)
	}
	// delete: orphans (not executed: the s3a reference is the live one).
	p, err = plan(func(c *Config) { c.EqualSchemes = nil; c.PrefixMismatch = PrefixMismatchDelete })
	if err != nil || !slices.Equal(candidatePaths(p), []string{hadoopListed, replicaListed}) {
		t.Fatalf("delete: candidates %v err %v", candidatePaths(p), err)
	}
	if st.srv.Count("DeleteObjects") != 0 || !st.exists(t, hadoopListed) || !st.exists(t, replicaListed) {
		t.Fatal("something was deleted")
	}
}

func TestS3FailedListingDeletesNothing(t *testing.T) {
	ctx := context.Background()
	st := newS3Table(t, 3, 1)
	for i := range 1500 {
		st.put(t, bucket, fmt.Sprintf("%s/data/junk/%04d.parquet", st.root.key, i), []byte("junk"))
	}
	// The second page of any listing fails (403: the SDK does not retry).
	st.srv.FailWhen(func(op string, r *http.Request) bool {
		return op == "ListObjectsV2" && r.URL.Query().Get("continuation-token") != ""
	})
	plan, err := PlanTable(ctx, st.tbl, st.store, DefaultConfig(), st.t0.Add(old), nil)
	if !errors.Is(err, ErrListing) || plan != nil {
		t.Fatalf("plan returned: %v, err %v; want ErrListing", plan != nil, err)
	}
	st.srv.FailWhen(nil)
	if st.srv.Count("DeleteObjects")+st.srv.Count("DeleteObject") != 0 || len(st.list(t, bucket, st.root.key+"/data/junk/")) != 1500 {
		t.Fatal("deleted after a failed listing")
	}
	st.assertLiveIntact(t)
}

func TestS3CancelledRunStopsBetweenBatches(t *testing.T) {
	st := newS3Table(t, 2, 1)
	for i := range 2500 {
		st.put(t, bucket, fmt.Sprintf("%s/data/junk/%04d.parquet", st.root.key, i), []byte("junk"))
	}
	cfg := DefaultConfig()
	cfg.DeleteConcurrency = 1
	plan, err := PlanTable(context.Background(), st.tbl, st.store, cfg, st.t0.Add(old), nil)
	if err != nil || len(plan.Candidates) != 2500 {
		t.Fatalf("plan err %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Execute(ctx, st.cat, st.tbl, st.store, plan, cfg, Options{beforeDelete: func(batch int) {
		if batch == 1 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || res.FilesDeleted != 1000 || res.NotAttempted != 1500 || st.srv.Count("DeleteObjects") != 1 {
		t.Fatalf("res %+v err %v, %d DeleteObjects calls", res, err, st.srv.Count("DeleteObjects"))
	}
	if left := st.list(t, bucket, st.root.key+"/data/junk/"); len(left) != 1500 {
		t.Fatalf("%d junk objects left, want 1500", len(left))
	}
	st.assertLiveIntact(t)
}

// A DeleteObjects that stalls until the request timeout fails the run: the
// timeout is a deadline error, but not the run's, so the files count as
// failed, not as left by a cancelled run (which would report success).
func TestS3StalledDeleteFailsTheRun(t *testing.T) {
	st := newS3Table(t, 2, 1)
	for i := range 3 {
		st.put(t, bucket, fmt.Sprintf("%s/data/junk/%d.parquet", st.root.key, i), []byte("junk"))
	}
	ctx := context.Background()
	client, err := objstore.NewS3Client(ctx, objstore.NewTransport(objstore.Config{RequestTimeout: 200 * time.Millisecond, MaxAttempts: 2}, nil), st.srv.Props())
	if err != nil {
		t.Fatal(err)
	}
	store := objstore.NewS3Store(client)
	plan, err := PlanTable(ctx, st.tbl, store, DefaultConfig(), st.t0.Add(old), nil)
	if err != nil || len(plan.Candidates) != 3 {
		t.Fatalf("plan %+v err %v", plan, err)
	}
	st.srv.StallWhen(func(op string, _ *http.Request) bool { return op == "DeleteObjects" })
	res, err := Execute(ctx, st.cat, st.tbl, store, plan, DefaultConfig(), Options{})
	if !errors.Is(err, ErrDeleteFailed) || len(res.Failed) != 3 || res.NotAttempted != 0 {
		t.Fatalf("res %+v err %v; want ErrDeleteFailed with 3 failed", res, err)
	}
	st.srv.StallWhen(nil)
	st.assertLiveIntact(t)
}

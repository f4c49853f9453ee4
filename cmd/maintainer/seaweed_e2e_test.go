package main

// The binary against a real S3 server: SeaweedFS, the one scripts/test.sh
// starts (internal/s3test/seaweed), under a SQLite catalog whose warehouse is
// s3://BUCKET/warehouse. `run` of each task in turn and `serve` on a trigger
// over HTTP, checking exit codes, rows and checksums (by iceberg-go and by
// the independent verifier, on a download of the table) and which objects
// are left in the bucket.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/s3test/seaweed"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// A generated table on S3 is kept small: every commit is several requests.
const (
	weedAppends    = 24
	weedRows       = 200
	weedPartitions = 4
	weedTable      = "events" // demoOverride's table
)

// weedWarehouse is a genWarehouse whose catalog keeps its tables in a bucket
// of its own on SeaweedFS.
type weedWarehouse struct {
	*genWarehouse
	srv    *seaweed.Server
	bucket string
}

// weedGen is the generated weedTable.
var weedGen = gen.Options{Namespace: genNamespace, Table: weedTable, Appends: weedAppends, RowsPerAppend: weedRows,
	Partitions: weedPartitions, Seed: 7}

// newWeedWarehouse generates weedTable in a fresh bucket of the shared
// server and writes a config for it: the demo's (local lock, trigger state
// in a file) with extra YAML appended.
func newWeedWarehouse(t *testing.T, extra string) *weedWarehouse {
	t.Helper()
	return newWeedWarehouseOn(t, seaweed.Shared(t), weedGen, extra)
}

// newWeedWarehouseOn is newWeedWarehouse on srv, with the table opt makes.
func newWeedWarehouseOn(t *testing.T, srv *seaweed.Server, opt gen.Options, extra string) *weedWarehouse {
	t.Helper()
	w := &weedWarehouse{srv: srv, bucket: srv.Bucket(t)}
	dir := t.TempDir()
	db := filepath.Join(dir, "catalog.db")
	props := srv.Props()
	props["type"] = "sql"
	props["uri"] = sqliteuri.DSN(db)
	props[sqlcat.DriverKey] = sqliteshim.ShimName
	props[sqlcat.DialectKey] = string(sqlcat.SQLite)
	props["warehouse"] = "s3://" + w.bucket + "/warehouse"
	props["init_catalog_tables"] = "true"
	open := func(ctx context.Context) (*sqlcat.Catalog, error) {
		c, err := catalog.Load(ctx, genCatalog, maps.Clone(props))
		if err != nil {
			return nil, fmt.Errorf("open the SQL catalog on %s: %w", db, err)
		}
		return c.(*sqlcat.Catalog), nil
	}
	cat, err := open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := gen.Create(t.Context(), cat, opt); err != nil {
		t.Fatalf("generate %s on %s: %v", opt.Table, srv.Endpoint, err)
	}

	var cfg strings.Builder
	fmt.Fprintf(&cfg, "catalog:\n  name: %s\n  type: sql\n  uri: %q\n  warehouse: %q\n  properties:\n    sql.driver: sqliteshim\n    sql.dialect: sqlite\n",
		genCatalog, "file:"+filepath.ToSlash(db), props["warehouse"])
	s3Props := srv.Props()
	for _, k := range slices.Sorted(maps.Keys(s3Props)) {
		fmt.Fprintf(&cfg, "    %s: %q\n", k, s3Props[k])
	}
	fmt.Fprintf(&cfg, "lock:\n  backend: local\n  ttl: 60s\n%s", extra)
	w.genWarehouse = &genWarehouse{dir: dir, cfg: writeFile(t, filepath.Join(dir, "maintainer.yaml"), cfg.String()), open: open}
	return w
}

// tablePrefix is the key prefix of weedTable's objects.
func (w *weedWarehouse) tablePrefix() string {
	return "warehouse/" + genNamespace + ".db/" + weedTable + "/"
}

// keys are the table's objects, as keys relative to its location.
func (w *weedWarehouse) keys(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for k := range w.srv.Keys(t, w.bucket) {
		if rel, ok := strings.CutPrefix(k, w.tablePrefix()); ok {
			out[rel] = true
		}
	}
	return out
}

// rel is the key of location relative to the table's location.
func (w *weedWarehouse) rel(t *testing.T, location string) string {
	t.Helper()
	rel, ok := strings.CutPrefix(location, "s3://"+w.bucket+"/"+w.tablePrefix())
	if !ok {
		t.Fatalf("%s is not under the table's location s3://%s/%s", location, w.bucket, w.tablePrefix())
	}
	return rel
}

// referenced is every file the table's metadata references: the metadata
// file and, of every snapshot it keeps, the manifest list, the manifests
// and their live files, relative to the table's location.
func (w *weedWarehouse) referenced(t *testing.T) map[string]bool {
	t.Helper()
	ctx := t.Context()
	cat, err := w.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{genNamespace, weedTable})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{w.rel(t, tbl.MetadataLocation()): true}
	for _, snap := range tbl.Metadata().Snapshots() {
		out[w.rel(t, snap.ManifestList)] = true
		manifests, err := snap.Manifests(fs)
		if err != nil {
			t.Fatalf("snapshot %d: %v", snap.SnapshotID, err)
		}
		for _, m := range manifests {
			out[w.rel(t, m.FilePath())] = true
			entries, err := m.FetchEntries(fs, true)
			if err != nil {
				t.Fatalf("manifest %s: %v", m.FilePath(), err)
			}
			for _, e := range entries {
				out[w.rel(t, e.DataFile().FilePath())] = true
			}
		}
	}
	return out
}

// verify downloads the table's objects into a local folder and reads the
// metadata file at location with the independent verifier.
func (w *weedWarehouse) verify(t *testing.T, location string) testenv.VerifyResult {
	t.Helper()
	local := t.TempDir()
	c := w.srv.Client()
	for rel := range w.keys(t) {
		out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(w.bucket), Key: aws.String(w.tablePrefix() + rel)})
		if err != nil {
			t.Fatalf("download %s: %v", rel, err)
		}
		b, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatalf("download %s: %v", rel, err)
		}
		file := filepath.Join(local, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return testenv.Verify(t, filepath.Join(local, filepath.FromSlash(w.rel(t, location))))
}

// expectPresent fails the test for every key of want missing from have.
func expectPresent(t *testing.T, what string, want, have map[string]bool) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !have[k] {
			t.Errorf("%s: %s is gone", what, k)
		}
	}
}

// parquetKeys are the data files among keys (relative to the table).
func parquetKeys(keys map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range keys {
		if strings.HasPrefix(k, "data/") && strings.HasSuffix(k, ".parquet") {
			out[k] = true
		}
	}
	return out
}

// runTask runs one task on the warehouse and returns its one outcome.
func (w *weedWarehouse) runTask(t *testing.T, task string) maintainedOutcome {
	t.Helper()
	r := runMaintainer(t, w.dir, "run", "--task", task, "--config", w.cfg, "--output", "json")
	expectCode(t, r, 0, "run --task "+task)
	outs := jsonLines[maintainedOutcome](t, r.stdout)
	if len(outs) != 1 || outs[0].Task != task || outs[0].Status != "succeeded" {
		t.Fatalf("run --task %s: outcomes %+v; want %s succeeded\n%s", task, outs, task, r)
	}
	return outs[0]
}

// expectCompacted checks that the table is a compaction on top of before
// with the same rows (by iceberg-go and by the verifier, whose reading of
// before is verifiedBefore) in weedPartitions files, and that every object
// of keys0 (nothing is deleted before expiry) and every referenced file is
// there. It returns the table's state and objects.
func (w *weedWarehouse) expectCompacted(t *testing.T, what string, before tableState, verifiedBefore testenv.VerifyResult, keys0 map[string]bool) (tableState, map[string]bool) {
	t.Helper()
	after := w.state(t, weedTable)
	if !after.compacted() || after.parentID != before.snapshotID || after.rows != before.rows || after.sum != before.sum {
		t.Errorf("%s: %+v; want a compaction on top of %d with %d rows (%016x)", what, after, before.snapshotID, before.rows, before.sum)
	}
	if v := w.verify(t, after.metadata); v.LiveRows != verifiedBefore.LiveRows || v.Checksum != verifiedBefore.Checksum || v.DataFiles != weedPartitions {
		t.Errorf("verifier %s: %d rows (%s) in %d files; want %d (%s) in %d",
			what, v.LiveRows, v.Checksum, v.DataFiles, verifiedBefore.LiveRows, verifiedBefore.Checksum, weedPartitions)
	}
	keys := w.keys(t)
	expectPresent(t, what+" (nothing is deleted before expiry)", keys0, keys)
	expectPresent(t, what, w.referenced(t), keys)
	return after, keys
}

// expectExpired checks that expiry left the compaction's snapshot alone
// with its rows (by iceberg-go, and by the verifier, whose reading of
// compacted was verified), every referenced file and none of inputs, the
// files of the expired snapshots. It returns the table's state and objects.
func (w *weedWarehouse) expectExpired(t *testing.T, compacted tableState, verified testenv.VerifyResult, inputs map[string]bool) (tableState, map[string]bool) {
	t.Helper()
	expired := w.state(t, weedTable)
	if expired.snapshots != 1 || expired.snapshotID != compacted.snapshotID || expired.rows != compacted.rows || expired.sum != compacted.sum {
		t.Errorf("after expiry: %+v; want the compaction's snapshot %d alone, %d rows (%016x)", expired, compacted.snapshotID, compacted.rows, compacted.sum)
	}
	if v := w.verify(t, expired.metadata); v.LiveRows != verified.LiveRows || v.Checksum != verified.Checksum {
		t.Errorf("verifier after expiry: %d rows (%s); want %d (%s)", v.LiveRows, v.Checksum, verified.LiveRows, verified.Checksum)
	}
	keys := w.keys(t)
	expectPresent(t, "after expiry", w.referenced(t), keys)
	for k := range inputs {
		if keys[k] {
			t.Errorf("after expiry: %s, referenced only by expired snapshots, is still there", k)
		}
	}
	return expired, keys
}

// On SeaweedFS, one task at a time as a CronJob would run them: compaction
// keeps the rows and deletes nothing (its inputs stay until expiry); expiry
// keeps the compaction's snapshot and deletes the writers' data files; orphan
// removal deletes the old unreferenced objects and keeps the young one, the
// one in a staging folder and every live file; then nothing is due.
func TestSeaweedRunTasks(t *testing.T) {
	t.Parallel()
	w := newWeedWarehouse(t, demoOverride)

	before := w.state(t, weedTable)
	verifiedBefore := w.verify(t, before.metadata)
	keys0 := w.keys(t)
	inputs := parquetKeys(keys0)
	if verifiedBefore.LiveRows != before.rows || verifiedBefore.Checksum == "" || verifiedBefore.DataFiles != weedAppends ||
		len(inputs) != weedAppends || before.snapshots != weedAppends {
		t.Fatalf("generated table: verifier reads %d rows in %d files, %d snapshots, %d data objects; want %d rows in %d of each",
			verifiedBefore.LiveRows, verifiedBefore.DataFiles, before.snapshots, len(inputs), before.rows, weedAppends)
	}
	expectPresent(t, "generated table", w.referenced(t), keys0)

	// Compaction: a table never maintained is due at first sight.
	c := w.runTask(t, "compact").Compact
	if c == nil || c.FilesIn != weedAppends || c.FilesOut != weedPartitions || c.RowsRead != before.rows || c.RowsWritten != before.rows {
		t.Errorf("compaction %+v; want %d files of %d rows rewritten into %d", c, weedAppends, before.rows, weedPartitions)
	}
	compacted, keys1 := w.expectCompacted(t, "after compaction", before, verifiedBefore, keys0)
	if n := len(parquetKeys(keys1)); n != weedAppends+weedPartitions {
		t.Errorf("after compaction: %d data objects; want the %d inputs and %d outputs", n, weedAppends, weedPartitions)
	}

	// Expiry (demoOverride: retain_last 1, max_snapshot_age 1s): every
	// writer's snapshot goes, and with them their data files.
	time.Sleep(1100 * time.Millisecond)
	if e := w.runTask(t, "expire").Expire; e == nil || e.SnapshotsExpired != weedAppends {
		t.Errorf("expiry %+v; want %d snapshots expired", e, weedAppends)
	}
	expired, keys2 := w.expectExpired(t, compacted, verifiedBefore, inputs)
	if n := len(parquetKeys(keys2)); n != weedPartitions {
		t.Errorf("after expiry: %d data objects; want the %d compacted ones", n, weedPartitions)
	}

	// Orphan removal: S3 stamps a PUT with the server's clock, so the old
	// orphans are back-dated past min_age (72h) through the filer.
	day := path.Dir(slices.Sorted(maps.Keys(parquetKeys(keys2)))[0])
	old := map[string][]byte{
		day + "/00000-crashed-writer.parquet":  []byte("crashed writer"),
		"data/00001-failed-compaction.parquet": []byte("failed compaction"),
		"metadata/snap-123-1-abandoned.avro":   []byte("abandoned manifest list"),
		"data/_temporary/0/part-00000.parquet": []byte("staging: hidden, kept"),
		"data/.part-00001.parquet.crc":         []byte("hidden name, kept"),
	}
	hidden := []string{"data/_temporary/0/part-00000.parquet", "data/.part-00001.parquet.crc"}
	planted := map[string][]byte{}
	for k, v := range old {
		planted[w.tablePrefix()+k] = v
	}
	w.srv.PutModified(t, w.bucket, time.Now().Add(-10*24*time.Hour), planted)
	const young = "data/00002-in-flight.parquet"
	if _, err := w.srv.Client().PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(w.bucket),
		Key: aws.String(w.tablePrefix() + young), Body: strings.NewReader("in flight: younger than min_age, kept")}); err != nil {
		t.Fatal(err)
	}
	live := w.referenced(t)
	// Everything else stays: the young orphan, and the young metadata files
	// of earlier commits too.
	kept := w.keys(t)
	for k := range old {
		if !slices.Contains(hidden, k) {
			delete(kept, k)
		}
	}
	if o := w.runTask(t, "orphans").Orphans; o == nil || o.FilesDeleted != len(old)-len(hidden) {
		t.Errorf("orphan removal %+v; want the %d old visible planted files deleted", o, len(old)-len(hidden))
	}
	keys3 := w.keys(t)
	expectPresent(t, "after orphan removal", live, keys3)
	expectPresent(t, "after orphan removal", kept, keys3)
	for k := range old {
		if want := slices.Contains(hidden, k); keys3[k] != want {
			t.Errorf("after orphan removal: planted %s present %v; want %v", k, keys3[k], want)
		}
	}
	final := w.state(t, weedTable)
	if final.snapshotID != expired.snapshotID || final.rows != before.rows || final.sum != before.sum {
		t.Errorf("after orphan removal: %+v; want snapshot %d, %d rows (%016x)", final, expired.snapshotID, before.rows, before.sum)
	}
	if v := w.verify(t, final.metadata); v.LiveRows != verifiedBefore.LiveRows || v.Checksum != verifiedBefore.Checksum {
		t.Errorf("verifier after orphan removal: %d rows (%s); want %d (%s)", v.LiveRows, v.Checksum, verifiedBefore.LiveRows, verifiedBefore.Checksum)
	}

	// Every task just ran: the next pass has nothing to do.
	r := runMaintainer(t, w.dir, "run", "--config", w.cfg, "--output", "json")
	expectCode(t, r, 0, "the next run")
	for _, o := range jsonLines[outcome](t, r.stdout) {
		if o.Status != "not_due" {
			t.Errorf("the next run: %s is %s (%s); want not_due", o.Task, o.Status, o.Reason)
		}
	}
}

// serve on SeaweedFS: nothing is due until a trigger over HTTP, which
// compacts the table with its rows; SIGTERM then ends serve cleanly.
func TestSeaweedServeTrigger(t *testing.T) {
	t.Parallel()
	tokenDir := t.TempDir()
	token := writeFile(t, filepath.Join(tokenDir, "token"), serveToken+"\n")
	w := newWeedWarehouse(t, "server: {listen: 127.0.0.1:0, token_file: "+token+"}\n"+
		"scheduler: {poll_interval: 1s}\n"+
		"defaults:\n"+
		"  compact: {enabled: true, trigger: {commit_count: 100000, interval: 0s, rate_limit: 0s}}\n"+
		"  expire: {enabled: false}\n"+
		"  orphans: {enabled: false}\n")
	before := w.state(t, weedTable)
	verifiedBefore := w.verify(t, before.metadata)
	keys0 := w.keys(t)
	srv := startServe(t, w.genWarehouse, w.cfg)
	if s := w.state(t, weedTable); s.compacted() {
		t.Fatal("compacted before the trigger")
	}
	code, body := srv.api("POST", "/v1/trigger", serveToken, `{"table":"`+genNamespace+`.`+weedTable+`","tasks":["compact"],"reason":"e2e"}`)
	if code != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", code, body)
	}
	srv.waitFor("compaction requested over HTTP", func() bool { return w.state(t, weedTable).compacted() })
	srv.stop()

	w.expectCompacted(t, "after serve's compaction", before, verifiedBefore, keys0)
}

package trigger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// writer appends to a generated, unpartitioned table one commit (one data
// file) at a time.
type writer struct {
	t    *testing.T
	tbl  *table.Table
	opt  gen.Options
	next int
}

func newWriter(t *testing.T, formatVersion, appends int) *writer {
	t.Helper()
	opt := gen.Options{Appends: appends, RowsPerAppend: 20, Seed: 3, FormatVersion: formatVersion, Workers: 1}
	_, tbl, _ := testenv.GeneratedTable(t, opt)
	return &writer{t: t, tbl: tbl, opt: opt, next: appends}
}

func (w *writer) append(n int) {
	w.t.Helper()
	for range n {
		if w.tbl.Metadata().Version() == 1 {
			waitNextMilli(w.tbl)
		}
		tbl, err := gen.Append(context.Background(), w.tbl, w.opt, 1, w.next)
		if err != nil {
			w.t.Fatal(err)
		}
		w.tbl, w.next = tbl, w.next+1
	}
}

// waitNextMilli makes the next commit's timestamp later than every
// snapshot's, as v1 tables (no sequence numbers) are counted by timestamp.
func waitNextMilli(tbl *table.Table) {
	var last int64
	for _, s := range tbl.Metadata().Snapshots() {
		last = max(last, s.TimestampMs)
	}
	for time.Now().UnixMilli() <= last {
		time.Sleep(time.Millisecond)
	}
}

func (w *writer) commit(txn *table.Transaction) {
	w.t.Helper()
	tbl, err := txn.Commit(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	w.tbl = tbl
}

func (w *writer) liveFiles() []iceberg.DataFile {
	w.t.Helper()
	tasks, err := w.tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	out := make([]iceberg.DataFile, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.File
	}
	return out
}

// copyFile copies the data file df to a new file beside it, returning its
// URI and size: new data for a commit without a writer.
func (w *writer) copyFile(df iceberg.DataFile, name string) (string, int64) {
	w.t.Helper()
	u, err := url.Parse(df.FilePath())
	if err != nil {
		w.t.Fatal(err)
	}
	dst := filepath.Join(filepath.Dir(u.Path), name+".parquet")
	b, err := os.ReadFile(u.Path)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		w.t.Fatal(err)
	}
	return gen.FileURI(dst), int64(len(b))
}

// tagged commits an append that carries the maintainer's summary tag.
func (w *writer) tagged() {
	w.t.Helper()
	uri, _ := w.copyFile(w.liveFiles()[0], fmt.Sprintf("tagged-%d", w.next))
	txn := w.tbl.NewTransaction()
	if err := txn.AddFiles(context.Background(), []string{uri}, iceberg.Properties{tableprops.SummaryOperation: "compact"}, false); err != nil {
		w.t.Fatal(err)
	}
	w.commit(txn)
}

// rewrite commits another engine's rewrite (operation "replace") of one
// data file into a copy of it.
func (w *writer) rewrite() {
	w.t.Helper()
	old := w.liveFiles()[0]
	uri, size := w.copyFile(old, fmt.Sprintf("rewrite-%d", w.next))
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, uri,
		iceberg.ParquetFile, nil, nil, nil, old.Count(), size)
	if err != nil {
		w.t.Fatal(err)
	}
	txn := w.tbl.NewTransaction()
	if err := txn.NewRewrite(nil).DeleteFile(old).AddDataFile(b.Build()).Commit(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	w.commit(txn)
	if op := w.tbl.CurrentSnapshot().Summary.Operation; op != table.OpReplace {
		w.t.Fatalf("rewrite committed operation %q, want replace", op)
	}
}

func (w *writer) rollbackTo(id int64) {
	w.t.Helper()
	txn := w.tbl.NewTransaction()
	if err := txn.RollbackToSnapshot(id); err != nil {
		w.t.Fatal(err)
	}
	w.commit(txn)
}

// expireAllBut expires every snapshot but the last n of main (and with them
// any snapshot no ref reaches).
func (w *writer) expireAllBut(n int) {
	w.t.Helper()
	txn := w.tbl.NewTransaction()
	if err := txn.ExpireSnapshots(table.WithOlderThan(0), table.WithRetainLast(n), table.WithPostCommit(false)); err != nil {
		w.t.Fatal(err)
	}
	w.commit(txn)
}

// completedAt returns the State of a task that completed a run now.
func completedAt(meta table.Metadata) State {
	return Record(State{}, MarkOf(meta), time.Now(), "succeeded", nil, true)
}

// summed adds up the summaries of the given snapshots the way Count should.
func summed(t *testing.T, snaps ...*table.Snapshot) Counters {
	t.Helper()
	var c Counters
	for _, s := range snaps {
		get := func(k string) int64 {
			v, _ := strconv.ParseInt(s.Summary.Properties[k], 10, 64)
			return v
		}
		c.Commits++
		c.DataFiles += int(get(keyAddedDataFiles))
		c.DeleteFiles += int(get(keyAddedDeleteFiles))
		c.DataBytes += get(keyAddedFilesSize)
	}
	return c
}

func mustCount(t *testing.T, tbl *table.Table, st State, need Config) Counters {
	t.Helper()
	c, err := Count(context.Background(), tbl, st, need)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var allFigures = Config{CommitCount: 1, DataFileCount: 1, DataFileBytes: 1, DeleteFileCount: 1}

func TestCountFromCreation(t *testing.T) {
	w := newWriter(t, 2, 5)
	var want Counters
	var bytes int64
	for _, df := range w.liveFiles() {
		bytes += df.FileSizeBytes()
	}
	want = Counters{Commits: 5, DataFiles: 5, DataBytes: bytes, FromCreation: true}
	if got := mustCount(t, w.tbl, State{}, allFigures); got != want {
		t.Fatalf("count of a never-run task: %+v, want %+v", got, want)
	}
}

func TestCountIgnoresMaintenanceCommits(t *testing.T) {
	w := newWriter(t, 2, 3)
	w.tagged()
	w.rewrite()
	w.append(2)
	meta := w.tbl.Metadata()
	var writers []*table.Snapshot
	for _, s := range meta.Snapshots() {
		if !IsMaintenanceCommit(&s) {
			writers = append(writers, &s)
		}
	}
	if len(writers) != 5 || len(meta.Snapshots()) != 7 {
		t.Fatalf("%d writer snapshots of %d, want 5 of 7", len(writers), len(meta.Snapshots()))
	}
	want := summed(t, writers...)
	want.FromCreation = true
	if got := mustCount(t, w.tbl, State{}, allFigures); got != want {
		t.Fatalf("count: %+v, want %+v (maintenance commits and their files left out)", got, want)
	}
}

func TestCountStopsAtRecordedSnapshot(t *testing.T) {
	for _, fv := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", fv), func(t *testing.T) {
			w := newWriter(t, fv, 3)
			st := completedAt(w.tbl.Metadata())
			if got := mustCount(t, w.tbl, st, allFigures); got != (Counters{}) {
				t.Fatalf("count right after a run: %+v, want zero", got)
			}
			w.append(4)
			w.tagged() // our own commit after the run: not counted
			got := mustCount(t, w.tbl, st, allFigures)
			if got.Commits != 4 || got.DataFiles != 4 || got.FromCreation {
				t.Fatalf("count after 4 appends: %+v", got)
			}

			// A failed run moves nothing: the appends keep counting.
			failed := Record(st, MarkOf(w.tbl.Metadata()), time.Now(), "failed", errors.New("boom"), false)
			if got := mustCount(t, w.tbl, failed, allFigures); got.Commits != 4 {
				t.Fatalf("count after a failed run: %+v, want 4 commits", got)
			}
		})
	}
}

// The recorded snapshot left main (rollback) and was then expired: the
// count stops at the recorded sequence number (v2) or timestamp (v1) rather
// than running on into history the task already handled.
func TestCountRecordedSnapshotExpired(t *testing.T) {
	for _, fv := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", fv), func(t *testing.T) {
			w := newWriter(t, fv, 2)
			keep := w.tbl.CurrentSnapshot().SnapshotID
			w.append(2)
			st := completedAt(w.tbl.Metadata())
			recorded := st.SnapshotID
			w.rollbackTo(keep)
			w.append(3)
			w.expireAllBut(4) // keeps main's last 4: the 3 appends and `keep`
			if w.tbl.Metadata().SnapshotByID(recorded) != nil {
				t.Fatalf("recorded snapshot %d not expired", recorded)
			}
			if w.tbl.Metadata().SnapshotByID(keep) == nil {
				t.Fatalf("snapshot %d before the recorded one was expired", keep)
			}
			if got := mustCount(t, w.tbl, st, allFigures); got.Commits != 3 || got.DataFiles != 3 {
				t.Fatalf("count: %+v, want the 3 appends after the rollback", got)
			}
		})
	}
}

func TestCountEndsAtExpiredHistory(t *testing.T) {
	w := newWriter(t, 2, 6)
	w.expireAllBut(2)
	got := mustCount(t, w.tbl, State{}, Config{CommitCount: 1})
	if got.Commits != 2 || !got.FromCreation {
		t.Fatalf("count over 2 retained snapshots: %+v", got)
	}
}

func TestCountRecreatedTableCountsFromCreation(t *testing.T) {
	w := newWriter(t, 2, 3)
	st := completedAt(w.tbl.Metadata())
	st.TableUUID = "00000000-0000-0000-0000-000000000001" // another table of that name
	got := mustCount(t, w.tbl, st, Config{CommitCount: 1})
	if got.Commits != 3 || !got.FromCreation {
		t.Fatalf("count after re-creation: %+v, want 3 commits from creation", got)
	}
}

func TestCountEmptyTable(t *testing.T) {
	w := newWriter(t, 2, 0)
	st := completedAt(w.tbl.Metadata())
	if st.SnapshotID != 0 || st.LastRun.IsZero() {
		t.Fatalf("state after a run on an empty table: %+v", st)
	}
	w.append(2)
	if got := mustCount(t, w.tbl, st, allFigures); got.Commits != 2 || got.DataFiles != 2 {
		t.Fatalf("count: %+v, want both appends after the run on the empty table", got)
	}
}

// stripped hides the file metrics of every snapshot summary, as old or
// minimal writers leave them.
type stripped struct{ table.Metadata }

func stripSummary(s *table.Snapshot) *table.Snapshot {
	if s == nil || s.Summary == nil {
		return s
	}
	c := *s
	props := iceberg.Properties{}
	for k, v := range s.Summary.Properties {
		if !hasMetrics(iceberg.Properties{k: v}) {
			props[k] = v
		}
	}
	c.Summary = &table.Summary{Operation: s.Summary.Operation, Properties: props}
	return &c
}

func (m stripped) CurrentSnapshot() *table.Snapshot {
	return stripSummary(m.Metadata.CurrentSnapshot())
}
func (m stripped) SnapshotByID(id int64) *table.Snapshot {
	return stripSummary(m.Metadata.SnapshotByID(id))
}

// noIO fails the test if the counter asks for the table's IO.
func noIO(t *testing.T) func(context.Context) (iceio.IO, error) {
	return func(context.Context) (iceio.IO, error) {
		t.Error("Count opened the table IO although no manifest was needed")
		return nil, errors.New("no IO in this test")
	}
}

// checkManifestFallback counts tbl with summaries stripped and compares with
// the summary count, figure by figure, checking that manifests are read
// only for the figures a Config needs. exactBytes is false when the
// manifests' file sizes legitimately differ from the summaries'.
func checkManifestFallback(t *testing.T, tbl *table.Table, exactBytes bool) {
	t.Helper()
	ctx := context.Background()
	full := mustCount(t, tbl, State{}, allFigures)
	if c := mustCount(t, tbl, State{}, Config{CommitCount: 1, DataFileCount: 1, DeleteFileCount: 1}); c.ManifestsRead != 0 {
		t.Fatalf("summaries with file counts: %d manifests read", c.ManifestsRead)
	}
	meta := stripped{tbl.Metadata()}

	got, err := count(ctx, meta, State{}, Config{CommitCount: 5, Interval: time.Hour}, noIO(t))
	if err != nil {
		t.Fatal(err)
	}
	if got.Commits != full.Commits || got.ManifestsRead != 0 {
		t.Fatalf("commit_count only: %+v, want %d commits and no manifest read", got, full.Commits)
	}

	got, err = count(ctx, meta, State{}, Config{DataFileCount: 1, DeleteFileCount: 1}, tbl.FS)
	if err != nil {
		t.Fatal(err)
	}
	if got.DataFiles != full.DataFiles || got.DeleteFiles != full.DeleteFiles {
		t.Fatalf("file counts from manifests: %+v, summaries say %+v", got, full)
	}
	if got.ManifestsRead == 0 || got.ManifestsRead > full.Commits {
		t.Fatalf("file counts read %d files; the manifest lists (at most %d) should do", got.ManifestsRead, full.Commits)
	}
	lists := got.ManifestsRead

	got, err = count(ctx, meta, State{}, allFigures, tbl.FS)
	if err != nil {
		t.Fatal(err)
	}
	if got.ManifestsRead <= lists {
		t.Fatalf("bytes read %d files, want the manifests beyond %d lists", got.ManifestsRead, lists)
	}
	got.ManifestsRead, full.ManifestsRead = 0, 0
	if !exactBytes {
		got.DataBytes = full.DataBytes
	}
	if got != full {
		t.Fatalf("all figures from manifests: %+v, summaries say %+v", got, full)
	}
}

func TestCountReadsManifestsOnlyWhenSummariesLackFigures(t *testing.T) {
	w := newWriter(t, 2, 3)
	w.tagged()
	w.append(2)
	checkManifestFallback(t, w.tbl, true)
}

// Tables written by other engines: Flink upserts (data + equality deletes
// per commit), Impala/Spark position deletes followed by a Spark
// rewrite_data_files (replace), Spark deletion vectors.
func TestCountFixtures(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Counters
		// exactBytes: the relocated fixture's manifests keep the sizes its
		// summaries give. Relocation rewrites the paths inside position
		// delete files, which changes their size in the manifests only.
		exactBytes bool
	}{
		{"flink_v2_eqdel_partitioned", Counters{Commits: 4, DataFiles: 4, DeleteFiles: 4, DataBytes: 6327, FromCreation: true}, true},
		{"spark_v2_rewrite_dangling_posdel", Counters{Commits: 3, DataFiles: 2, DeleteFiles: 2, DataBytes: 670 + 2276 + 1651, FromCreation: true}, false},
		{"spark_v3_deletion_vectors", Counters{Commits: 2, DataFiles: 5, DeleteFiles: 2, DataBytes: 1960 + 84, FromCreation: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, tbl, _ := testenv.FixtureTable(t, tc.name)
			if got := mustCount(t, tbl, State{}, allFigures); got != tc.want {
				t.Fatalf("count: %+v, want %+v", got, tc.want)
			}
			checkManifestFallback(t, tbl, tc.exactBytes)
		})
	}
}

// Spark 0.x (2020) wrote no added-files-size: bytes come from the manifests,
// and only when a data_file_bytes threshold asks for them.
func TestCountFixtureWithoutSizesInSummary(t *testing.T) {
	_, tbl, _ := testenv.FixtureTable(t, "spark_v1_unpartitioned_20files")
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, tk := range tasks {
		bytes += tk.File.FileSizeBytes()
	}
	got := mustCount(t, tbl, State{}, Config{CommitCount: 1, DataFileCount: 1})
	if got.Commits != 1 || got.DataFiles != 20 || got.DataBytes != 0 || got.ManifestsRead != 0 {
		t.Fatalf("without a bytes threshold: %+v, want 1 commit, 20 files and no manifest read", got)
	}
	got = mustCount(t, tbl, State{}, Config{DataFileBytes: 1})
	if got.DataBytes != bytes || got.DataFiles != 20 || got.ManifestsRead == 0 {
		t.Fatalf("with a bytes threshold: %+v, want %d bytes read from manifests", got, bytes)
	}
}

// failingIO wraps the real IO and fails every open of a path containing
// a marker: failure injection on the real thing.
type failingIO struct {
	iceio.IO
	fail func(name string) bool
}

func (f failingIO) Open(name string) (iceio.File, error) {
	if f.fail(name) {
		return nil, fmt.Errorf("injected failure opening %s", name)
	}
	return f.IO.Open(name)
}

func TestCountManifestReadErrors(t *testing.T) {
	w := newWriter(t, 2, 2)
	ctx := context.Background()
	fs, err := w.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	meta := stripped{w.tbl.Metadata()}
	open := func(fail func(string) bool) func(context.Context) (iceio.IO, error) {
		return func(context.Context) (iceio.IO, error) { return failingIO{fs, fail}, nil }
	}
	isList := func(p string) bool { return strings.Contains(filepath.Base(p), "snap-") }
	isManifest := func(p string) bool { return strings.HasSuffix(p, ".avro") && !isList(p) }
	_, err = count(ctx, meta, State{}, Config{DataFileCount: 1}, open(isList))
	if err == nil || !strings.Contains(err.Error(), "read manifest list of snapshot") || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("manifest list failure: %v", err)
	}
	_, err = count(ctx, meta, State{}, Config{DataFileBytes: 1}, open(isManifest))
	if err == nil || !strings.Contains(err.Error(), "read manifest ") || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("manifest failure: %v", err)
	}
	_, err = count(ctx, meta, State{}, Config{DataFileBytes: 1}, func(context.Context) (iceio.IO, error) {
		return nil, io.ErrUnexpectedEOF
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "open table IO") {
		t.Fatalf("IO failure: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := count(cctx, meta, State{}, Config{DataFileBytes: 1}, open(func(string) bool { return false })); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled count: %v", err)
	}
}

func TestSummaryFigures(t *testing.T) {
	sum := func(p map[string]string) *table.Summary {
		return &table.Summary{Operation: table.OpAppend, Properties: p}
	}
	for _, tc := range []struct {
		name string
		s    *table.Summary
		want figures
	}{
		{"nil summary", nil, figures{}},
		{"no metrics", sum(map[string]string{"spark.app.id": "x"}), figures{}},
		{"complete", sum(map[string]string{"added-data-files": "3", "added-delete-files": "2", "added-files-size": "100", "total-records": "9"}),
			figures{3, 2, 100, true, true, true}},
		{"zeros omitted", sum(map[string]string{"total-data-files": "4", "deleted-data-files": "1"}),
			figures{0, 0, 0, true, true, true}},
		{"delete kinds apart", sum(map[string]string{"added-position-delete-files": "2", "added-equality-delete-files": "1", "added-dvs": "4", "added-files-size": "7"}),
			figures{0, 7, 7, true, true, true}},
		{"files without size", sum(map[string]string{"added-data-files": "2", "total-data-files": "2"}),
			figures{2, 0, 0, true, true, false}},
		{"malformed", sum(map[string]string{"added-data-files": "x", "added-delete-files": "-1", "added-files-size": "1e3"}),
			figures{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summaryFigures(tc.s); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	w := newWriter(t, 2, 3)
	ctx := context.Background()
	now := time.Now()
	cfg := Config{CommitCount: 2, RateLimit: time.Hour}

	d, err := Evaluate(ctx, w.tbl, State{}, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Due || d.Counters.Commits != 3 || d.Reason != "due: 3 commits since creation (commit_count 2)" {
		t.Fatalf("never run: %+v", d)
	}

	st := Record(State{}, MarkOf(w.tbl.Metadata()), now.Add(-time.Minute), "succeeded", nil, true)
	w.append(2)
	d, err = Evaluate(ctx, w.tbl, st, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if d.Due || d.Counters != (Counters{}) || d.Reason != "not due: rate limited, last attempt 1m ago (rate_limit 1h)" {
		t.Fatalf("rate limited (and not counted): %+v", d)
	}
	d, err = Evaluate(ctx, w.tbl, st, cfg, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Due || d.Counters.Commits != 2 || d.Reason != "due: 2 commits since last run (commit_count 2)" {
		t.Fatalf("after the rate limit: %+v", d)
	}
}

// Failed deletes kept for this table make its task due; a list that another
// table of the same name (another UUID) left does not.
func TestEvaluateRetryListOfThisTableOnly(t *testing.T) {
	w := newWriter(t, 2, 1)
	ctx := context.Background()
	now := time.Now()
	cfg := Config{CommitCount: 10}
	st := Record(State{}, MarkOf(w.tbl.Metadata()), now.Add(-time.Minute), "failed", nil, true)
	st.Retry = NewRetry(w.tbl.Metadata().TableUUID().String(), []string{"s3://b/t/a.parquet"})
	d, err := Evaluate(ctx, w.tbl, st, cfg, now)
	if err != nil || !d.Due || d.Reason != "due: 1 failed delete to retry" {
		t.Fatalf("own list: %+v (%v)", d, err)
	}
	st.Retry = NewRetry("00000000-0000-0000-0000-000000000001", []string{"s3://b/t/a.parquet"})
	d, err = Evaluate(ctx, w.tbl, st, cfg, now)
	if err != nil || d.Due || d.Reason != "not due: 0/10 commits" {
		t.Fatalf("another table's list: %+v (%v)", d, err)
	}
}

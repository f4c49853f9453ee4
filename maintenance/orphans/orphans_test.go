package orphans

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// old and young are file ages relative to the injected now: old files are
// past the default 72h min age, young ones are not.
const (
	old   = 100 * time.Hour
	young = time.Hour
)

type localTable struct {
	cat   *sqlcat.Catalog
	tbl   *table.Table
	dir   string // local folder of the table location
	rows  int64
	sum   uint64
	files map[string]bool // every file of the table before anything was planted
	now   time.Time
}

// newLocalTable writes a generated table into a fresh SQLite catalog and
// makes every one of its files old, so that only references (not age)
// protect live files.
func newLocalTable(t *testing.T, appends, parts int) *localTable {
	t.Helper()
	cat, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: appends, RowsPerAppend: 50, Partitions: parts, Seed: 3})
	lt := &localTable{cat: cat, tbl: tbl, dir: localPath(t, tbl.Location()), now: time.Now()}
	lt.rows, lt.sum = checksum(t, tbl)
	lt.files = walkFiles(t, lt.dir)
	for f := range lt.files {
		age(t, f, lt.now, old)
	}
	return lt
}

func localPath(t testing.TB, location string) string {
	t.Helper()
	if !strings.HasPrefix(location, "file:") {
		return location
	}
	u, err := url.Parse(location)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}

func checksum(t *testing.T, tbl *table.Table) (int64, uint64) {
	t.Helper()
	rows, sum, err := gen.Checksum(context.Background(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	return rows, sum
}

func walkFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out[p] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func age(t *testing.T, path string, now time.Time, by time.Duration) {
	t.Helper()
	if err := os.Chtimes(path, now.Add(-by), now.Add(-by)); err != nil {
		t.Fatal(err)
	}
}

// plant writes a file of size bytes modified `ago` before now.
func plant(t *testing.T, path string, now time.Time, ago time.Duration) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("orphan "+path), 0o644); err != nil {
		t.Fatal(err)
	}
	age(t, path, now, ago)
	return path
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (lt *localTable) reload(t *testing.T) *table.Table {
	t.Helper()
	tbl, err := lt.cat.LoadTable(context.Background(), lt.tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// assertLiveIntact checks that every file the table had is still there and
// that the table reads the same rows.
func (lt *localTable) assertLiveIntact(t *testing.T) {
	t.Helper()
	for f := range lt.files {
		if !exists(f) {
			t.Errorf("live file deleted: %s", f)
		}
	}
	rows, sum := checksum(t, lt.reload(t))
	if rows != lt.rows || sum != lt.sum {
		t.Fatalf("table reads %d rows (checksum %x), had %d (%x)", rows, sum, lt.rows, lt.sum)
	}
}

func (lt *localTable) store(t *testing.T) Store {
	t.Helper()
	s, err := NewStore(context.Background(), lt.tbl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(IOStore); !ok {
		t.Fatalf("NewStore for %s: %T, want IOStore", lt.tbl.Location(), s)
	}
	return s
}

func candidatePaths(p *Plan) []string {
	out := make([]string, len(p.Candidates))
	for i, c := range p.Candidates {
		out[i] = c.Path
	}
	return out
}

func skippedReason(p *Plan, path string) string {
	for _, s := range p.Skipped {
		if s.Path == path {
			return s.Reason
		}
	}
	return ""
}

// ---------------------------------------------------------------------------

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	d := DefaultConfig()
	if d.MinAge != 72*time.Hour || d.PrefixMismatch != "error" || d.EqualSchemes["s3a"] != "s3" || d.EqualSchemes["s3n"] != "s3" {
		t.Fatalf("defaults: %+v", d)
	}
	cases := []struct {
		name   string
		edit   func(*Config)
		fields []string
	}{
		{"min age under a day", func(c *Config) { c.MinAge = 23 * time.Hour }, []string{"min_age"}},
		{"min age exactly a day", func(c *Config) { c.MinAge = 24 * time.Hour }, nil},
		{"negative min age", func(c *Config) { c.MinAge = -time.Hour }, []string{"min_age"}},
		{"comma keys", func(c *Config) { c.EqualSchemes = map[string]string{"s3a,s3n": "s3"} }, nil},
		{"conflicting schemes", func(c *Config) {
			c.EqualSchemes = map[string]string{"s3a,s3n": "s3", "s3a": "gs"}
		}, []string{"equal_schemes"}},
		{"empty authority", func(c *Config) { c.EqualAuthorities = map[string]string{"": "b"} }, []string{"equal_authorities"}},
		{"bad mode", func(c *Config) { c.PrefixMismatch = "skip" }, []string{"prefix_mismatch"}},
		{"escaping location", func(c *Config) { c.Location = "data/../../other" }, []string{"location"}},
		{"everything wrong at once", func(c *Config) {
			c.MinAge = time.Hour
			c.PrefixMismatch = ""
			c.ListConcurrency = 0
			c.DeleteConcurrency = 100
		}, []string{"min_age", "prefix_mismatch", "list_concurrency", "delete_concurrency"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			before := fmt.Sprint(c)
			err := c.Validate()
			if fmt.Sprint(c) != before {
				t.Fatal("Validate changed the config")
			}
			var got []string
			for _, e := range joined(err) {
				var fe *validate.FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("not a FieldError: %v", e)
				}
				got = append(got, fe.Field)
			}
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("fields %v, want %v (err %v)", got, tc.fields, err)
			}
		})
	}
	// PlanTable refuses an invalid config before touching anything.
	c := DefaultConfig()
	c.MinAge = time.Hour
	if _, err := PlanTable(context.Background(), nil, nil, c, time.Now(), nil); err == nil || !strings.Contains(err.Error(), "min_age") {
		t.Fatalf("PlanTable with min_age 1h: %v", err)
	}
}

func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestRemovesOldOrphansKeepsYoungHiddenAndLiveFiles(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 12, 3)
	part := filepath.Dir(firstDataFile(t, lt))
	now := lt.now
	oldOrphans := []string{
		plant(t, filepath.Join(part, "00000-0-crashed-writer.parquet"), now, old),
		plant(t, filepath.Join(lt.dir, "data", "stray.parquet"), now, old),
		plant(t, filepath.Join(lt.dir, "metadata", "snap-1-1-lost.avro"), now, old),
		plant(t, filepath.Join(lt.dir, "metadata", "00099-lost.metadata.json"), now, old),
		plant(t, filepath.Join(lt.dir, "metadata", "x.avro_tmp"), now, old),
		plant(t, filepath.Join(lt.dir, "junk.txt"), now, old),
	}
	youngOrphans := []string{
		plant(t, filepath.Join(part, "00000-1-in-flight.parquet"), now, young),
		plant(t, filepath.Join(lt.dir, "data", "just-under-min-age.parquet"), now, 71*time.Hour),
	}
	hidden := []string{
		plant(t, filepath.Join(lt.dir, "data", "_temporary", "0", "task", "x.parquet"), now, old),
		plant(t, filepath.Join(lt.dir, ".spark-staging", "y.parquet"), now, old),
		plant(t, filepath.Join(part, ".00000-0-crashed-writer.parquet.crc"), now, old),
		plant(t, filepath.Join(part, "_SUCCESS"), now, old),
		plant(t, filepath.Join(lt.dir, "data", "_c=1", "z.parquet"), now, old), // not a partition field of this table
	}

	cfg := DefaultConfig()
	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(oldOrphans))
	if got := candidatePaths(plan); !slices.Equal(got, want) {
		t.Fatalf("candidates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range plan.Candidates {
		if c.Age < old || c.Size == 0 || c.Modified.IsZero() {
			t.Fatalf("candidate %+v", c)
		}
	}
	for _, p := range youngOrphans {
		if r := skippedReason(plan, p); r != ReasonTooYoung {
			t.Errorf("%s skipped as %q, want %q", p, r, ReasonTooYoung)
		}
	}
	// Hidden folders are not even listed; hidden files are reported.
	for _, p := range []string{filepath.Join(lt.dir, "data", "_temporary"), filepath.Join(lt.dir, ".spark-staging"),
		hidden[2], hidden[3], filepath.Join(lt.dir, "data", "_c=1")} {
		if r := skippedReason(plan, p); r != ReasonHidden {
			t.Errorf("%s skipped as %q, want %q", p, r, ReasonHidden)
		}
	}
	if plan.ReferencedFiles != len(lt.files) {
		t.Errorf("plan saw %d referenced files, the table has %d", plan.ReferencedFiles, len(lt.files))
	}
	if plan.Snapshots != 12 || plan.Manifests != 12 || plan.ManifestLists != 12 {
		t.Errorf("plan read %d snapshots, %d lists, %d manifests; want 12 each", plan.Snapshots, plan.ManifestLists, plan.Manifests)
	}

	res, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesFound != len(oldOrphans) || res.FilesDeleted != len(oldOrphans) || res.BytesDeleted != plan.CandidateBytes() ||
		res.BytesFound != res.BytesDeleted || len(res.Failed) != 0 || len(res.NowReferenced) != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, p := range oldOrphans {
		if exists(p) {
			t.Errorf("old orphan kept: %s", p)
		}
	}
	for _, p := range append(youngOrphans, hidden...) {
		if !exists(p) {
			t.Errorf("deleted %s", p)
		}
	}
	lt.assertLiveIntact(t)

	// A second run finds nothing to delete.
	again, err := PlanTable(ctx, lt.reload(t), lt.store(t), cfg, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() || again.Reason != ReasonNothingToDelete {
		t.Fatalf("second plan: %v", candidatePaths(again))
	}
}

func firstDataFile(t *testing.T, lt *localTable) string {
	t.Helper()
	tasks, err := lt.tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return localPath(t, tasks[0].File.FilePath())
}

// TestFileCommittedBetweenPlanAndExecuteIsKept: a slow writer wrote a data
// file long ago and commits it after the plan listed it as an orphan.
func TestFileCommittedBetweenPlanAndExecuteIsKept(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 6, 2)
	src := firstDataFile(t, lt)
	slow := filepath.Join(filepath.Dir(src), "00000-9-slow-writer.parquet")
	copyFile(t, src, slow)
	age(t, slow, lt.now, old)
	other := plant(t, filepath.Join(lt.dir, "data", "real-orphan.parquet"), lt.now, old)

	cfg := DefaultConfig()
	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := candidatePaths(plan); !slices.Equal(got, []string{slow, other}) && !slices.Equal(got, []string{other, slow}) {
		t.Fatalf("candidates %v", got)
	}

	// The slow writer commits the file now.
	tx := lt.reload(t).NewTransaction()
	if err := tx.AddFiles(ctx, []string{gen.FileURI(slow)}, nil, false); err != nil {
		t.Fatal(err)
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantRows, _ := checksum(t, committed)

	// Execute gets the stale table and the stale plan.
	res, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NowReferenced) != 1 || localPath(t, res.NowReferenced[0]) != slow || res.FilesDeleted != 1 {
		t.Fatalf("result %+v", res)
	}
	if !exists(slow) || exists(other) {
		t.Fatalf("slow writer's file exists=%v, real orphan exists=%v", exists(slow), exists(other))
	}
	if rows, _ := checksum(t, lt.reload(t)); rows != wantRows || rows != lt.rows+50 {
		t.Fatalf("table reads %d rows, want %d", rows, wantRows)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// failingStore wraps a real store: its listing fails after failAfter files.
type failingStore struct {
	Store
	failAfter int
	deletes   int
}

func (s *failingStore) List(ctx context.Context, prefix string, opts ListOptions) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		n := 0
		for fi, err := range s.Store.List(ctx, prefix, opts) {
			if err == nil && n == s.failAfter {
				yield(FileInfo{}, errors.New("injected: connection reset while listing page 2"))
				return
			}
			n++
			if !yield(fi, err) {
				return
			}
		}
	}
}

func (s *failingStore) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	s.deletes++
	return s.Store.Delete(ctx, paths)
}

func TestAnyReadFailureDeletesNothing(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 6, 2)
	orphan := plant(t, filepath.Join(lt.dir, "data", "orphan.parquet"), lt.now, old)
	cfg := DefaultConfig()

	t.Run("listing", func(t *testing.T) {
		fs := &failingStore{Store: lt.store(t), failAfter: 5}
		plan, err := PlanTable(ctx, lt.tbl, fs, cfg, lt.now, nil)
		if !errors.Is(err, ErrListing) || plan != nil {
			t.Fatalf("plan returned: %v, err %v; want ErrListing", plan != nil, err)
		}
		if fs.deletes != 0 || !exists(orphan) {
			t.Fatal("deleted after a failed listing")
		}
	})

	t.Run("manifest at planning", func(t *testing.T) {
		m := someManifest(t, lt)
		hide(t, m, func() {
			_, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
			if !errors.Is(err, ErrMetadataRead) || !strings.Contains(err.Error(), filepath.Base(m)) {
				t.Fatalf("err %v; want ErrMetadataRead naming %s", err, m)
			}
		})
	})

	t.Run("manifest list at re-check", func(t *testing.T) {
		plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
		if err != nil || len(plan.Candidates) != 1 {
			t.Fatalf("plan err %v", err)
		}
		list := localPath(t, lt.tbl.CurrentSnapshot().ManifestList)
		hide(t, list, func() {
			fs := &failingStore{Store: lt.store(t), failAfter: -1}
			res, err := Execute(ctx, lt.cat, lt.tbl, fs, plan, cfg, Options{})
			if !errors.Is(err, ErrMetadataRead) || res.FilesDeleted != 0 || fs.deletes != 0 {
				t.Fatalf("res %+v err %v; want ErrMetadataRead and nothing deleted", res, err)
			}
		})
		if !exists(orphan) {
			t.Fatal("orphan deleted after a failed re-check")
		}
	})
	lt.assertLiveIntact(t)
}

func someManifest(t *testing.T, lt *localTable) string {
	t.Helper()
	fs, err := lt.tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := lt.tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	return localPath(t, ms[len(ms)/2].FilePath())
}

// hide moves path away while fn runs.
func hide(t *testing.T, path string, fn func()) {
	t.Helper()
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.Rename(path+".away", path); err != nil {
			t.Fatal(err)
		}
	}()
	fn()
}

func setProperty(t *testing.T, tbl *table.Table, key, value string) *table.Table {
	t.Helper()
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{key: value}); err != nil {
		t.Fatal(err)
	}
	out, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGCDisabledRefuses(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 3, 1)
	orphan := plant(t, filepath.Join(lt.dir, "data", "orphan.parquet"), lt.now, old)
	cfg := DefaultConfig()

	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil || len(plan.Candidates) != 1 {
		t.Fatalf("plan err %v", err)
	}
	// Switched off after planning: Execute sees it in the fresh metadata.
	off := setProperty(t, lt.reload(t), "gc.enabled", "false")
	res, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), plan, cfg, Options{})
	if !errors.Is(err, ErrGCDisabled) || res.FilesDeleted != 0 || !exists(orphan) {
		t.Fatalf("execute: res %+v err %v; want ErrGCDisabled, nothing deleted", res, err)
	}
	// Only a case-insensitive "true" enables GC (as Java reads it): "1" and
	// "t" refuse too, as expiry does.
	for _, v := range []string{"false", "no", "1", "t"} {
		tbl := setProperty(t, off, "gc.enabled", v)
		if _, err := PlanTable(ctx, tbl, lt.store(t), cfg, lt.now, nil); !errors.Is(err, ErrGCDisabled) {
			t.Fatalf("gc.enabled=%s: plan err %v; want ErrGCDisabled", v, err)
		}
	}
}

func TestLocationMustBeInsideTheTableAndNotShared(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 3, 1)
	dataOrphan := plant(t, filepath.Join(lt.dir, "data", "orphan.parquet"), lt.now, old)
	metaOrphan := plant(t, filepath.Join(lt.dir, "metadata", "orphan.avro"), lt.now, old)

	cfg := DefaultConfig()
	cfg.Location = "data" // relative to the table location
	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := candidatePaths(plan); !slices.Equal(got, []string{dataOrphan}) {
		t.Fatalf("candidates under data/: %v", got)
	}

	for _, loc := range []string{filepath.Dir(lt.dir), lt.dir + "-sibling", "file:///etc", "s3://bucket" + lt.dir} {
		cfg.Location = loc
		if _, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil); !errors.Is(err, ErrLocationOutsideTable) {
			t.Errorf("location %s: err %v; want ErrLocationOutsideTable", loc, err)
		}
	}

	// A real second table of the catalog whose location is inside this one.
	cfg.Location = ""
	nested := gen.FileURI(filepath.Join(lt.dir, "data", "nested"))
	if _, err := lt.cat.CreateTable(ctx, table.Identifier{"demo", "nested"}, gen.Schema(), catalog.WithLocation(nested)); err != nil {
		t.Fatal(err)
	}
	others, err := CatalogTableLocations(ctx, lt.cat, lt.tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(others, nested) || len(others) != 1 {
		t.Fatalf("other tables: %v", others)
	}
	if _, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, others); !errors.Is(err, ErrSharedLocation) {
		t.Fatalf("nested table: err %v; want ErrSharedLocation", err)
	}
	// The table inside another table's location refuses too.
	if _, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, []string{filepath.Dir(lt.dir)}); !errors.Is(err, ErrSharedLocation) {
		t.Fatalf("enclosing table: err %v; want ErrSharedLocation", err)
	}
	if !exists(dataOrphan) || !exists(metaOrphan) {
		t.Fatal("a refused plan deleted files")
	}
}

// TestCancelledRunDeletesNothingMore: a run cancelled (killed, lease lost)
// mid-way starts no further batch; one cancelled before Execute deletes
// nothing.
func TestCancelledRunDeletesNothingMore(t *testing.T) {
	lt := newLocalTable(t, 3, 1)
	var orphans []string
	for i := range 250 {
		orphans = append(orphans, plant(t, filepath.Join(lt.dir, "data", "junk", fmt.Sprintf("%04d.parquet", i)), lt.now, old))
	}
	cfg := DefaultConfig()
	cfg.DeleteConcurrency = 1
	plan, err := PlanTable(context.Background(), lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil || len(plan.Candidates) != 250 {
		t.Fatalf("plan err %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), plan, cfg, Options{BatchSize: 10})
	if !errors.Is(err, context.Canceled) || res.FilesDeleted != 0 || res.NotAttempted != 250 {
		t.Fatalf("pre-cancelled: res %+v err %v", res, err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	opts := Options{BatchSize: 10, beforeDelete: func(batch int) {
		if batch == 3 {
			cancel() // killed while batches 0-2 are done
		}
	}}
	// A store that ignores the context: Execute itself must stop.
	store := &ctxBlindStore{Store: lt.store(t)}
	res, err = Execute(ctx, lt.cat, lt.tbl, store, plan, cfg, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v; want context.Canceled", err)
	}
	left := 0
	for _, p := range orphans {
		if exists(p) {
			left++
		}
	}
	if res.FilesDeleted != 30 || res.NotAttempted != 220 || left != 220 || store.calls != 3 {
		t.Fatalf("deleted %d in %d calls, not attempted %d, %d left; want 30 in 3, 220, 220", res.FilesDeleted, store.calls, res.NotAttempted, left)
	}
	lt.assertLiveIntact(t)
}

// ctxBlindStore deletes whatever its context says.
type ctxBlindStore struct {
	Store
	calls int
}

func (s *ctxBlindStore) Delete(_ context.Context, paths []string) ([]string, map[string]error) {
	s.calls++
	return s.Store.Delete(context.Background(), paths)
}

// TestExecuteRefusesForeignPlan: Execute only deletes what a plan of this
// table could hold.
func TestExecuteRefusesForeignPlan(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 3, 1)
	outside := plant(t, filepath.Join(t.TempDir(), "precious.txt"), lt.now, old)
	hiddenFile := plant(t, filepath.Join(lt.dir, "data", "_temporary", "x.parquet"), lt.now, old)
	cfg := DefaultConfig()
	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{outside, hiddenFile} {
		bad := *plan
		bad.Candidates = []Candidate{{Path: p, Size: 1, Modified: lt.now.Add(-old)}}
		if _, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), &bad, cfg, Options{}); !errors.Is(err, ErrInvalidPlan) {
			t.Fatalf("%s: err %v; want ErrInvalidPlan", p, err)
		}
		if !exists(p) {
			t.Fatalf("deleted %s", p)
		}
	}
	// A candidate younger than the plan's cutoff (min_age) is refused at
	// delete time too, whatever the plan says.
	young := plant(t, filepath.Join(lt.dir, "data", "young.parquet"), lt.now, time.Minute)
	youngPlan := *plan
	youngPlan.Candidates = []Candidate{{Path: young, Size: 1, Modified: lt.now.Add(-time.Minute)}}
	if _, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), &youngPlan, cfg, Options{}); !errors.Is(err, ErrInvalidPlan) || !exists(young) {
		t.Fatalf("young candidate: err %v, still there %v; want ErrInvalidPlan and the file kept", err, exists(young))
	}
	// A live file smuggled into a plan is caught by the re-check.
	live := firstDataFile(t, lt)
	bad := *plan
	bad.Candidates = []Candidate{{Path: live, Size: 1, Modified: lt.now.Add(-old)}}
	res, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), &bad, cfg, Options{})
	if err != nil || len(res.NowReferenced) != 1 || res.FilesDeleted != 0 {
		t.Fatalf("live candidate: res %+v err %v", res, err)
	}
	lt.assertLiveIntact(t)
}

func TestDisabledPlansNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Enabled = false
	lt := newLocalTable(t, 1, 1)
	plan, err := PlanTable(context.Background(), lt.tbl, nil, cfg, lt.now, nil)
	if err != nil || !plan.Empty() || plan.Reason != ReasonDisabled {
		t.Fatalf("plan %+v err %v", plan, err)
	}
}

package orphans

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/internal/testenv/avrofile"
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

func (lt *localTable) store(t *testing.T) objstore.Store {
	t.Helper()
	s, err := objstore.NewStore(context.Background(), lt.tbl, objstore.S3{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(objstore.IOStore); !ok {
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
	objstore.Store
	failAfter int
	deletes   int
}

func (s *failingStore) List(ctx context.Context, prefix string, opts objstore.ListOptions) iter.Seq2[objstore.FileInfo, error] {
	return func(yield func(objstore.FileInfo, error) bool) {
		n := 0
		for fi, err := range s.Store.List(ctx, prefix, opts) {
			if err == nil && n == s.failAfter {
				yield(objstore.FileInfo{}, errors.New("injected: connection reset while listing page 2"))
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

	// Without manifest_length the manifests' sizes cannot be checked, and a
	// manifest cut at a block boundary would read as a shorter valid one.
	t.Run("manifest list without manifest_length", func(t *testing.T) {
		list := localPath(t, lt.tbl.CurrentSnapshot().ManifestList)
		orig, err := os.ReadFile(list)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.WriteFile(list, orig, 0o644) })
		f, err := avrofile.Read(list)
		if err != nil {
			t.Fatal(err)
		}
		var schema map[string]any
		if err := json.Unmarshal(f.Meta["avro.schema"], &schema); err != nil {
			t.Fatal(err)
		}
		fields := schema["fields"].([]any)
		schema["fields"] = slices.DeleteFunc(fields, func(f any) bool { return f.(map[string]any)["name"] == "manifest_length" })
		if len(schema["fields"].([]any)) == len(fields) {
			t.Fatal("the list has no manifest_length field to drop")
		}
		if f.Meta["avro.schema"], err = json.Marshal(schema); err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Records {
			delete(r, "manifest_length")
		}
		if _, err := f.Write(list, [16]byte{1}); err != nil {
			t.Fatal(err)
		}
		_, err = PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
		if !errors.Is(err, ErrMetadataRead) || !strings.Contains(err.Error(), "manifest_length") {
			t.Fatalf("err %v; want ErrMetadataRead naming manifest_length", err)
		}
		if !exists(orphan) {
			t.Fatal("deleted while the list could not be checked")
		}
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
	nb, err := NewListing(lt.cat, nil, 0, nil).Neighbours(ctx, lt.tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	others := nb.Locations
	if !slices.Contains(others, nested) || len(others) != 1 || len(nb.Unloadable) != 0 {
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
	objstore.Store
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

// ---------------------------------------------------------------------------
// Writers committing while orphan removal deletes.

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

// slowWriterPlan plans orphan removal on a new table holding two old
// candidates: a slow writer's file (not committed yet) and a real orphan.
func slowWriterPlan(t *testing.T, appends, parts int) (lt *localTable, slow, other string, plan *Plan, cfg Config) {
	t.Helper()
	lt = newLocalTable(t, appends, parts)
	slow = slowWriterFile(t, lt, "00000-9-slow-writer.parquet")
	other = plant(t, filepath.Join(lt.dir, "data", "real-orphan.parquet"), lt.now, old)
	cfg = DefaultConfig()
	plan, err := PlanTable(context.Background(), lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Candidates) != 2 {
		t.Fatalf("candidates %v", candidatePaths(plan))
	}
	return lt, slow, other, plan, cfg
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
	lt, slow, other, plan, cfg := slowWriterPlan(t, 6, 2)
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

// TestGCDisabledBetweenBatchesStops: gc.enabled=false set while batches
// run stops the batches not yet deleted.
func TestGCDisabledBetweenBatchesStops(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 3, 1)
	for i := range 12 {
		plant(t, filepath.Join(lt.dir, "data", "junk", fmt.Sprintf("%04d.parquet", i)), lt.now, old)
	}
	cfg := DefaultConfig()
	cfg.DeleteConcurrency = 1
	plan, err := PlanTable(ctx, lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{BatchSize: 4, beforeDelete: func(i int) {
		if i == 1 {
			setProperty(t, lt.reload(t), propertyGCEnabled, "false")
		}
	}}
	res, err := Execute(ctx, lt.cat, lt.tbl, lt.store(t), plan, cfg, opts)
	if !errors.Is(err, ErrGCDisabled) {
		t.Fatalf("err %v; want ErrGCDisabled", err)
	}
	if res.FilesDeleted != 4 || res.NotAttempted != 8 || res.DeleteBatches != 1 {
		t.Fatalf("result %+v; want 4 deleted in 1 batch, 8 not attempted", res)
	}
	lt.assertLiveIntact(t)
}

// committingStore makes the writer's commit land in the last moment: after
// the catch-up before the batch and before the delete itself.
type committingStore struct {
	objstore.Store
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
	lt, slow, other, plan, cfg := slowWriterPlan(t, 4, 1)
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
// in small batches. A file whose commit returned before Execute's last
// re-load started, or before its delete, is either kept or named in
// DeletedReferenced with the run failed; never silently lost. (A commit in flight while its file is
// deleted cannot be kept: that is what min_age is for.)
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
		for i := range 8 { // deleted first: the writer's files sort after
			plant(t, filepath.Join(lt.dir, "data", "a-junk", fmt.Sprintf("r%02d-%d.bin", round, i)), lt.now, old)
		}
		tbl := lt.reload(t)
		plan, err := PlanTable(ctx, tbl, lt.store(t), cfg, lt.now, nil)
		if err != nil {
			t.Fatal(err)
		}

		loads := &countingLoader{TableLoader: lt.cat}
		var mu sync.Mutex
		seen := map[string]int64{} // committed file: re-loads started before its commit returned
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range files {
				if err := commitFile(ctx, lt, p); err != nil {
					continue // deleted before the writer read it
				}
				mu.Lock()
				seen[p] = loads.started.Load()
				mu.Unlock()
			}
		}()
		// A file handed to Delete after its commit returned: the check
		// after the deletes must see that commit.
		late := map[string]bool{}
		store := &watchedStore{Store: lt.store(t), onDelete: func(paths []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range paths {
				if _, ok := seen[p]; ok {
					late[p] = true
				}
			}
		}}
		res, err := Execute(ctx, loads, tbl, store, plan, cfg, Options{BatchSize: 1})
		wg.Wait()
		if err != nil && !errors.Is(err, ErrDeletedReferenced) {
			t.Fatalf("round %d: %v", round, err)
		}
		if (err != nil) != (len(res.DeletedReferenced) > 0) {
			t.Fatalf("round %d: err %v with deleted_referenced %v", round, err, res.DeletedReferenced)
		}
		for p, started := range seen {
			// A re-load that started after the commit returned sees it; the
			// last re-load of Execute is its check after the deletes.
			before := started < loads.started.Load() || late[p]
			switch {
			case exists(p):
			case slices.Contains(res.DeletedReferenced, p):
				t.Logf("round %d: %s deleted while its commit was in flight; reported", round, p)
				copyFile(t, src, p)
			case before:
				t.Fatalf("round %d: %s committed before the last re-load, deleted and not reported (result %+v)", round, p, res)
			default:
				t.Logf("round %d: %s committed after the last re-load started, while it was deleted", round, p)
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

// watchedStore tells onDelete which paths it is about to delete, and takes
// as long as a request to a remote store.
type watchedStore struct {
	objstore.Store
	onDelete func([]string)
}

func (s *watchedStore) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	s.onDelete(paths)
	time.Sleep(2 * time.Millisecond) // a remote store's latency
	return s.Store.Delete(ctx, paths)
}

// countingLoader counts the re-loads started.
type countingLoader struct {
	TableLoader
	started atomic.Int64
}

func (l *countingLoader) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	l.started.Add(1)
	return l.TableLoader.LoadTable(ctx, ident)
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

// cancellingLoader cancels the run right after its armed load returns, so
// the walk of what that load brought fails with the cancellation.
type cancellingLoader struct {
	TableLoader
	armed  atomic.Bool
	cancel context.CancelFunc
}

func (l *cancellingLoader) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := l.TableLoader.LoadTable(ctx, ident)
	if l.armed.CompareAndSwap(true, false) {
		l.cancel()
	}
	return tbl, err
}

// A run cancelled while catching up with a commit still checks the files it
// deleted before: the check after the deletes walks the metadata again
// rather than returning the cancelled walk's error.
func TestCancelledCatchUpStillChecksTheDeletedFiles(t *testing.T) {
	lt := newLocalTable(t, 4, 2)
	var junk []string
	for i := range 3 {
		junk = append(junk, plant(t, filepath.Join(lt.dir, "data", "a-junk", fmt.Sprintf("%04d.parquet", i)), lt.now, old))
	}
	slow := slowWriterFile(t, lt, "zz-slow-writer.parquet")
	cfg := DefaultConfig()
	cfg.DeleteConcurrency = 1
	plan, err := PlanTable(context.Background(), lt.tbl, lt.store(t), cfg, lt.now, nil)
	if err != nil || len(plan.Candidates) != 4 {
		t.Fatalf("plan %v, err %v", candidatePaths(plan), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loader := &cancellingLoader{TableLoader: lt.cat, cancel: cancel}
	opts := Options{BatchSize: 1, beforeDelete: func(i int) {
		if i == 1 { // after one junk file went: a commit, then the cancel
			if err := commitFile(context.Background(), lt, slow); err != nil {
				t.Error(err)
			}
			loader.armed.Store(true)
		}
	}}
	res, err := Execute(ctx, loader, lt.tbl, lt.store(t), plan, cfg, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v; want the cancellation", err)
	}
	if strings.Contains(err.Error(), "check the deleted files") {
		t.Fatalf("the deleted files were not checked: %v", err)
	}
	if res.FilesDeleted != 1 || exists(junk[0]) || !exists(slow) || len(res.DeletedReferenced) != 0 {
		t.Fatalf("result %+v; want one junk file deleted and checked, the committed file kept", res)
	}
	lt.assertLiveIntactPlus(t, 50)
}

package metacommit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"

	"github.com/iceberg-maintainer/maintainer/internal/commitconflict"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/sqlcatalog"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
)

type fixture struct {
	cat   *sqlcat.Catalog
	rows  *sqlcatalog.Rows
	ident table.Identifier
	dir   string // the table's metadata folder
}

func newFixture(t *testing.T, props iceberg.Properties) *fixture {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "catalog.db")
	cat, err := gen.OpenSQLiteCatalog(t.Context(), "prod", db, filepath.Join(dir, "warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	opt := gen.Options{Appends: 2, RowsPerAppend: 10, Properties: map[string]string(props)}
	tbl, err := gen.Create(t.Context(), cat, opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Append(t.Context(), tbl, opt, 2, 0); err != nil {
		t.Fatal(err)
	}
	rows, err := sqlcatalog.Open(sqliteshim.ShimName, "sqlite", sqliteuri.DSN(db), "prod")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rows.Close() })
	u, err := url.Parse(tbl.MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{cat: cat, rows: rows, ident: tbl.Identifier(), dir: filepath.Dir(u.Path)}
}

func (f *fixture) load(t *testing.T) *table.Table {
	t.Helper()
	tbl, err := f.cat.LoadTable(t.Context(), f.ident)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// metadataFiles are the metadata JSON files in the table's folder.
func (f *fixture) metadataFiles(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".metadata.json") {
			out = append(out, e.Name())
		}
	}
	return out
}

func setProp(k, v string) []table.Update {
	return []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{k: v})}
}

func mainIs(tbl *table.Table) table.Requirement {
	return table.AssertRefSnapshotID(table.MainBranch, &tbl.CurrentSnapshot().SnapshotID)
}

// A commit lands as the next version, read back by iceberg-go's catalog,
// with the base in the metadata log.
func TestCommitLands(t *testing.T) {
	f := newFixture(t, nil)
	base := f.load(t)
	meta, loc, err := Commit(t.Context(), f.rows, base, []table.Requirement{table.AssertTableUUID(base.Metadata().TableUUID()), mainIs(base)},
		setProp("maintainer.test", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if Version(loc) != Version(base.MetadataLocation())+1 || !strings.HasSuffix(loc, ".metadata.json") {
		t.Errorf("committed %s after %s, want the next version", loc, base.MetadataLocation())
	}
	got := f.load(t)
	if got.MetadataLocation() != loc || got.Properties()["maintainer.test"] != "1" || meta.Properties()["maintainer.test"] != "1" {
		t.Errorf("the catalog loads %s with %v, want %s with the property", got.MetadataLocation(), got.Properties(), loc)
	}
	var logged []string
	for e := range got.Metadata().PreviousFiles() {
		logged = append(logged, e.MetadataFile)
	}
	if !slices.Contains(logged, base.MetadataLocation()) {
		t.Errorf("metadata log %v lacks the base %s", logged, base.MetadataLocation())
	}
	if got.CurrentSnapshot().SnapshotID != base.CurrentSnapshot().SnapshotID {
		t.Error("the commit moved main")
	}
}

// An attempt on a base another writer has committed past is a conflict:
// nothing of it stays, neither the pointer nor its metadata file.
func TestLostSwapIsAConflictAndLeavesNoFile(t *testing.T) {
	f := newFixture(t, nil)
	base := f.load(t)
	if _, _, err := f.cat.CommitTable(t.Context(), f.ident, nil, setProp("other.writer", "1")); err != nil {
		t.Fatal(err)
	}
	winner := f.load(t)
	before := f.metadataFiles(t)
	_, _, err := Commit(t.Context(), f.rows, base, nil, setProp("maintainer.test", "1"))
	if !errors.Is(err, table.ErrCommitFailed) || !commitconflict.Is(err) {
		t.Fatalf("commit on a stale base: %v, want a conflict", err)
	}
	if !strings.Contains(err.Error(), base.MetadataLocation()) {
		t.Errorf("the conflict does not name the stale file: %v", err)
	}
	if after := f.metadataFiles(t); !slices.Equal(after, before) {
		t.Errorf("metadata files %v after the lost attempt, want %v", after, before)
	}
	if got := f.load(t); got.MetadataLocation() != winner.MetadataLocation() || got.Properties()["maintainer.test"] != "" {
		t.Errorf("the table is at %s %v, want the winner's %s", got.MetadataLocation(), got.Properties(), winner.MetadataLocation())
	}
}

// A requirement that fails on the base is a conflict too, before anything
// is written.
func TestFailedRequirementWritesNothing(t *testing.T) {
	f := newFixture(t, nil)
	base := f.load(t)
	before := f.metadataFiles(t)
	other := base.CurrentSnapshot().SnapshotID + 1
	_, _, err := Commit(t.Context(), f.rows, base, []table.Requirement{table.AssertRefSnapshotID(table.MainBranch, &other)},
		setProp("maintainer.test", "1"))
	if !commitconflict.Is(err) {
		t.Fatalf("failed requirement: %v, want a conflict", err)
	}
	if after := f.metadataFiles(t); !slices.Equal(after, before) {
		t.Errorf("metadata files %v, want %v", after, before)
	}
}

type brokenSwap struct{ err error }

func (b brokenSwap) SwapMetadataLocation(context.Context, table.Identifier, string, string) (bool, error) {
	return false, b.err
}

// A swap without an answer may have landed: it is never a conflict, and
// the file it may point at stays.
func TestUnansweredSwapKeepsItsFile(t *testing.T) {
	f := newFixture(t, nil)
	base := f.load(t)
	before := f.metadataFiles(t)
	_, _, err := Commit(t.Context(), brokenSwap{errors.New("connection reset by peer")}, base, nil, setProp("maintainer.test", "1"))
	if err == nil || commitconflict.Is(err) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("unanswered swap: %v, want an unknown outcome", err)
	}
	if after := f.metadataFiles(t); len(after) != len(before)+1 {
		t.Errorf("metadata files %v, want %v and the one the swap may have committed", after, before)
	}
}

// The table's metadata codec is kept: a gzip table's next file is
// gzip-named and -compressed, and iceberg-go reads it.
func TestCommitKeepsTheCodec(t *testing.T) {
	f := newFixture(t, iceberg.Properties{table.MetadataCompressionKey: table.MetadataCompressionCodecGzip})
	base := f.load(t)
	_, loc, err := Commit(t.Context(), f.rows, base, nil, setProp("maintainer.test", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(loc, ".gz.metadata.json") {
		t.Errorf("committed %s on a gzip table", loc)
	}
	if got := f.load(t); got.MetadataLocation() != loc || got.Properties()["maintainer.test"] != "1" {
		t.Errorf("iceberg-go loads %s %v, want %s", got.MetadataLocation(), got.Properties(), loc)
	}
}

// failingIO fails every write after its first bytes.
type failingIO struct{ iceio.WriteFileIO }

type failingFile struct{ iceio.FileWriter }

func (failingIO) wrap(w iceio.FileWriter) iceio.FileWriter { return failingFile{w} }

func (f failingIO) Create(name string) (iceio.FileWriter, error) {
	w, err := f.WriteFileIO.Create(name)
	if err != nil {
		return nil, err
	}
	return f.wrap(w), nil
}

func (f failingFile) Write(p []byte) (int, error) {
	n, _ := f.FileWriter.Write(p[:min(len(p), 10)])
	return n, errors.New("disk full")
}

func (f failingFile) ReadFrom(r io.Reader) (int64, error) { return io.Copy(struct{ io.Writer }{f}, r) }

// A write that fails leaves no partial file and no commit, and says which
// file it was.
func TestFailedWriteLeavesNothing(t *testing.T) {
	f := newFixture(t, nil)
	base := f.load(t)
	fsys, err := base.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	broken := table.New(base.Identifier(), base.Metadata(), base.MetadataLocation(),
		func(context.Context) (iceio.IO, error) { return failingIO{fsys.(iceio.WriteFileIO)}, nil }, f.cat)
	before := f.metadataFiles(t)
	_, _, err = Commit(t.Context(), f.rows, broken, nil, setProp("maintainer.test", "1"))
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "write metadata file") {
		t.Fatalf("failed write: %v", err)
	}
	if after := f.metadataFiles(t); !slices.Equal(after, before) {
		t.Errorf("metadata files %v, want %v", after, before)
	}
	if got := f.load(t); got.MetadataLocation() != base.MetadataLocation() {
		t.Errorf("the table moved to %s", got.MetadataLocation())
	}
}

// A base whose file carries no version cannot be followed: nothing is
// written, and the caller commits through the catalog.
func TestUnnumberedBase(t *testing.T) {
	f := newFixture(t, nil)
	base := f.load(t)
	odd := table.New(base.Identifier(), base.Metadata(), strings.TrimSuffix(base.MetadataLocation(), filepath.Base(base.MetadataLocation()))+"current.json",
		base.FS, f.cat)
	before := f.metadataFiles(t)
	if _, _, err := Commit(t.Context(), f.rows, odd, nil, setProp("maintainer.test", "1")); !errors.Is(err, ErrUnnumbered) {
		t.Fatalf("unnumbered base: %v, want ErrUnnumbered", err)
	}
	if after := f.metadataFiles(t); !slices.Equal(after, before) {
		t.Errorf("metadata files %v, want %v", after, before)
	}
}

func TestVersion(t *testing.T) {
	for loc, want := range map[string]int{
		"s3://b/t/metadata/00012-0d6c3ab4-54f2-4f5e-a1a5-c8f2e6f3d7a1.metadata.json":    12,
		"s3://b/t/metadata/00003-0d6c3ab4-54f2-4f5e-a1a5-c8f2e6f3d7a1.gz.metadata.json": 3,
		"file:///t/metadata/123456-0d6c3ab4-54f2-4f5e-a1a5-c8f2e6f3d7a1.metadata.json":  123456,
		"hdfs://n/t/metadata/v7.metadata.json":                                          7,
		"hdfs://n/t/metadata/v7.gz.metadata.json":                                       7,
		"s3://b/t/metadata/current.json":                                                -1,
		"s3://b/t/metadata/00012-not-a-uuid.metadata.json":                              -1,
		"s3://b/t/metadata/": -1,
		"s3://b/t/metadata/00012-0d6c3ab4-54f2-4f5e-a1a5-c8f2e6f3d7a1.metadata.json.tmp": -1,
	} {
		if got := Version(loc); got != want {
			t.Errorf("Version(%q) = %d, want %d", loc, got, want)
		}
	}
}

// With write.metadata.delete-after-commit.enabled, each commit's dropped
// log entries are removed: the folder holds the current file and the log,
// nothing more; without it nothing is removed.
func TestRemoveDropped(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		t.Run(fmt.Sprintf("enabled=%v", enabled), func(t *testing.T) {
			f := newFixture(t, iceberg.Properties{table.MetadataDeleteAfterCommitEnabledKey: strconv.FormatBool(enabled),
				table.MetadataPreviousVersionsMaxKey: "2"})
			for i := range 4 {
				base := f.load(t)
				meta, _, err := Commit(t.Context(), f.rows, base, nil, setProp("maintainer.test", strconv.Itoa(i)))
				if err != nil {
					t.Fatal(err)
				}
				fsys, err := base.FS(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				var logs bytes.Buffer
				log := slog.New(slog.NewTextHandler(&logs, nil))
				if n := RemoveDropped(t.Context(), fsys, base.Metadata(), meta, log); (n > 0) != enabled || logs.Len() > 0 {
					t.Fatalf("commit %d: removed %d; log: %s", i, n, logs.String())
				}
				// Again: the files are gone, which is no failure.
				if n := RemoveDropped(t.Context(), fsys, base.Metadata(), meta, log); n != 0 || logs.Len() > 0 {
					t.Fatalf("removing again: %d; log: %s", n, logs.String())
				}
			}
			tbl := f.load(t)
			want := []string{path.Base(tbl.MetadataLocation())}
			for e := range tbl.Metadata().PreviousFiles() {
				want = append(want, path.Base(e.MetadataFile))
			}
			got := f.metadataFiles(t)
			slices.Sort(want)
			if enabled && !slices.Equal(got, want) {
				t.Errorf("metadata files %v, want the current one and the log: %v", got, want)
			}
			if !enabled && len(got) <= len(want) {
				t.Errorf("metadata files %v: removed without the property", got)
			}
		})
	}
}

// A lost lease deletes nothing more: with its context ended RemoveDropped
// removes no file and says so; the next commit's removal takes them.
func TestRemoveDroppedStopsWithItsContext(t *testing.T) {
	f := newFixture(t, iceberg.Properties{table.MetadataDeleteAfterCommitEnabledKey: "true", table.MetadataPreviousVersionsMaxKey: "1"})
	base := f.load(t)
	meta, _, err := Commit(t.Context(), f.rows, base, nil, setProp("maintainer.test", "1"))
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := base.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before := f.metadataFiles(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var logs bytes.Buffer
	if n := RemoveDropped(ctx, fsys, base.Metadata(), meta, slog.New(slog.NewTextHandler(&logs, nil))); n != 0 {
		t.Fatalf("removed %d files after the context ended", n)
	}
	if after := f.metadataFiles(t); !slices.Equal(after, before) {
		t.Errorf("metadata files %v, want %v", after, before)
	}
	if !strings.Contains(logs.String(), "stopped before removing") {
		t.Errorf("log does not say the removal stopped: %s", logs.String())
	}
	if n := RemoveDropped(t.Context(), fsys, base.Metadata(), meta, slog.New(slog.DiscardHandler)); n == 0 {
		t.Error("nothing to remove with a live context: the test removes nothing either way")
	}
}

// A commit whose context ends before its compare-and-set (a lease lost
// while the metadata file was written) sends nothing: ErrNotSent, no
// conflict, no file left, the table where it was.
func TestCommitStopsBeforeTheSwap(t *testing.T) {
	f := newFixture(t, nil)
	base := f.load(t)
	before := f.metadataFiles(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sw := countingSwap{Swapper: f.rows}
	_, _, err := Commit(ctx, &sw, base, nil, setProp("maintainer.test", "1"))
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, context.Canceled) || commitconflict.Is(err) {
		t.Fatalf("commit with an ended context: %v, want ErrNotSent", err)
	}
	if sw.calls != 0 {
		t.Errorf("the compare-and-set was sent %d times", sw.calls)
	}
	if after := f.metadataFiles(t); !slices.Equal(after, before) {
		t.Errorf("metadata files %v, want %v", after, before)
	}
	if got := f.load(t); got.MetadataLocation() != base.MetadataLocation() {
		t.Errorf("the table moved to %s", got.MetadataLocation())
	}
}

type countingSwap struct {
	Swapper
	calls int
}

func (c *countingSwap) SwapMetadataLocation(ctx context.Context, ident table.Identifier, from, to string) (bool, error) {
	c.calls++
	return c.Swapper.SwapMetadataLocation(ctx, ident, from, to)
}

package expire

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

type fixture struct {
	cat *sqlcat.Catalog
	tbl *table.Table
	opt gen.Options
	dir string
}

// newTable writes a generated table of single-file appends into a fresh
// SQLite catalog.
func newTable(t testing.TB, appends, rows, parts int, props map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, opt: gen.Options{Appends: appends, RowsPerAppend: rows, Partitions: parts, Seed: 7, Properties: props}}
	f.cat = f.handle(t)
	if _, err := gen.Create(context.Background(), f.cat, f.opt); err != nil {
		t.Fatal(err)
	}
	f.tbl = f.reload(t)
	return f
}

// handle opens another catalog on the same database, as a concurrent writer
// in another process would.
func (f *fixture) handle(t testing.TB) *sqlcat.Catalog {
	t.Helper()
	cat, err := gen.OpenSQLiteCatalog(context.Background(), "test", filepath.Join(f.dir, "cat.db"), filepath.Join(f.dir, "wh"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

func (f *fixture) reload(t testing.TB) *table.Table {
	t.Helper()
	tbl, err := f.cat.LoadTable(context.Background(), f.opt.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// deleteAppends drops the data files of appends [0, n) in one snapshot.
func (f *fixture) deleteAppends(t testing.TB, n int) {
	t.Helper()
	_, err := f.reload(t).Delete(context.Background(),
		iceberg.LessThan(iceberg.Reference(gen.ColEventID), gen.EventID(n, 0)), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.tbl = f.reload(t)
}

// setRef creates or moves a branch or tag through cat.
func setRef(t testing.TB, cat TableLoader, ident table.Identifier, name string, id int64, typ table.RefType, maxRefAgeMs int64, minKeep int) {
	t.Helper()
	_, _, err := cat.CommitTable(context.Background(), ident, nil,
		[]table.Update{table.NewSetSnapshotRefUpdate(name, id, typ, maxRefAgeMs, 0, minKeep)})
	if err != nil {
		t.Fatalf("set %s %s -> %d: %v", typ, name, id, err)
	}
}

func setProps(t testing.TB, cat TableLoader, ident table.Identifier, props iceberg.Properties) {
	t.Helper()
	if _, _, err := cat.CommitTable(context.Background(), ident, nil,
		[]table.Update{table.NewSetPropertiesUpdate(props)}); err != nil {
		t.Fatal(err)
	}
}

// snapState is what a snapshot reads and references, recorded before expiry
// by reading the table independently of the planner.
type snapState struct {
	id   int64
	rows int64
	sum  uint64
	live map[string]bool // manifest list, manifests, live data and delete files
	all  map[string]bool // live plus the files of DELETED entries
}

// capture records every snapshot of tbl; withRows also reads its rows.
func capture(t testing.TB, tbl *table.Table, withRows bool) map[int64]*snapState {
	t.Helper()
	ctx := context.Background()
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]*snapState{}
	for _, s := range tbl.Metadata().Snapshots() {
		st := &snapState{id: s.SnapshotID, live: map[string]bool{}, all: map[string]bool{}}
		out[s.SnapshotID] = st
		mans, err := s.Manifests(fs)
		if err != nil {
			continue // unreadable (a fixture's missing list): its files are unknown
		}
		st.live[s.ManifestList], st.all[s.ManifestList] = true, true
		for _, m := range mans {
			st.live[m.FilePath()], st.all[m.FilePath()] = true, true
			entries, err := m.FetchEntries(fs, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				st.all[e.DataFile().FilePath()] = true
				if e.Status() != iceberg.EntryStatusDELETED {
					st.live[e.DataFile().FilePath()] = true
				}
			}
		}
		if withRows {
			st.rows, st.sum = snapshotChecksum(t, tbl, s.SnapshotID)
		}
	}
	return out
}

// snapshotChecksum time-travels to snapshot id by pointing main at it in a
// private copy of the metadata, and returns gen.Checksum of that.
func snapshotChecksum(t testing.TB, tbl *table.Table, id int64) (int64, uint64) {
	t.Helper()
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetSnapshotRef(table.MainBranch, id, table.BranchRef); err != nil {
		t.Fatal(err)
	}
	meta, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tt := table.New(tbl.Identifier(), meta, tbl.MetadataLocation(),
		func(ctx context.Context) (iceio.IO, error) { return tbl.FS(ctx) }, nil)
	rows, sum, err := gen.Checksum(context.Background(), tt)
	if err != nil {
		t.Fatalf("read snapshot %d: %v", id, err)
	}
	return rows, sum
}

// checkAfter proves the outcome on storage: every snapshot left in after
// still reads what it read before, every file any of them references
// exists, and every file only expired snapshots referenced is gone.
func checkAfter(t testing.TB, before map[int64]*snapState, after *table.Table, withRows bool) {
	t.Helper()
	live, kept := checkKept(t, before, after, withRows)
	for id, st := range before {
		if kept[id] {
			continue
		}
		for p := range st.all {
			if !live[p] && exists(t, p) {
				t.Errorf("file only expired snapshot %d referenced is still there: %s", id, p)
			}
		}
	}
}

// checkKept is the first half of checkAfter: what remains reads and exists.
// It returns the files referenced and the snapshots kept.
func checkKept(t testing.TB, before map[int64]*snapState, after *table.Table, withRows bool) (map[string]bool, map[int64]bool) {
	t.Helper()
	live := map[string]bool{}
	kept := map[int64]bool{}
	for _, s := range after.Metadata().Snapshots() {
		st := before[s.SnapshotID]
		if st == nil {
			continue // committed after the capture
		}
		kept[s.SnapshotID] = true
		if withRows {
			if rows, sum := snapshotChecksum(t, after, s.SnapshotID); rows != st.rows || sum != st.sum {
				t.Errorf("snapshot %d reads %d rows (sum %x), read %d (%x) before", s.SnapshotID, rows, sum, st.rows, st.sum)
			}
		}
		maps.Copy(live, st.live)
	}
	// Snapshots added after the capture reference files too.
	for id, st := range capture(t, after, false) {
		if before[id] == nil {
			maps.Copy(live, st.live)
		}
	}
	for p := range live {
		if !exists(t, p) {
			t.Errorf("referenced file missing: %s", p)
		}
	}
	return live, kept
}

func exists(t testing.TB, path string) bool {
	t.Helper()
	_, err := os.Stat(localPath(path))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

func localPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "file://"); ok {
		return rest
	}
	return strings.TrimPrefix(p, "file:")
}

// filesOnDisk lists every regular file under dir.
func filesOnDisk(t testing.TB, dir string) []string { return testenv.Files(t, dir) }

func snapshotIDs(tbl *table.Table) []int64 {
	var ids []int64
	for _, s := range tbl.Metadata().Snapshots() {
		ids = append(ids, s.SnapshotID)
	}
	return ids
}

// lastTS is the newest snapshot timestamp: tests expire relative to it.
func lastTS(tbl *table.Table) time.Time {
	var ts int64
	for _, s := range tbl.Metadata().Snapshots() {
		ts = max(ts, s.TimestampMs)
	}
	return time.UnixMilli(ts)
}

func strictConfig() Config {
	c := DefaultConfig()
	c.RetainLast = 1
	c.MaxSnapshotAge = time.Millisecond
	return c
}

// localDeleter deletes local files, failing those whose path contains fail
// (when set); calls counts its Delete calls.
type localDeleter struct {
	fail  string
	calls atomic.Int32
}

func (d *localDeleter) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	d.calls.Add(1)
	failed := map[string]error{}
	var deleted []string
	for _, p := range paths {
		if d.fail != "" && strings.Contains(p, d.fail) {
			failed[p] = errors.New("permission denied: " + p)
			continue
		}
		if err := os.Remove(localPath(p)); err != nil && !os.IsNotExist(err) {
			failed[p] = err
			continue
		}
		deleted = append(deleted, p)
	}
	return deleted, failed
}

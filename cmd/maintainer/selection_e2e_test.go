package main

// A broken table beside healthy ones, and selections that match nothing,
// with the real binary.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// newSmallWarehouse is a genWarehouse of small tables (3 appends each):
// enough for orphan removal and load errors, cheap to make.
func newSmallWarehouse(t *testing.T, names ...string) *genWarehouse {
	t.Helper()
	return newGenWarehouseOf(t, sqliteCatalog, gen.Options{Appends: 3, RowsPerAppend: 100, Partitions: 2, Seed: 7}, names...)
}

// metadataFile is the local path of a table's current metadata file.
func (w *genWarehouse) metadataFile(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimPrefix(w.loadTable(t, name).MetadataLocation(), "file://")
}

// loadTable loads a table with its own catalog connection, closed before
// it returns (the table reads its files through its own IO).
func (w *genWarehouse) loadTable(t *testing.T, name string) *table.Table {
	t.Helper()
	cat, err := w.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(t.Context(), table.Identifier{genNamespace, name})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// truncate cuts a file to half its size.
func truncate(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

type orphansOutcome struct {
	outcome
	Orphans *struct {
		FilesDeleted     int `json:"files_deleted"`
		UnloadableTables []struct {
			Table            string `json:"table"`
			MetadataLocation string `json:"metadata_location"`
		} `json:"unloadable_tables"`
	} `json:"orphans"`
}

// TestBrokenTableStaysWithIt: beside a table with a truncated metadata.json
// and one whose metadata.json is gone (created inside good2's location),
// orphan removal goes on for good1, whose location neither can overlap
// (it reports them), and refuses for good2, naming the table inside it; the
// broken tables fail their own task naming the metadata file; exit 1. With
// --table good1, good1 alone runs and succeeds (exit 0).
func TestBrokenTableStaysWithIt(t *testing.T) {
	t.Parallel()
	w := newSmallWarehouse(t, "good1", "good2", "broken")
	cat, err := w.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	nested := gen.FileURI(filepath.Join(w.tableDir("good2"), "data", "nested"))
	if _, err := cat.CreateTable(t.Context(), table.Identifier{genNamespace, "nested"}, gen.Schema(), catalog.WithLocation(nested)); err != nil {
		t.Fatal(err)
	}
	cat.Close()
	brokenMeta := w.metadataFile(t, "broken")
	nestedMeta := w.metadataFile(t, "nested")
	truncate(t, brokenMeta)
	if err := os.Remove(nestedMeta); err != nil {
		t.Fatal(err)
	}
	planted := map[string][]plantedFile{}
	for _, name := range []string{"good1", "good2"} {
		if planted[name], err = plantOrphans(w.tableDir(name)); err != nil {
			t.Fatal(err)
		}
	}

	r := runMaintainer(t, w.dir, "run", "--config", w.cfg, "--task", "orphans", "--force", "--output", "json")
	expectCode(t, r, 1, "run over a catalog with broken tables")
	outs := byTable(jsonLines[orphansOutcome](t, r.stdout), func(o orphansOutcome) string { return o.Table })
	if len(outs) != 4 {
		t.Fatalf("outcomes for %d tables, want 4\n%s", len(outs), r)
	}
	g1 := outs["demo.good1"]
	if g1.Status != "succeeded" || g1.Orphans == nil || g1.Orphans.FilesDeleted != 3 {
		t.Fatalf("good1: %+v; want succeeded with 3 files deleted\n%s", g1, r)
	}
	unloadable := map[string]string{}
	for _, u := range g1.Orphans.UnloadableTables {
		unloadable[u.Table] = u.MetadataLocation
	}
	if len(unloadable) != 2 || !strings.Contains(unloadable["demo.broken"], brokenMeta) || !strings.Contains(unloadable["demo.nested"], nestedMeta) {
		t.Errorf("good1 reports unloadable tables %v; want demo.broken at %s and demo.nested at %s", unloadable, brokenMeta, nestedMeta)
	}
	if !strings.Contains(r.stderr, "other_table=demo.broken") {
		t.Errorf("no warning names demo.broken:\n%s", r.stderr)
	}
	if g2 := outs["demo.good2"]; g2.Status != "failed" || !strings.Contains(g2.Error, "demo.nested") {
		t.Errorf("good2: %s %q; want failed naming demo.nested, which may live inside it", g2.Status, g2.Error)
	}
	for _, f := range planted["good2"] {
		if _, err := os.Stat(f.path); err != nil {
			t.Errorf("good2's %s: %v; a refused removal deleted it", f.rel, err)
		}
	}
	for name, meta := range map[string]string{"demo.broken": brokenMeta, "demo.nested": nestedMeta} {
		if o := outs[name]; o.Status != "failed" || !strings.Contains(o.Error, meta) {
			t.Errorf("%s: %s %q; want failed naming %s", name, o.Status, o.Error, meta)
		}
	}

	// good1 alone, once more (new orphans planted): the broken tables are
	// not selected, so nothing fails.
	if _, err := plantOrphans(w.tableDir("good1")); err != nil {
		t.Fatal(err)
	}
	r = runMaintainer(t, w.dir, "run", "--config", w.cfg, "--task", "orphans", "--force", "--table", "demo.good1", "--output", "json")
	expectCode(t, r, 0, "run --table demo.good1")
	if o := jsonLines[orphansOutcome](t, r.stdout); len(o) != 1 || o[0].Status != "succeeded" || o[0].Orphans.FilesDeleted != 3 {
		t.Fatalf("good1 alone: %+v; want succeeded with 3 files deleted\n%s", o, r)
	}
	// The text output says which tables were ruled out.
	r = runMaintainer(t, w.dir, "run", "--dry-run", "--force", "--config", w.cfg, "--task", "orphans", "--table", "demo.good1")
	expectCode(t, r, 0, "run --dry-run --table demo.good1")
	if !strings.Contains(r.stdout, "table demo.broken does not load") {
		t.Errorf("the dry run does not say demo.broken was ruled out:\n%s", r)
	}
}

// TestCorruptMetadataNamesTheFile: every task, plan and status of a table
// whose metadata.json is truncated fail with an error naming that file.
func TestCorruptMetadataNamesTheFile(t *testing.T) {
	t.Parallel()
	w := newSmallWarehouse(t, "broken")
	meta := w.metadataFile(t, "broken")
	truncate(t, meta)

	r := runMaintainer(t, w.dir, "run", "--config", w.cfg, "--force", "--output", "json")
	expectCode(t, r, 1, "run")
	outs := jsonLines[outcome](t, r.stdout)
	if len(outs) != 3 {
		t.Fatalf("%d outcomes, want compact, expire, orphans\n%s", len(outs), r)
	}
	for _, o := range outs {
		if o.Status != "failed" || !strings.Contains(o.Error, meta) {
			t.Errorf("run %s: %s %q; want failed naming %s", o.Task, o.Status, o.Error, meta)
		}
	}
	r = runMaintainer(t, w.dir, "plan", "--config", w.cfg, "--output", "json")
	expectCode(t, r, 1, "plan")
	for _, o := range jsonLines[outcome](t, r.stdout) {
		if !strings.Contains(o.Error, meta) {
			t.Errorf("plan %s: %q; want an error naming %s", o.Task, o.Error, meta)
		}
	}
	r = runMaintainer(t, w.dir, "status", "--config", w.cfg)
	expectCode(t, r, 1, "status")
	if !strings.Contains(r.stdout, meta) {
		t.Errorf("status does not name %s:\n%s", meta, r)
	}
}

// TestSelectionMatchingNothing: a --table, a tables[].match or a catalog
// name that selects no table says so on stderr, with the names that do
// exist, and exits 2 (stdout stays valid JSON: empty); an empty catalog is
// warned about, exit 0.
func TestSelectionMatchingNothing(t *testing.T) {
	t.Parallel()
	w := newSmallWarehouse(t, "events")
	base, err := os.ReadFile(w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	prod := writeFile(t, filepath.Join(w.dir, "prod.yaml"), strings.Replace(string(base), "name: default", "name: prod", 1))
	rules := writeFile(t, filepath.Join(w.dir, "rules.yaml"), string(base)+"tables:\n  - match: \"sales.*\"\n")
	cases := []struct {
		name   string
		args   []string
		stderr []string
	}{
		{"--table", []string{"--config", w.cfg, "--table", "demo.nope"}, []string{`--table "demo.nope" matches none of the 1 managed tables`, "demo.events"}},
		{"tables rules", []string{"--config", rules}, []string{`tables[].match ("sales.*") match none of the 1 tables`, "demo.events"}},
		{"catalog name", []string{"--config", prod}, []string{`catalog "prod" has no tables`, `catalog name(s) "default"`}},
	}
	for _, c := range cases {
		for _, cmd := range []string{"run", "plan", "status"} {
			r := runMaintainer(t, w.dir, append([]string{cmd, "--output", "json"}, c.args...)...)
			expectCode(t, r, 2, c.name+": "+cmd)
			if r.stdout != "" {
				t.Errorf("%s: %s printed %q on stdout; want nothing", c.name, cmd, r.stdout)
			}
			for _, want := range c.stderr {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%s: %s: stderr lacks %q:\n%s", c.name, cmd, want, r.stderr)
				}
			}
		}
	}

	empty := newSmallWarehouse(t)
	r := runMaintainer(t, empty.dir, "status", "--config", empty.cfg)
	expectCode(t, r, 0, "status of an empty catalog")
	if !strings.Contains(r.stderr, "the catalog has no tables") || !strings.Contains(r.stderr, "catalog=default") {
		t.Errorf("status of an empty catalog says nothing:\n%s", r)
	}
}

package main

// Per-table overrides from maintainer.* table properties, with the real
// binary.

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

type settingsOutcome struct {
	outcome
	Settings []struct {
		Key    string `json:"key"`
		Value  string `json:"value"`
		Source string `json:"source"`
	} `json:"settings"`
	Compact *struct {
		TargetFileSize int64 `json:"target_file_size_bytes"`
		FilesOut       int   `json:"files_out"`
	} `json:"compact"`
}

// setTableProps sets table properties through the warehouse's catalog, as
// a table's owner would with ALTER TABLE ... SET TBLPROPERTIES.
func (w *genWarehouse) setTableProps(t *testing.T, name string, props iceberg.Properties) {
	t.Helper()
	cat, err := w.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, _, err := cat.CommitTable(t.Context(), table.Identifier{genNamespace, name}, nil,
		[]table.Update{table.NewSetPropertiesUpdate(props)}); err != nil {
		t.Fatalf("set properties of %s: %v", name, err)
	}
}

// dataFileSizes lists the sizes of the current snapshot's data files.
func (w *genWarehouse) dataFileSizes(t *testing.T, name string) []int64 {
	t.Helper()
	tasks, err := w.loadTable(t, name).Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, task := range tasks {
		out = append(out, task.File.FileSizeBytes())
	}
	return out
}

// A table with maintainer.compact.enabled=false is left alone by run, and
// plan says why; a table with maintainer.compact.target_file_size compacts
// to that size; a table whose property does not parse fails its compaction
// alone (exit 1), naming the property and the table.
func TestTablePropertyOverrides(t *testing.T) {
	t.Parallel()
	w := newGenWarehouseOf(t, sqliteCatalog, gen.Options{Appends: 12, RowsPerAppend: 4000, Partitions: 1, Seed: 5}, "optout", "tuned", "typo")
	const mib = 1 << 20
	w.setTableProps(t, "optout", iceberg.Properties{"maintainer.compact.enabled": "false"})
	w.setTableProps(t, "tuned", iceberg.Properties{"maintainer.compact.target_file_size": "1MiB"})
	w.setTableProps(t, "typo", iceberg.Properties{"maintainer.compact.enabled": "flase"})
	before := map[string]tableState{}
	for _, n := range []string{"optout", "tuned", "typo"} {
		before[n] = w.state(t, n)
	}

	r := runMaintainer(t, w.dir, "plan", "--config", w.cfg, "--task", "compact")
	expectCode(t, r, 1, "plan") // the typo table's compaction fails
	for _, want := range []string{
		"demo.optout  compact  skipped: compaction disabled by table property maintainer.compact.enabled",
		"setting compact.target_file_size = 1MiB (from table property maintainer.compact.target_file_size)",
		"target file size 1.0 MiB (from table property maintainer.compact.target_file_size)",
		`demo.typo  compact  failed`,
		`table demo.typo: table property refused: maintainer.compact.enabled="flase": must be true or false`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = runMaintainer(t, w.dir, "run", "--config", w.cfg, "--task", "compact", "--output", "json")
	expectCode(t, r, 1, "run")
	got := byTable(jsonLines[settingsOutcome](t, r.stdout), func(o settingsOutcome) string { return o.Table })
	if o := got["demo.optout"]; o.Status != "skipped" || !strings.Contains(o.Reason, "disabled by table property maintainer.compact.enabled") {
		t.Errorf("optout: %+v", o)
	}
	if o := got["demo.typo"]; o.Status != "failed" || !strings.Contains(o.Error, "maintainer.compact.enabled") || !strings.Contains(o.Error, "demo.typo") {
		t.Errorf("typo: %+v", o)
	}
	o := got["demo.tuned"]
	if o.Status != "succeeded" || o.Compact == nil || o.Compact.TargetFileSize != mib {
		t.Fatalf("tuned: %+v %+v", o, o.Compact)
	}
	for _, n := range []string{"optout", "typo"} {
		if s := w.state(t, n); s != before[n] {
			t.Errorf("%s changed: %+v -> %+v", n, before[n], s)
		}
	}
	after := w.state(t, "tuned")
	if !after.compacted() || after.rows != before["tuned"].rows || after.sum != before["tuned"].sum {
		t.Fatalf("tuned: %+v -> %+v", before["tuned"], after)
	}
	sizes := w.dataFileSizes(t, "tuned")
	var total int64
	for _, s := range sizes {
		total += s
		if s > 2*mib {
			t.Errorf("a compacted file of %d bytes; the target is 1MiB", s)
		}
	}
	if want := int((total + mib - 1) / mib); len(sizes) < 2 || len(sizes) < want-1 {
		t.Errorf("%d files of %d bytes in all (%v); want about %d of 1MiB", len(sizes), total, sizes, want)
	}

	// status says where the values came from.
	r = runMaintainer(t, w.dir, "status", "--config", w.cfg, "--table", "demo.optout", "--table", "demo.typo")
	expectCode(t, r, 0, "status")
	for _, want := range []string{
		"setting compact.enabled = false (from table property maintainer.compact.enabled)",
		`compact settings refused: table demo.typo: table property refused: maintainer.compact.enabled="flase"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
}

package main

// Scoped runs as a nightly CronJob makes them: run --task compact --where
// with a relative date compacts yesterday's partition and nothing else.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/rowfilter"
)

// scopedOutcome is an outcome with the where its compaction used.
type scopedOutcome struct {
	outcome
	Trigger string `json:"trigger"`
	Compact *struct {
		compactReport
		Where  string `json:"where"`
		Groups []struct {
			Partition string `json:"partition"`
			Files     int    `json:"files"`
		} `json:"groups"`
	} `json:"compact"`
}

// The table has day partitions for the day before yesterday, yesterday and
// today (UTC), 10 small files each. `run --task compact --where` with
// "yesterday" as relative dates rewrites exactly yesterday's 10 files into
// one: the other days keep the very same files, the rows and their checksum
// are unchanged (by gen's reader and the independent verifier), and plan and
// run show the resolved filter.
func TestRunWhereCompactsYesterdayOnly(t *testing.T) {
	t.Parallel()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	if time.Until(today.Add(24*time.Hour)) < 2*time.Minute {
		t.Skip("too close to midnight UTC: the binary's current_date may be tomorrow's")
	}
	yesterday := today.AddDate(0, 0, -1)
	const name = "daily"
	opt := gen.Options{Appends: 30, RowsPerAppend: 200, Partitions: 3, Start: today.AddDate(0, 0, -2), Seed: 11}
	w := newGenWarehouseOf(t, sqliteCatalog, opt, name)
	const where = "event_time >= current_date - 1 AND event_time < current_date"
	resolved := "event_time >= DATE '" + yesterday.Format(time.DateOnly) + "' AND event_time < DATE '" + today.Format(time.DateOnly) + "'"

	before := w.state(t, name)
	verifiedBefore := verifyMetadataURI(t, before.metadata)
	inside, outside := w.filesWhere(t, name, resolved)
	if len(inside) != 10 || len(outside) != 20 {
		t.Fatalf("generated table: %d files yesterday, %d on the other days; want 10 and 20", len(inside), len(outside))
	}

	// Bad scopes are usage errors, before any work.
	for _, args := range [][]string{
		{"run", "--where", "event_time >= current_date -"},
		{"run", "--task", "expire", "--where", where},
		{"plan", "--where", "event_time = "},
	} {
		r := runMaintainer(t, w.dir, append(args, "--config", w.cfg)...)
		expectCode(t, r, exitUsage, strings.Join(args, " "))
		if !strings.Contains(r.stderr, "--where") {
			t.Errorf("%s: stderr does not name --where:\n%s", strings.Join(args, " "), r)
		}
	}

	// plan --force shows what the forced, scoped run will do.
	r := runMaintainer(t, w.dir, "plan", "--force", "--task", "compact", "--where", where, "--config", w.cfg)
	expectCode(t, r, 0, "plan --force --where")
	if !strings.Contains(r.stdout, "where "+resolved) || !strings.Contains(r.stdout, "would rewrite 10 files") {
		t.Errorf("plan output does not show the resolved where and 10 files:\n%s", r)
	}

	r = runMaintainer(t, w.dir, "run", "--task", "compact", "--force", "--where", where, "--config", w.cfg, "--output", "json")
	expectCode(t, r, 0, "run --where")
	if time.Now().UTC().Truncate(24*time.Hour) != today {
		t.Skip("midnight UTC passed during the test")
	}
	outs := jsonLines[scopedOutcome](t, r.stdout)
	if len(outs) != 1 || outs[0].Status != "succeeded" || outs[0].Compact == nil {
		t.Fatalf("outcomes %+v; want compact succeeded\n%s", outs, r)
	}
	c := outs[0].Compact
	if c.Where != resolved || c.FilesIn != 10 || c.FilesOut != 1 || c.RowsRead != 10*200 || c.RowsWritten != 10*200 {
		t.Errorf("compaction %+v; want where %q, yesterday's 10 files of 2000 rows into 1", c, resolved)
	}
	if len(c.Groups) != 1 || !strings.Contains(c.Groups[0].Partition, yesterday.Format(time.DateOnly)) {
		t.Errorf("groups %+v; want yesterday's partition (%s) alone", c.Groups, yesterday.Format(time.DateOnly))
	}
	if !strings.Contains(r.stderr, "compaction scoped") || !strings.Contains(r.stderr, yesterday.Format(time.DateOnly)) {
		t.Errorf("the log does not show the resolved where:\n%s", r.stderr)
	}

	after := w.state(t, name)
	if !after.compacted() || after.parentID != before.snapshotID || after.rows != before.rows || after.sum != before.sum {
		t.Errorf("after: %+v; before %+v; want one compaction on top, same rows and checksum", after, before)
	}
	v := verifyMetadataURI(t, after.metadata)
	if v.LiveRows != verifiedBefore.LiveRows || v.Checksum != verifiedBefore.Checksum || v.DataFiles != 21 {
		t.Errorf("verifier after: %d rows, checksum %s, %d files; before %d, %s; want 21 files",
			v.LiveRows, v.Checksum, v.DataFiles, verifiedBefore.LiveRows, verifiedBefore.Checksum)
	}
	insideAfter, outsideAfter := w.filesWhere(t, name, resolved)
	if len(insideAfter) != 1 || slices.Contains(inside, insideAfter[0]) {
		t.Errorf("yesterday after the run: %v; want one new file", insideAfter)
	}
	if !slices.Equal(outside, outsideAfter) {
		t.Errorf("the other days' files changed:\nbefore %v\nafter  %v", outside, outsideAfter)
	}
}

// load loads the table with a catalog connection of its own, closed before
// it returns (the table reads its files without it).
func (w *genWarehouse) load(t *testing.T, name string) *table.Table {
	t.Helper()
	cat, err := w.open(t.Context())
	if err == nil {
		defer cat.Close()
		var tbl *table.Table
		if tbl, err = cat.LoadTable(t.Context(), table.Identifier{genNamespace, name}); err == nil {
			return tbl
		}
	}
	t.Fatalf("load %s: %v", name, err)
	return nil
}

// filesWhere lists the table's live data files whose rows may match the
// filter and those of the other partitions, each sorted.
func (w *genWarehouse) filesWhere(t *testing.T, name, filter string) (inside, outside []string) {
	t.Helper()
	ctx := t.Context()
	tbl := w.load(t, name)
	expr, err := rowfilter.Parse(filter)
	if err != nil {
		t.Fatal(err)
	}
	paths := func(opts ...table.ScanOption) []string {
		tasks, err := tbl.Scan(opts...).PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, task := range tasks {
			out = append(out, task.File.FilePath())
		}
		slices.Sort(out)
		return out
	}
	all := paths()
	inside = paths(table.WithRowFilter(expr))
	for _, p := range all {
		if !slices.Contains(inside, p) {
			outside = append(outside, p)
		}
	}
	return inside, outside
}

package main

// End-to-end runs of the binary on real Spark- and Hive-written tables of
// testdata/fixtures, relocated into a hadoop-catalog warehouse; rows are
// checked with the independent verifier (testenv.Verify), not iceberg-go.

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

const (
	fxUnpart  = "spark_v1_unpartitioned_20files"
	fxPart    = "spark_v1_partitioned_20files"
	fxCow     = "spark_v2_lineitem_cow"
	fxPosdel  = "hive_v2_lineitem_posdel"
	namespace = "default"
)

var newUserFixtures = []string{fxUnpart, fxPart, fxCow, fxPosdel}

// relocateWarehouse copies the fixtures into wh/default/<name> (a hadoop
// catalog warehouse) and returns wh.
func relocateWarehouse(t *testing.T, wh string, fixtures ...string) string {
	t.Helper()
	wh, err := filepath.Abs(wh)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		testenv.Relocate(t, f, wh, namespace, f)
	}
	return wh
}

// newUserConfig is the config of the brief: a hadoop catalog over wh,
// compaction with min_input_files 2, 64MiB files, delete_file_threshold 1.
func newUserConfig(t *testing.T, dir, wh string) string {
	t.Helper()
	return writeFile(t, filepath.Join(dir, "maintainer.yaml"), "catalog:\n"+
		"  type: hadoop\n"+
		"  warehouse: "+wh+"\n"+
		"defaults:\n"+
		"  compact:\n"+
		"    min_input_files: 2\n"+
		"    target_file_size: 64MiB\n"+
		"    delete_file_threshold: 1\n")
}

func ident(fixture string) string { return namespace + "." + fixture }

// verifyAgainstExpected reads each table with the independent verifier and
// checks its live rows and checksum against expected.json's current
// values; it returns the verifier's reports by fixture name.
func verifyAgainstExpected(t *testing.T, wh string, fixtures ...string) map[string]testenv.VerifyResult {
	t.Helper()
	exp := testenv.Expected(t)
	out := map[string]testenv.VerifyResult{}
	for _, f := range fixtures {
		e, ok := exp[f]
		if !ok {
			t.Fatalf("expected.json has no %s", f)
		}
		v := testenv.Verify(t, filepath.Join(wh, namespace, f))
		if v.LiveRows != e.LiveRows || v.Checksum != e.Checksum {
			t.Errorf("%s: verifier reads %d live rows, checksum %s; expected.json says %d, %s",
				f, v.LiveRows, v.Checksum, e.LiveRows, e.Checksum)
		}
		out[f] = v
	}
	return out
}

// TestNewUserOnSparkTables walks a new user's path: plan (writes nothing),
// run --task compact --force, verify the rows independently, status.
func TestNewUserOnSparkTables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wh := relocateWarehouse(t, filepath.Join(dir, "wh"), newUserFixtures...)
	cfg := newUserConfig(t, dir, wh)
	exp := testenv.Expected(t)

	before := verifyAgainstExpected(t, wh, newUserFixtures...) // the relocated copies read as the originals
	for _, f := range []string{fxUnpart, fxPart} {
		if before[f].DataFiles != 20 {
			t.Fatalf("%s has %d data files before compaction, want 20", f, before[f].DataFiles)
		}
	}

	// plan: every table planned, nothing written.
	tree := treeHash(t, wh)
	r := runMaintainer(t, dir, "plan", "--task", "compact", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "plan")
	plans := byTable(jsonLines[outcome](t, r.stdout), func(o outcome) string { return o.Table })
	if len(plans) != len(newUserFixtures) {
		t.Errorf("plan shows %d tables, want %d:\n%s", len(plans), len(newUserFixtures), r.stdout)
	}
	for _, f := range newUserFixtures {
		p, ok := plans[ident(f)]
		if !ok || p.Status != "planned" || p.Task != "compact" || p.Compact == nil {
			t.Errorf("plan of %s: %+v, want a planned compact outcome", f, p)
		}
	}
	if p := plans[ident(fxUnpart)]; p.Compact != nil && (p.Compact.FilesIn != 20 || len(p.Compact.Groups) != 1) {
		t.Errorf("plan of %s: %d files in %d groups, want 20 files in 1 group", fxUnpart, p.Compact.FilesIn, len(p.Compact.Groups))
	}
	if p := plans[ident(fxPart)]; p.Compact != nil && p.Compact.FilesIn != 20 {
		t.Errorf("plan of %s: %d files in, want 20", fxPart, p.Compact.FilesIn)
	}
	if d := diffTrees(tree, treeHash(t, wh)); d != "" {
		t.Fatalf("plan wrote to the warehouse:\n%s", d)
	}
	// The text form of plan, and run --dry-run, write nothing either.
	r = runMaintainer(t, dir, "plan", "--task", "compact", "--config", cfg)
	expectCode(t, r, 0, "plan (text)")
	if !strings.Contains(r.stdout, ident(fxUnpart)+"  compact  planned") {
		t.Errorf("plan text output lacks the planned line for %s:\n%s", fxUnpart, r.stdout)
	}
	r = runMaintainer(t, dir, "run", "--task", "compact", "--dry-run", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "run --dry-run")
	for _, o := range jsonLines[outcome](t, r.stdout) {
		if o.Status != "planned" {
			t.Errorf("run --dry-run: %s is %s, want planned", o.Table, o.Status)
		}
	}
	if d := diffTrees(tree, treeHash(t, wh)); d != "" {
		t.Fatalf("plan or run --dry-run wrote to the warehouse:\n%s", d)
	}

	// run: each table succeeded or not due.
	r = runMaintainer(t, dir, "run", "--task", "compact", "--force", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "run --task compact --force")
	outs := byTable(jsonLines[outcome](t, r.stdout), func(o outcome) string { return o.Table })
	if len(outs) != len(newUserFixtures) {
		t.Errorf("run shows %d tables, want %d:\n%s", len(outs), len(newUserFixtures), r.stdout)
	}
	for _, f := range newUserFixtures {
		o := outs[ident(f)]
		if o.Status != "succeeded" && o.Status != "not_due" {
			t.Errorf("run: %s is %q (%s %s), want succeeded or not_due", f, o.Status, o.Reason, o.Error)
		}
		if o.Status == "succeeded" && (o.Compact == nil || o.Compact.RowsRead != o.Compact.RowsWritten || len(o.Compact.Commits) != 1) {
			t.Errorf("run: %s succeeded with report %+v; want rows read = rows written and one commit", f, o.Compact)
		}
	}
	for _, f := range []string{fxUnpart, fxPart} {
		if outs[ident(f)].Status != "succeeded" {
			t.Errorf("run: %s (20 small files) is %q, want succeeded", f, outs[ident(f)].Status)
		}
	}

	// The rows, read independently, are those of expected.json.
	after := verifyAgainstExpected(t, wh, newUserFixtures...)
	if n := after[fxUnpart].DataFiles; n != 1 {
		t.Errorf("%s has %d data files after compaction, want 1", fxUnpart, n)
	}
	if n := after[fxPart].DataFiles; n >= 20 {
		t.Errorf("%s has %d data files after compaction, want fewer than 20", fxPart, n)
	}
	for _, f := range newUserFixtures {
		changed := after[f].SnapshotID != exp[f].CurrentSnapshotID
		if succeeded := outs[ident(f)].Status == "succeeded"; changed != succeeded {
			t.Errorf("%s: current snapshot %s (was %s), but the run said %s", f, after[f].SnapshotID, exp[f].CurrentSnapshotID, outs[ident(f)].Status)
		}
		if o := outs[ident(f)]; o.Status == "succeeded" && len(o.Compact.Commits) == 1 &&
			after[f].SnapshotID != itoa(o.Compact.Commits[0]) {
			t.Errorf("%s: current snapshot %s, the run reported commit %d", f, after[f].SnapshotID, o.Compact.Commits[0])
		}
	}

	// status shows the new file counts and no commit since compaction.
	r = runMaintainer(t, dir, "status", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "status")
	hs := byTable(jsonLines[health](t, r.stdout), func(h health) string { return h.Table })
	for _, f := range newUserFixtures {
		h, ok := hs[ident(f)]
		switch {
		case !ok:
			t.Errorf("status lacks %s", f)
		case h.Error != "":
			t.Errorf("status of %s: %s", f, h.Error)
		case h.DataFiles != after[f].DataFiles:
			t.Errorf("status of %s: %d data files, the verifier counts %d", f, h.DataFiles, after[f].DataFiles)
		case h.PositionDeleteFiles != after[f].PositionDeleteFiles+after[f].DeletionVectors:
			t.Errorf("status of %s: %d position delete files, the verifier counts %d", f, h.PositionDeleteFiles, after[f].PositionDeleteFiles)
		case itoa(h.CurrentSnapshotID) != after[f].SnapshotID:
			t.Errorf("status of %s: current snapshot %d, the verifier reads %s", f, h.CurrentSnapshotID, after[f].SnapshotID)
		case outs[ident(f)].Status == "succeeded" && h.CommitsSinceCompaction != 0:
			t.Errorf("status of %s: %d commits since compaction right after compacting it, want 0", f, h.CommitsSinceCompaction)
		case outs[ident(f)].Status == "not_due" && h.CommitsSinceCompaction == 0:
			t.Errorf("status of %s: 0 commits since compaction, but it was never compacted", f)
		}
	}

	// A second pass has nothing left to do and writes nothing.
	tree = treeHash(t, wh)
	r = runMaintainer(t, dir, "run", "--task", "compact", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "second run")
	for _, o := range jsonLines[outcome](t, r.stdout) {
		if o.Status != "not_due" {
			t.Errorf("second run: %s is %s (%s), want not_due", o.Table, o.Status, o.Reason)
		}
	}
	if d := diffTrees(tree, treeHash(t, wh)); d != "" {
		t.Errorf("a run with nothing to do wrote to the warehouse:\n%s", d)
	}
}

// itoa formats a snapshot id as the verifier does ("" for none).
func itoa(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// TestTableGlobSelects: --table chooses the tables a command works on; the
// others are not touched.
func TestTableGlobSelects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wh := relocateWarehouse(t, filepath.Join(dir, "wh"), newUserFixtures...)
	cfg := newUserConfig(t, dir, wh)

	// plan (writes nothing) lists exactly the matching tables.
	for _, c := range []struct {
		globs []string
		want  []string
	}{
		{[]string{"default.spark_*"}, []string{fxPart, fxUnpart, fxCow}},
		{[]string{"default.spark_v1_*"}, []string{fxPart, fxUnpart}},
		{[]string{"**.hive_*", "nosuch.*"}, []string{fxPosdel}},
		{[]string{"default.*_20files", "default.hive_v2_lineitem_posdel"}, []string{fxPosdel, fxPart, fxUnpart}},
		{[]string{"**"}, []string{fxPosdel, fxPart, fxUnpart, fxCow}},
		{[]string{"default.?park_v1_unpartitioned_20files"}, []string{fxUnpart}},
		{[]string{"spark_*"}, nil}, // one level: matches no namespaced table
	} {
		args := []string{"plan", "--task", "compact", "--config", cfg, "--output", "json"}
		for _, g := range c.globs {
			args = append(args, "--table", g)
		}
		r := runMaintainer(t, dir, args...)
		// A --table that matches nothing is bad usage: exit 2.
		wantCode := 0
		if len(c.want) == 0 {
			wantCode = 2
		}
		expectCode(t, r, wantCode, strings.Join(args, " "))
		var got []string
		for _, o := range jsonLines[outcome](t, r.stdout) {
			got = append(got, o.Table)
		}
		var want []string
		for _, f := range c.want {
			want = append(want, ident(f))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("plan --table %v selects %v, want %v", c.globs, got, want)
		}
		if len(want) == 0 && !strings.Contains(r.stderr, "matches none of the") {
			t.Errorf("plan --table %v selects nothing but does not say so:\n%s", c.globs, r.stderr)
		}
	}

	// run only touches the spark_* tables: the hive table would be
	// compacted (delete_file_threshold 1) if it were selected.
	others := treeHash(t, filepath.Join(wh, namespace, fxPosdel))
	cowTree := treeHash(t, filepath.Join(wh, namespace, fxCow))
	r := runMaintainer(t, dir, "run", "--task", "compact", "--config", cfg, "--table", "default.spark_*", "--force", "--output", "json")
	expectCode(t, r, 0, "run --table default.spark_*")
	outs := byTable(jsonLines[outcome](t, r.stdout), func(o outcome) string { return o.Table })
	if len(outs) != 3 {
		t.Errorf("run --table default.spark_* reported %d tables, want 3:\n%s", len(outs), r.stdout)
	}
	if _, ok := outs[ident(fxPosdel)]; ok {
		t.Errorf("run --table default.spark_* reported on %s", fxPosdel)
	}
	for _, f := range []string{fxUnpart, fxPart} {
		if outs[ident(f)].Status != "succeeded" {
			t.Errorf("%s: %+v, want succeeded", f, outs[ident(f)])
		}
	}
	if d := diffTrees(others, treeHash(t, filepath.Join(wh, namespace, fxPosdel))); d != "" {
		t.Errorf("run --table default.spark_* changed %s:\n%s", fxPosdel, d)
	}
	if outs[ident(fxCow)].Status == "not_due" {
		if d := diffTrees(cowTree, treeHash(t, filepath.Join(wh, namespace, fxCow))); d != "" {
			t.Errorf("%s was not due but its files changed:\n%s", fxCow, d)
		}
	}
	exp := testenv.Expected(t)
	if v := testenv.Verify(t, filepath.Join(wh, namespace, fxPosdel)); v.SnapshotID != exp[fxPosdel].CurrentSnapshotID {
		t.Errorf("%s: current snapshot %s, want the untouched %s", fxPosdel, v.SnapshotID, exp[fxPosdel].CurrentSnapshotID)
	}
	verifyAgainstExpected(t, wh, newUserFixtures...)

	// Then the hive table alone.
	r = runMaintainer(t, dir, "run", "--task", "compact", "--config", cfg, "--table", "default.hive_*", "--output", "json")
	expectCode(t, r, 0, "run --table default.hive_*")
	if outs := jsonLines[outcome](t, r.stdout); len(outs) != 1 || outs[0].Table != ident(fxPosdel) || outs[0].Status != "succeeded" {
		t.Errorf("run --table default.hive_*: %+v, want %s succeeded", outs, fxPosdel)
	}
	v := verifyAgainstExpected(t, wh, fxPosdel)[fxPosdel]
	if v.PositionDeleteFiles != 0 || v.DataFiles != 1 {
		t.Errorf("%s after compaction: %d data files, %d position delete files; want 1 and 0", fxPosdel, v.DataFiles, v.PositionDeleteFiles)
	}
}

// TestBrokenTableFailsOnlyItself: a table whose current metadata file is
// corrupt fails alone; the others are compacted; the exit code is 1.
func TestBrokenTableFailsOnlyItself(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wh := relocateWarehouse(t, filepath.Join(dir, "wh"), newUserFixtures...)
	cfg := newUserConfig(t, dir, wh)

	broken := fxPart
	meta := currentMetadataFile(t, filepath.Join(wh, namespace, broken))
	fi, err := os.Stat(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(meta, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	brokenTree := treeHash(t, filepath.Join(wh, namespace, broken))

	r := runMaintainer(t, dir, "run", "--task", "compact", "--config", cfg, "--force", "--output", "json")
	expectCode(t, r, 1, "run with one broken table")
	outs := byTable(jsonLines[outcome](t, r.stdout), func(o outcome) string { return o.Table })
	if len(outs) != len(newUserFixtures) {
		t.Errorf("run reported %d tables, want %d:\n%s", len(outs), len(newUserFixtures), r.stdout)
	}
	b := outs[ident(broken)]
	if b.Status != "failed" || !strings.Contains(b.Error, ident(broken)) {
		t.Errorf("broken table %s: %+v; want failed with an error naming it", broken, b)
	}
	for _, f := range newUserFixtures {
		if f == broken {
			continue
		}
		if o := outs[ident(f)]; o.Status != "succeeded" && o.Status != "not_due" {
			t.Errorf("%s: %s (%s), want succeeded or not_due: one broken table fails only itself", f, o.Status, o.Error)
		}
	}
	if outs[ident(fxUnpart)].Status != "succeeded" || outs[ident(fxPosdel)].Status != "succeeded" {
		t.Errorf("the healthy tables that need compaction were not compacted: %s %s, %s %s",
			fxUnpart, outs[ident(fxUnpart)].Status, fxPosdel, outs[ident(fxPosdel)].Status)
	}
	if d := diffTrees(brokenTree, treeHash(t, filepath.Join(wh, namespace, broken))); d != "" {
		t.Errorf("the broken table's files changed:\n%s", d)
	}
	verifyAgainstExpected(t, wh, fxUnpart, fxCow, fxPosdel)

	// Orphan removal is refused on every table while another table's
	// location cannot be read: that table could live under theirs.
	before := treeHash(t, wh)
	r = runMaintainer(t, dir, "run", "--task", "orphans", "--config", cfg, "--output", "json")
	expectCode(t, r, 1, "orphans with one broken table")
	for _, o := range jsonLines[outcome](t, r.stdout) {
		if o.Status != "failed" || !strings.Contains(o.Error, ident(broken)) {
			t.Errorf("orphans on %s: %s (%s), want failed naming the unreadable table", o.Table, o.Status, o.Error)
		}
	}
	if d := diffTrees(before, treeHash(t, wh)); d != "" {
		t.Errorf("orphan removal changed files while refusing:\n%s", d)
	}

	// status reports the broken table and exits 1 as well.
	r = runMaintainer(t, dir, "status", "--config", cfg, "--output", "json")
	expectCode(t, r, 1, "status with one broken table")
	hs := byTable(jsonLines[health](t, r.stdout), func(h health) string { return h.Table })
	if h := hs[ident(broken)]; !strings.Contains(h.Error, ident(broken)) {
		t.Errorf("status of the broken table: %+v, want an error naming it", h)
	}
	if h := hs[ident(fxUnpart)]; h.Error != "" || h.DataFiles != 1 || h.CommitsSinceCompaction != 0 {
		t.Errorf("status of %s: %+v, want 1 data file, 0 commits since compaction", fxUnpart, h)
	}
}

// currentMetadataFile returns the metadata file version-hint.text names.
func currentMetadataFile(t *testing.T, tableDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tableDir, "metadata", "version-hint.text"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(tableDir, "metadata", "v"+strings.TrimSpace(string(b))+".metadata.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("current metadata file: %v", err)
	}
	return p
}

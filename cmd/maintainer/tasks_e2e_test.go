package main

// One run of the three tasks on a generated table, written once for every
// catalog a genWarehouse can have (SQLite here, PostgreSQL in
// postgres_e2e_test.go).

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunAllTasks is testRunAllTasks on the demo's SQLite catalog.
func TestRunAllTasks(t *testing.T) {
	t.Parallel()
	testRunAllTasks(t, sqliteCatalog)
}

// maintainedOutcome is an outcome with the figures of expiry and orphan
// removal.
type maintainedOutcome struct {
	outcome
	Expire *struct {
		SnapshotsExpired int `json:"snapshots_expired"`
	} `json:"expire"`
	Orphans *struct {
		FilesDeleted int `json:"files_deleted"`
	} `json:"orphans"`
}

// testRunAllTasks: one `run` on a table of small files, old snapshots and
// planted orphans compacts it, expires every snapshot but the compaction's
// (with the demo's override: retain_last 1, max_snapshot_age 1s) and
// deletes their files, and removes the old orphans but not the young one or
// the staging folder; the rows and their checksum are unchanged, by the
// maintainer's reader and by the independent verifier; the next run has
// nothing to do.
func testRunAllTasks(t *testing.T, setup catalogSetup) {
	const name = "events"
	w := newGenWarehouseOn(t, setup, name)
	base, err := os.ReadFile(w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, filepath.Join(w.dir, "all.yaml"), string(base)+demoOverride)
	// Every writer's snapshot is older than max_snapshot_age (1s) when
	// expiry runs.
	time.Sleep(1100 * time.Millisecond)
	planted, err := plantOrphans(w.tableDir(name))
	if err != nil {
		t.Fatal(err)
	}

	before := w.state(t, name)
	verifiedBefore := verifyMetadataURI(t, before.metadata)
	if verifiedBefore.LiveRows != before.rows || verifiedBefore.DataFiles != genAppends || before.snapshots != genAppends {
		t.Fatalf("generated table: verifier reads %d rows in %d files, %d snapshots; want %d rows in %d files and snapshots",
			verifiedBefore.LiveRows, verifiedBefore.DataFiles, before.snapshots, before.rows, genAppends)
	}
	writersFiles := dataFiles(t, w.tableDir(name), planted)
	if len(writersFiles) != genAppends {
		t.Fatalf("%d data files on disk, want %d", len(writersFiles), genAppends)
	}

	r := runMaintainer(t, w.dir, "run", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "run")
	outs := jsonLines[maintainedOutcome](t, r.stdout)
	// The generated table has no delete files: delete-file upkeep finds
	// nothing to do.
	outs = slices.DeleteFunc(outs, func(o maintainedOutcome) bool {
		if o.Task == "deletes" && o.Status != "not_due" {
			t.Errorf("deletes: %s (%s %s); want not_due", o.Status, o.Reason, o.Error)
		}
		return o.Task == "deletes"
	})
	if len(outs) != 4 || outs[0].Task != "compact" || outs[1].Task != "manifests" || outs[2].Task != "expire" || outs[3].Task != "orphans" {
		t.Fatalf("outcomes %+v; want compact, manifests, expire, orphans\n%s", outs, r)
	}
	// Compaction leaves too few manifests to merge.
	if o := outs[1]; o.Status != "not_due" || !strings.Contains(o.Reason, "fewer than min_manifests") {
		t.Errorf("manifests: %s (%s %s); want not_due", o.Status, o.Reason, o.Error)
	}
	outs = slices.Delete(outs, 1, 2)
	for _, o := range outs {
		if o.Status != "succeeded" {
			t.Errorf("%s: %s (%s %s); want succeeded", o.Task, o.Status, o.Reason, o.Error)
		}
	}
	if c := outs[0].Compact; c == nil || c.FilesIn != genAppends || c.FilesOut != genPartitions || c.RowsRead != before.rows || c.RowsWritten != before.rows {
		t.Errorf("compaction %+v; want %d files of %d rows rewritten into %d", c, genAppends, before.rows, genPartitions)
	}
	if e := outs[1].Expire; e == nil || e.SnapshotsExpired != genAppends {
		t.Errorf("expiry %+v; want %d snapshots expired", e, genAppends)
	}
	old := 0
	for _, p := range planted {
		if p.old {
			old++
		}
	}
	if o := outs[2].Orphans; o == nil || o.FilesDeleted != old {
		t.Errorf("orphan removal %+v; want the %d old planted files deleted", o, old)
	}

	after := w.state(t, name)
	expectCompactedSameRows(t, "after the run", before, after, verifiedBefore)
	if after.snapshots != 1 {
		t.Errorf("after the run: %d snapshots; want the compaction's alone", after.snapshots)
	}
	left := dataFiles(t, w.tableDir(name), planted)
	for f := range writersFiles {
		if left[f] {
			t.Errorf("%s, referenced only by expired snapshots, is still there", f)
		}
	}
	if len(left) != genPartitions {
		t.Errorf("%d data files on disk after the run, want the %d compacted ones", len(left), genPartitions)
	}
	for _, p := range planted {
		_, err := os.Stat(p.path)
		if removed := os.IsNotExist(err); removed != p.old {
			t.Errorf("planted %s: removed %v (stat: %v); want: %s", p.rel, removed, err, p.why)
		}
	}
	if h := tableHealth(t, w, name); h.DataFiles != genPartitions || h.Snapshots != 1 || h.CommitsSinceCompaction != 0 {
		t.Errorf("status after the run: %+v; want %d data files, 1 snapshot, 0 commits since compaction", h, genPartitions)
	}

	r = runMaintainer(t, w.dir, "run", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "the next run")
	for _, o := range jsonLines[outcome](t, r.stdout) {
		if o.Status != "not_due" {
			t.Errorf("the next run: %s is %s (%s); want not_due", o.Task, o.Status, o.Reason)
		}
	}
}

// dataFiles is the set of Parquet files under tableDir/data, planted ones
// left out.
func dataFiles(t *testing.T, tableDir string, planted []plantedFile) map[string]bool {
	t.Helper()
	skip := map[string]bool{}
	for _, p := range planted {
		skip[p.path] = true
	}
	files := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(tableDir, "data"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".parquet") && !skip[path] {
			files[path] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

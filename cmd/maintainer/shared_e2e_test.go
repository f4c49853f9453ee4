package main

// Several maintainers compact one table with many partitions at once, on
// partition leases (compact.group_leases) in one Redis: every partition is
// compacted exactly once, no row is lost, and a maintainer killed mid-run
// leaves its partitions to the others.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/redistest"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// A table of sharedPartitions day partitions of 10 small files each: one
// group per partition.
const (
	sharedPartitions = 24
	sharedFiles      = sharedPartitions * 10
)

// sharedWarehouse is a generated table and a Redis config whose compaction
// runs on partition leases and commits each group on its own.
// It returns the table's state and what the verifier read, before any run.
func sharedWarehouse(t *testing.T, name string) (*genWarehouse, string, tableState, testenv.VerifyResult) {
	t.Helper()
	addr := redistest.Need(t)
	w := newGenWarehouseOf(t, sqliteCatalog, gen.Options{Appends: sharedFiles, RowsPerAppend: 500, Partitions: sharedPartitions, Seed: 11}, name)
	cfg, _ := w.redisConfig(t, addr, "")
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(text), "  ttl: 60s\n", "  ttl: 3s\n", 1)
	s = strings.Replace(s, "  compact:\n    enabled: true\n",
		"  compact:\n    enabled: true\n    group_leases: true\n    partial_progress: true\n    max_commits: 100\n    max_concurrent_groups: 1\n", 1)
	if !strings.Contains(s, "group_leases") || !strings.Contains(s, "ttl: 3s") {
		t.Fatalf("config not adapted:\n%s", s)
	}
	before := w.state(t, name)
	return w, writeFile(t, filepath.Join(w.dir, "shared.yaml"), s), before, verifyMetadataURI(t, before.metadata)
}

// compactionHistory reads the table's compaction snapshots (how many, and
// how often each input file was replaced by one) and counts its live files.
func compactionHistory(t *testing.T, w *genWarehouse, name string) (commits int, replaced map[string]int, live int) {
	t.Helper()
	w.withTable(t, name, func(tbl *table.Table) {
		var err error
		if commits, replaced, err = testenv.CompactionHistory(t.Context(), tbl); err != nil {
			t.Fatal(err)
		}
		tasks, err := tbl.Scan().PlanFiles(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		live = len(tasks)
	})
	return commits, replaced, live
}

// expectEveryPartitionCompactedOnce checks the end state: one file per
// partition, each input file replaced by exactly one commit, the rows and
// checksum unchanged (by iceberg-go and by the independent verifier).
func expectEveryPartitionCompactedOnce(t *testing.T, w *genWarehouse, name string, before tableState, verified int64, checksum string) {
	t.Helper()
	after := w.state(t, name)
	if after.rows != before.rows || after.sum != before.sum {
		t.Errorf("%d rows, checksum %016x after; %d, %016x before", after.rows, after.sum, before.rows, before.sum)
	}
	v := verifyMetadataURI(t, after.metadata)
	if v.LiveRows != verified || v.Checksum != checksum {
		t.Errorf("verifier: %d rows, checksum %s after; %d, %s before", v.LiveRows, v.Checksum, verified, checksum)
	}
	commits, replaced, live := compactionHistory(t, w, name)
	if live != sharedPartitions || len(replaced) != sharedFiles {
		t.Errorf("%d live files, %d files replaced; want %d and %d", live, len(replaced), sharedPartitions, sharedFiles)
	}
	if commits != sharedPartitions {
		t.Errorf("%d compaction commits; want one per partition (%d)", commits, sharedPartitions)
	}
	for p, n := range replaced {
		if n != 1 {
			t.Errorf("%s replaced by %d commits", p, n)
		}
	}
}

// compactOutcome is the compaction outcome one process printed.
func compactOutcome(t *testing.T, stdout string) map[string]any {
	t.Helper()
	for _, o := range jsonLines[map[string]any](t, stdout) {
		if o["task"] == "compact" {
			return o
		}
	}
	t.Fatalf("no compaction outcome in:\n%s", stdout)
	return nil
}

// finished waits for a maintainer that must exit 0 with its compaction
// succeeded (or with nothing left to do), and returns that outcome.
func finished(t *testing.T, r *watchedRun) map[string]any {
	t.Helper()
	if st := r.wait(t); st.ExitCode() != 0 {
		t.Fatalf("maintainer: %v\nstdout:\n%s\nstderr:\n%s", st, r.stdout.String(), r.stderrText())
	}
	o := compactOutcome(t, r.stdout.String())
	if o["status"] != "succeeded" && o["status"] != "not_due" {
		t.Errorf("maintainer: %v %v", o["status"], o["reason"])
	}
	t.Logf("maintainer: %v %v", o["status"], o["reason"])
	return o
}

func figure(o map[string]any, key string) int {
	c, _ := o["compact"].(map[string]any)
	n, _ := c[key].(float64)
	return int(n)
}

// Three maintainers at once on one table: each partition is compacted by
// one of them, once.
func TestThreeMaintainersShareOneTable(t *testing.T) {
	t.Parallel()
	const name = "events"
	w, cfg, before, v := sharedWarehouse(t, name)

	runs := make([]*watchedRun, 3)
	for i := range runs {
		runs[i] = startWatched(t, t.Context(), w.dir, "run", "--config", cfg, "--task", "compact", "--force", "--output", "json")
	}
	committed, left := 0, 0
	for _, r := range runs {
		o := finished(t, r)
		committed += figure(o, "groups_committed")
		left += figure(o, "groups_claimed_elsewhere")
	}
	if committed != sharedPartitions {
		t.Errorf("the maintainers committed %d groups together; want %d", committed, sharedPartitions)
	}
	expectEveryPartitionCompactedOnce(t, w, name, before, v.LiveRows, v.Checksum)

	// status shows the backfill done.
	r := runMaintainer(t, w.dir, "status", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "status")
	hs := jsonLines[map[string]any](t, r.stdout)
	if len(hs) != 1 || hs[0]["partitions"] != float64(sharedPartitions) || hs[0]["partitions_to_compact"] != float64(0) {
		t.Errorf("status after: %v", r.stdout)
	}
}

// One of three maintainers is killed (SIGKILL) after its first commit: the
// others go on, the partition it held is compacted by a later run once its
// lease ran out, and in the end every partition is compacted once with
// every row kept.
func TestKilledMaintainerLeavesItsPartitionsToTheOthers(t *testing.T) {
	t.Parallel()
	const name = "events"
	w, cfg, before, v := sharedWarehouse(t, name)
	status := runMaintainer(t, w.dir, "status", "--config", cfg, "--output", "json")
	if hs := jsonLines[map[string]any](t, status.stdout); len(hs) != 1 || hs[0]["partitions_to_compact"] != float64(sharedPartitions) {
		t.Fatalf("status before: %s", status.stdout)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	victim := startWatched(t, ctx, w.dir, "run", "--config", cfg, "--task", "compact", "--force", "--output", "json")
	victim.atFirstGroup(t)
	others := []*watchedRun{
		startWatched(t, ctx, w.dir, "run", "--config", cfg, "--task", "compact", "--force", "--output", "json"),
		startWatched(t, ctx, w.dir, "run", "--config", cfg, "--task", "compact", "--force", "--output", "json"),
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.wait(t)
	for _, r := range others {
		finished(t, r)
	}
	// The killed one's partition lease runs out (lock.ttl 3s); a later run
	// compacts whatever is left.
	time.Sleep(4 * time.Second)
	last := runMaintainer(t, w.dir, "run", "--config", cfg, "--task", "compact", "--force", "--output", "json")
	expectCode(t, last, 0, "the run after the kill")
	if o := compactOutcome(t, last.stdout); figure(o, "groups_claimed_elsewhere") != 0 {
		t.Errorf("the run after the kill left groups to others: %v", o["reason"])
	}
	expectEveryPartitionCompactedOnce(t, w, name, before, v.LiveRows, v.Checksum)

}

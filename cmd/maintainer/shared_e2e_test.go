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
	"github.com/iceberg-maintainer/maintainer/internal/s3test"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// A table of sharedPartitions day partitions of 10 small files each: one
// group per partition.
const (
	sharedPartitions = 24
	sharedFiles      = sharedPartitions * 10
)

// verifyFunc reads a table's metadata file with the independent verifier.
type verifyFunc func(metadata string) testenv.VerifyResult

// sharedWarehouse is a generated table and a Redis config whose compaction
// runs on partition leases and commits each group on its own.
// It returns the table's state and what the verifier read, before any run.
func sharedWarehouse(t *testing.T, name string) (*genWarehouse, string, tableState, testenv.VerifyResult) {
	t.Helper()
	return sharedWarehouseOn(t, sqliteCatalog, func(m string) testenv.VerifyResult { return verifyMetadataURI(t, m) }, name, "")
}

// sharedWarehouseOn is sharedWarehouse on the catalog setup makes, read by
// verify, with extra YAML at the end of the config.
func sharedWarehouseOn(t *testing.T, setup catalogSetup, verify verifyFunc, name, extra string) (*genWarehouse, string, tableState, testenv.VerifyResult) {
	t.Helper()
	addr := redistest.Need(t)
	w := newGenWarehouseOf(t, setup, gen.Options{Appends: sharedFiles, RowsPerAppend: 500, Partitions: sharedPartitions, Seed: 11}, name)
	cfg, _ := w.redisConfig(t, addr, extra)
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
	return w, writeFile(t, filepath.Join(w.dir, "shared.yaml"), s), before, verify(before.metadata)
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
func expectEveryPartitionCompactedOnce(t *testing.T, w *genWarehouse, verify verifyFunc, name string, before tableState, verified int64, checksum string) {
	t.Helper()
	after := w.state(t, name)
	if after.rows != before.rows || after.sum != before.sum {
		t.Errorf("%d rows, checksum %016x after; %d, %016x before", after.rows, after.sum, before.rows, before.sum)
	}
	v := verify(after.metadata)
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
	expectEveryPartitionCompactedOnce(t, w, func(m string) testenv.VerifyResult { return verifyMetadataURI(t, m) }, name, before, v.LiveRows, v.Checksum)

	// status shows the backfill done.
	r := runMaintainer(t, w.dir, "status", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "status")
	hs := jsonLines[map[string]any](t, r.stdout)
	if len(hs) != 1 || hs[0]["partitions"] != float64(sharedPartitions) || hs[0]["partitions_to_compact"] != float64(0) {
		t.Errorf("status after: %v", r.stdout)
	}
}

// One of three maintainers is killed (SIGKILL) while it holds a partition
// lease with that partition's group mid-rewrite: the table's files are on
// the in-process S3 server, which holds the victim's first write (it runs
// alone until then) without an answer. The two others, started meanwhile,
// compact every other partition and leave the victim's to it (its lease
// lives on while it does); once it is killed and its lease ran out
// (lock.ttl 3s), a later run compacts that partition. In the end every
// partition is compacted once, by the others, with every row kept.
func TestKilledMaintainerLeavesItsPartitionsToTheOthers(t *testing.T) {
	t.Parallel()
	const name = "events"
	srv := s3test.Start(t, fleetBucket)
	verify := func(m string) testenv.VerifyResult { return verifyS3(t, srv, m) }
	// The held write must outlast the others' work: no request timeout
	// gives up on it first.
	w, cfg, before, v := sharedWarehouseOn(t, s3Catalog(srv), verify, name, "object_store:\n  request_timeout: 10m\n")
	status := runMaintainer(t, w.dir, "status", "--config", cfg, "--output", "json")
	if hs := jsonLines[map[string]any](t, status.stdout); len(hs) != 1 || hs[0]["partitions_to_compact"] != float64(sharedPartitions) {
		t.Fatalf("status before: %s", status.stdout)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	args := []string{"run", "--config", cfg, "--task", "compact", "--force", "--output", "json"}
	stall := stallWrites(srv, "/wh/"+genNamespace+".db/"+name+"/data/", 0)
	victim := startWatched(t, ctx, w.dir, args...)
	select {
	case <-stall.Stalled:
	case <-victim.stderrEOF:
		t.Fatalf("the victim ended before writing a file:\n%s", victim.stderrText())
	}
	others := []*watchedRun{startWatched(t, ctx, w.dir, args...), startWatched(t, ctx, w.dir, args...)}
	committed, left := 0, 0
	for _, r := range others {
		o := finished(t, r)
		committed += figure(o, "groups_committed")
		left += figure(o, "groups_claimed_elsewhere")
	}
	// The victim still holds its partition: the others left it, and did
	// everything else.
	if committed != sharedPartitions-1 || left < 1 {
		t.Errorf("the others committed %d groups and left %d to other replicas; want %d, and the victim's left", committed, left, sharedPartitions-1)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if ps := victim.wait(t); ps.Exited() {
		t.Fatalf("the victim exited (%d) before it was killed:\n%s", ps.ExitCode(), victim.stderrText())
	}
	_, held := stall.release()
	if commits, _, _ := compactionHistory(t, w, name); commits != sharedPartitions-1 {
		t.Errorf("%d compaction commits before the victim's partition was taken over; want %d (the victim's never landed)", commits, sharedPartitions-1)
	}
	// The killed one's partition lease runs out (lock.ttl 3s); a later run
	// compacts the partition then, and finds it claimed until then.
	var last map[string]any
	for attempt := 0; ; attempt++ {
		r := runMaintainer(t, w.dir, args...)
		expectCode(t, r, 0, "a run after the kill")
		if last = compactOutcome(t, r.stdout); figure(last, "groups_claimed_elsewhere") == 0 || attempt == 20 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if figure(last, "groups_claimed_elsewhere") != 0 || figure(last, "groups_committed") != 1 {
		t.Errorf("the run after the victim's lease ran out: %v %v; want the victim's partition committed", last["status"], last["reason"])
	}
	expectEveryPartitionCompactedOnce(t, w, verify, name, before, v.LiveRows, v.Checksum)
	h := historyOf(t, w, name)
	expectEachFileOnce(t, srv, name, h)
	if keys := srv.Keys(t, fleetBucket); keys[held] || h.referenced["s3://"+fleetBucket+"/"+held] {
		t.Errorf("the victim's held write %s reached the bucket or the table", held)
	}
}

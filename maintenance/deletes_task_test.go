package maintenance

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/deletes"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

// Deletion vectors (Spark's v3 fixture: two DVs in one Puffin file) survive
// every task: a writer removes a data file that has a DV, the deletes task
// drops that dead DV and keeps the other, expiry and orphan removal (every
// file made old) keep the Puffin file the live DV is in, and compaction
// applies the live DV. After each pass the table holds the writer's rows.
func TestDeletionVectorsSurviveEveryTask(t *testing.T) {
	ctx := t.Context()
	cat, tbl, dir := testenv.FixtureTable(t, "spark_v3_deletion_vectors")
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var victim iceberg.DataFile
	var puffins []string
	for _, tk := range tasks {
		for _, dv := range tk.DeletionVectorFiles {
			puffins = append(puffins, strings.TrimPrefix(dv.FilePath(), "file://"))
			if victim == nil {
				victim = tk.File
			}
		}
	}
	if victim == nil || len(puffins) != 2 || puffins[0] != puffins[1] {
		t.Fatalf("fixture: want two DVs of one Puffin file, got %q", puffins)
	}
	txn := tbl.NewTransaction()
	if err := txn.ReplaceDataFilesWithDataFiles(ctx, []iceberg.DataFile{victim}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if tbl, err = txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := testenv.Verify(t, dir)
	if want.DeletionVectors != 2 {
		t.Fatalf("after the writer's overwrite: %d DVs, want the dead one left behind", want.DeletionVectors)
	}
	old := time.Now().Add(-30 * 24 * time.Hour)
	ageAll := func() {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				err = os.Chtimes(p, old, old)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ageAll()

	ex := expire.DefaultConfig()
	ex.RetainLast, ex.MaxSnapshotAge = 1, time.Millisecond
	co := compact.DefaultConfig()
	co.Enabled = false
	e := &env{cat: cat, reg: prometheus.NewRegistry(), state: trigger.NewMemStore(), policy: Policy{Compact: co, Deletes: deletes.DefaultConfig(), Expire: ex, Orphans: orphans.DefaultConfig()}}
	r := e.runner(t, nil, nil)
	check := func(pass string, dvs int) {
		t.Helper()
		got := testenv.Verify(t, dir)
		if got.LiveRows != want.LiveRows || got.Checksum != want.Checksum || got.DeletionVectors != dvs {
			t.Fatalf("after %s: %d rows %s, %d DVs; want %d rows %s, %d DVs", pass, got.LiveRows, got.Checksum,
				got.DeletionVectors, want.LiveRows, want.Checksum, dvs)
		}
		for _, s := range testenv.VerifyAll(t, dir) {
			if s.Error != "" {
				t.Fatalf("after %s: snapshot %s does not read: %s", pass, s.SnapshotID, s.Error)
			}
		}
	}
	outcomes := r.RunTable(ctx, tbl.Identifier(), Request{Force: true})
	for _, o := range outcomes {
		t.Logf("%s: %s: %s", o.Task, o.Status, o.Reason)
		if o.Status == StatusFailed {
			t.Fatalf("%s failed: %s", o.Task, o.Error)
		}
		if o.Task == TaskDeletes && (o.Deletes == nil || o.Deletes.Result == nil || o.Deletes.Result.DanglingDropped != 1) {
			t.Fatalf("deletes: %s (%s); want the dead DV dropped", o.Status, o.Reason)
		}
	}
	check("deletes, expire and orphans", 1)
	if _, err := os.Stat(puffins[0]); err != nil {
		t.Fatalf("the Puffin file of the live DV is gone: %v", err)
	}

	ageAll()
	e.policy.Compact.Enabled, e.policy.Compact.MinInputFiles = true, 2
	for _, o := range r.RunTable(ctx, tbl.Identifier(), Request{Force: true}) {
		t.Logf("%s: %s: %s", o.Task, o.Status, o.Reason)
		if o.Status == StatusFailed {
			t.Fatalf("%s failed: %s", o.Task, o.Error)
		}
	}
	check("compaction and the rest", 0)
}

// The deletes task's conflicts count under its own task, as compaction's do.
func TestDeletesConflictsAreCounted(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), metrics.NewTables(true, 10))
	rep := &DeletesReport{Result: &deletes.Result{CommitRetries: 2, SnapshotID: 7}}
	o := Outcome{Table: "db.t", Task: TaskDeletes, Status: StatusSucceeded, Deletes: rep}
	m.outcome(o, time.Now())
	if got := counter(t, m.conflicts.WithLabelValues("db.t", TaskDeletes)); got != 2 {
		t.Fatalf("commit_conflicts_total{deletes} = %v, want 2", got)
	}
	if got := counter(t, m.runs.WithLabelValues("db.t", TaskDeletes, ResultSuccess)); got != 1 {
		t.Fatalf("runs_total{deletes,success} = %v, want 1", got)
	}
	if !o.Changed() {
		t.Fatal("a committed delete-file rewrite does not count as a change")
	}
}

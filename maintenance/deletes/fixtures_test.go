package deletes

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// checkSnapshots fails the test unless every snapshot of the table in dir
// that expected.json knows reads with its expected rows and checksum (the
// independent verifier, not iceberg-go), and the others read at all.
func checkSnapshots(t *testing.T, dir string, want testenv.FixtureExpect) {
	t.Helper()
	for _, got := range testenv.VerifyAll(t, dir) {
		exp, known := want.Snapshot(got.SnapshotID)
		switch {
		case known && exp.Error != "":
			// unreadable in the fixture itself
		case known && (got.Error != "" || got.LiveRows != exp.LiveRows || got.Checksum != exp.Checksum):
			t.Errorf("snapshot %s: %d rows, checksum %s, error %q; want %d rows, checksum %s",
				got.SnapshotID, got.LiveRows, got.Checksum, got.Error, exp.LiveRows, exp.Checksum)
		case !known && got.Error != "":
			t.Errorf("new snapshot %s does not read: %s", got.SnapshotID, got.Error)
		}
	}
}

// TestDeletesFixtures runs the task on every fixture (position deletes of
// Impala and Hive, a dangling one left by Spark's rewrite, equality
// deletes, deletion vectors): the current snapshot holds exactly the rows
// of expected.json after, and every snapshot still reads as before.
func TestDeletesFixtures(t *testing.T) {
	expected := testenv.Expected(t)
	for _, name := range testenv.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			want := expected[name]
			cat, tbl, dir := testenv.FixtureTable(t, name)
			cfg := DefaultConfig()
			cfg.MinInputFiles = 2
			plan, err := PlanTable(ctx, tbl, cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Execute(ctx, cat, tbl, plan, cfg, Options{})
			if err != nil {
				t.Fatalf("execute: %v (plan %+v)", err, plan)
			}
			t.Logf("plan: %d groups, %d dangling, skipped %+v; result %+v", len(plan.Groups), len(plan.Dangling), plan.Skipped, res)
			after := testenv.Verify(t, dir)
			if after.LiveRows != want.LiveRows || after.Checksum != want.Checksum {
				t.Fatalf("after: %d rows, checksum %s; want %d rows, checksum %s", after.LiveRows, after.Checksum, want.LiveRows, want.Checksum)
			}
			checkSnapshots(t, dir, want)
			fresh, err := cat.LoadTable(ctx, tbl.Identifier())
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Empty() {
				s := fresh.CurrentSnapshot()
				if s.SnapshotID != res.SnapshotID || s.Summary.Operation != table.OpReplace || s.Summary.Properties["maintainer.operation"] != "deletes" {
					t.Fatalf("committed snapshot %d (%+v), result says %d; want a replace with the maintenance marker", s.SnapshotID, s.Summary, res.SnapshotID)
				}
			}
			// Nothing is left to do: the next plan is empty.
			again, err := PlanTable(ctx, fresh, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Empty() {
				t.Fatalf("a second plan still has work: %d groups, dangling %+v", len(again.Groups), again.Dangling)
			}
			switch name {
			case "spark_v2_rewrite_dangling_posdel":
				if len(plan.Dangling) != 1 || res.DanglingDropped != 1 || after.PositionDeleteFiles != 0 {
					t.Fatalf("dangling: plan %+v, dropped %d, %d position-delete files left; want the one dropped",
						plan.Dangling, res.DanglingDropped, after.PositionDeleteFiles)
				}
			case "spark_v3_deletion_vectors":
				if after.DeletionVectors != 2 {
					t.Fatalf("%d deletion vectors after, want both live ones kept", after.DeletionVectors)
				}
			}
		})
	}
}

package compact

import (
	"context"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// TestCompactFixtures compacts every table written by Spark, Flink, Hive,
// Impala and PyIceberg in testdata/fixtures, then reads it back with the
// independent verifier: the current snapshot must hold exactly the rows of
// expected.json, and every older snapshot must still read as before.
func TestCompactFixtures(t *testing.T) {
	expected := testenv.Expected(t)
	for _, name := range testenv.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			want := expected[name]
			cat, tbl, dir := testenv.FixtureTable(t, name)
			before := testenv.Verify(t, dir)

			cfg := DefaultConfig()
			cfg.TargetFileSize = 64 << 20
			cfg.MinInputFiles = 2
			cfg.DeleteFileThreshold = 1 // rewrite every file that has deletes
			plan, err := PlanTable(ctx, tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var log pathLog
			res, err := execute(ctx, cat, tbl, plan, cfg, guarded(t, Options{}), log.watch(defaultPaths()))
			if err != nil {
				t.Fatalf("compaction failed: %v\nplan groups: %+v", err, plan.Groups)
			}
			t.Logf("%d groups: %d files -> %d files, %d delete files dropped; paths %v %v", len(plan.Groups),
				res.FilesRewritten, res.FilesWritten, res.DeleteFilesDropped, log.all(), log.whys)

			after := testenv.Verify(t, dir)
			if after.LiveRows != want.LiveRows || after.Checksum != want.Checksum {
				t.Fatalf("after compaction: %d rows checksum %s; expected %d rows checksum %s",
					after.LiveRows, after.Checksum, want.LiveRows, want.Checksum)
			}
			if len(plan.Groups) > 0 {
				if after.SnapshotID == before.SnapshotID {
					t.Fatal("compaction planned groups but committed no snapshot")
				}
				if after.DataFiles > before.DataFiles {
					t.Fatalf("data files grew from %d to %d", before.DataFiles, after.DataFiles)
				}
				// When every data file was rewritten and no delete is left,
				// the rows written are the table's rows.
				noDeletes := after.PositionDeleteFiles+after.EqualityDeleteFiles+after.DeletionVectors == 0
				if plan.InputFiles() == before.DataFiles && noDeletes && res.RowsWritten != after.LiveRows {
					t.Fatalf("wrote %d rows, table has %d", res.RowsWritten, after.LiveRows)
				}
			}
			// Every older snapshot still reads as it did.
			for _, s := range testenv.VerifyAll(t, dir) {
				exp, ok := want.Snapshot(s.SnapshotID)
				if !ok {
					if s.SnapshotID != after.SnapshotID {
						t.Fatalf("unknown snapshot %s", s.SnapshotID)
					}
					continue
				}
				if exp.Error != "" {
					continue // unreadable in the fixture itself
				}
				if s.Error != "" || s.LiveRows != exp.LiveRows || s.Checksum != exp.Checksum {
					t.Fatalf("snapshot %s: %d rows %s (err %q), expected %d rows %s", s.SnapshotID,
						s.LiveRows, s.Checksum, s.Error, exp.LiveRows, exp.Checksum)
				}
			}
			if want.Name == "spark_v1_unpartitioned_20files" && after.DataFiles != 1 {
				t.Fatalf("20 one-row files became %d files, want 1", after.DataFiles)
			}
		})
	}
}

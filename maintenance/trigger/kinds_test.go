package trigger

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

var kindFigures = Config{PositionDeleteFileCount: 1, PositionDeleteRecordCount: 1, EqualityDeleteFileCount: 1, EqualityDeleteRecordCount: 1}

// Per-kind delete counts on tables of other engines: Flink equality
// deletes with an Impala position delete (summaries give the kinds), Hive
// position deletes (its summaries give only added-delete-files, so the
// manifests tell), Spark deletion vectors (counted as position deletes).
func TestCountDeleteKindsFixtures(t *testing.T) {
	for _, tc := range []struct {
		name          string
		want          kinds
		fromManifests bool
	}{
		{"flink_impala_v2_eq_and_posdel", kinds{posFiles: 1, posRecords: 1, eqFiles: 3, eqRecords: 7}, false},
		{"hive_v2_partitioned_posdel", kinds{posFiles: 3, posRecords: 10}, true},
		{"spark_v3_deletion_vectors", kinds{posFiles: 2, posRecords: 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, tbl, _ := testenv.FixtureTable(t, tc.name)
			got := mustCount(t, tbl, State{}, kindFigures)
			k := kinds{got.PositionDeleteFiles, got.PositionDeleteRecords, got.EqualityDeleteFiles, got.EqualityDeleteRecords}
			if k != tc.want {
				t.Fatalf("kinds %+v, want %+v", k, tc.want)
			}
			if read := got.ManifestsRead > 0; read != tc.fromManifests {
				t.Fatalf("%d manifests read, want reads %v", got.ManifestsRead, tc.fromManifests)
			}
			// The manifests agree with the summaries where those suffice.
			fs, err := tbl.FS(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var fromManifests kinds
			for s := tbl.CurrentSnapshot(); s != nil; s = tbl.Metadata().SnapshotByID(derefOr(s.ParentSnapshotID)) {
				m, _, err := readKinds(context.Background(), fs, s)
				if err != nil {
					t.Fatal(err)
				}
				fromManifests = kinds{fromManifests.posFiles + m.posFiles, fromManifests.posRecords + m.posRecords,
					fromManifests.eqFiles + m.eqFiles, fromManifests.eqRecords + m.eqRecords}
				if s.ParentSnapshotID == nil {
					break
				}
			}
			if fromManifests != tc.want {
				t.Fatalf("from manifests %+v, want %+v", fromManifests, tc.want)
			}
			// No per-kind threshold, no per-kind count (and no manifest read for it).
			if c := mustCount(t, tbl, State{}, Config{CommitCount: 1}); c.PositionDeleteFiles != 0 || c.EqualityDeleteFiles != 0 || c.ManifestsRead != 0 {
				t.Fatalf("commit_count alone: %+v", c)
			}
		})
	}
}

func derefOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func TestSummaryKinds(t *testing.T) {
	sum := func(p map[string]string) *table.Summary {
		return &table.Summary{Operation: table.OpOverwrite, Properties: p}
	}
	for _, tc := range []struct {
		name string
		s    *table.Summary
		want kinds
		ok   bool
	}{
		{"nil summary", nil, kinds{}, false},
		{"no metrics", sum(map[string]string{"flink.job-id": "x"}), kinds{}, false},
		{"append without deletes", sum(map[string]string{"added-data-files": "2", "total-records": "5"}), kinds{}, true},
		{"both kinds", sum(map[string]string{"added-delete-files": "3", "added-position-delete-files": "1", "added-position-deletes": "4",
			"added-equality-delete-files": "2", "added-equality-deletes": "9"}), kinds{1, 4, 2, 9}, true},
		{"deletion vectors are position deletes", sum(map[string]string{"added-delete-files": "2", "added-dvs": "2", "added-position-deletes": "2"}),
			kinds{posFiles: 2, posRecords: 2}, true},
		{"only the total (Hive)", sum(map[string]string{"added-delete-files": "3", "added-position-deletes": "10"}), kinds{posRecords: 10}, false},
		{"files without their rows", sum(map[string]string{"added-equality-delete-files": "1"}), kinds{eqFiles: 1}, false},
		{"malformed", sum(map[string]string{"added-position-delete-files": "x", "added-position-deletes": "1"}), kinds{posRecords: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := summaryKinds(tc.s)
			if ok != tc.ok || ok && got != tc.want {
				t.Fatalf("summaryKinds = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

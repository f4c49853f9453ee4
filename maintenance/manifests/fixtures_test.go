package manifests

import (
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// TestRewriteFixtures rewrites the manifests of every table written by
// Spark, Flink, Hive, Impala and PyIceberg in testdata/fixtures (equality
// deletes, position deletes, deletion vectors, partition and schema
// evolution, v1 to v3), then reads it back with the independent verifier:
// the current snapshot holds exactly the rows of expected.json (equality
// deletes apply only to data files of lower sequence numbers, so a moved
// sequence number shows here), every live entry keeps its snapshot id and
// sequence numbers, and every older snapshot still reads as before.
func TestRewriteFixtures(t *testing.T) {
	testenv.EachFixture(t, func(t *testing.T, name string, want testenv.FixtureExpect) {
		cat, tbl, dir := testenv.FixtureTable(t, name)
		entriesBefore, listBefore := liveEntries(t, tbl)
		cfg := testConfig()
		plan, err := PlanTable(t.Context(), tbl, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Execute(t.Context(), cat, tbl, plan, cfg, Options{})
		if err != nil {
			t.Fatalf("rewrite failed: %v\nplan: %+v", err, plan)
		}
		t.Logf("%s; %d manifests -> %d", plan.Reason, res.ManifestsBefore, res.ManifestsAfter)
		if tbl, err = cat.LoadTable(t.Context(), tbl.Identifier()); err != nil {
			t.Fatal(err)
		}
		after := testenv.Verify(t, dir)
		if after.LiveRows != want.LiveRows || after.Checksum != want.Checksum {
			t.Fatalf("after the rewrite: %d rows checksum %s; expected %d rows checksum %s",
				after.LiveRows, after.Checksum, want.LiveRows, want.Checksum)
		}
		entriesAfter, listAfter := liveEntries(t, tbl)
		sameEntries(t, entriesBefore, entriesAfter)
		if !plan.Empty() && (res.SnapshotID == 0 || len(listAfter) >= len(listBefore)) {
			t.Fatalf("planned %d groups; %d manifests before, %d after, result %+v", len(plan.Groups), len(listBefore), len(listAfter), res)
		}
		testenv.ExpectSnapshotsRead(t, dir, want, after.SnapshotID)
	})
}

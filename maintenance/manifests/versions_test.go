package manifests

import (
	"context"
	"fmt"
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// Tables of every format version with one manifest per append are
// rewritten: v1 manifests carry no sequence numbers (read back unassigned
// before they are listed, they were refused as changed entries), v3 ones
// carry first row ids. Rows, files and entries are unchanged.
func TestRewriteEveryFormatVersion(t *testing.T) {
	for _, fv := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("v%d", fv), func(t *testing.T) {
			ctx := context.Background()
			cat, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: 12, RowsPerAppend: 5, Partitions: 2, FormatVersion: fv})
			before := testenv.Verify(t, metadataFile(tbl))
			entriesBefore, _ := liveEntries(t, tbl)
			plan, err := PlanTable(ctx, tbl, testConfig())
			if err != nil || plan.Empty() {
				t.Fatalf("plan: %+v, %v", plan, err)
			}
			res, err := Execute(ctx, cat, tbl, plan, testConfig(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tbl, err = cat.LoadTable(ctx, tbl.Identifier()); err != nil {
				t.Fatal(err)
			}
			after := testenv.Verify(t, metadataFile(tbl))
			if after.LiveRows != before.LiveRows || after.Checksum != before.Checksum || after.DataFiles != before.DataFiles {
				t.Fatalf("before %+v, after %+v", before.SnapshotResult, after.SnapshotResult)
			}
			entriesAfter, listAfter := liveEntries(t, tbl)
			sameEntries(t, entriesBefore, entriesAfter)
			if len(listAfter) != 1 || res.ManifestsBefore != 12 {
				t.Fatalf("%d manifests after; result %+v", len(listAfter), res)
			}
		})
	}
}

package manifests

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

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
			plan, err := PlanTable(ctx, tbl, testConfig())
			if err != nil || plan.Empty() {
				t.Fatalf("plan: %+v, %v", plan, err)
			}
			res, _, listAfter := executeKeepingRows(t, cat, tbl, plan, testConfig())
			if len(listAfter) != 1 || res.ManifestsBefore != 12 {
				t.Fatalf("%d manifests after; result %+v", len(listAfter), res)
			}
		})
	}
}

// executeKeepingRows executes plan on tbl and checks that the re-loaded
// table reads the same rows and files, with every live entry's snapshot id
// and sequence numbers unchanged. It returns the result, the re-loaded
// table and its manifests.
func executeKeepingRows(t *testing.T, cat Catalog, tbl *table.Table, plan *Plan, cfg Config) (*Result, *table.Table, []iceberg.ManifestFile) {
	t.Helper()
	before := testenv.Verify(t, metadataFile(tbl))
	entriesBefore, _ := liveEntries(t, tbl)
	res, err := Execute(t.Context(), cat, tbl, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = cat.LoadTable(t.Context(), tbl.Identifier()); err != nil {
		t.Fatal(err)
	}
	after := testenv.Verify(t, metadataFile(tbl))
	if after.LiveRows != before.LiveRows || after.Checksum != before.Checksum || after.DataFiles != before.DataFiles {
		t.Fatalf("before %+v, after %+v", before.SnapshotResult, after.SnapshotResult)
	}
	entriesAfter, listAfter := liveEntries(t, tbl)
	sameEntries(t, entriesBefore, entriesAfter)
	return res, tbl, listAfter
}

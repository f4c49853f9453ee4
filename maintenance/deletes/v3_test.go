package deletes

import (
	"context"
	"testing"
)

// A table upgraded to format v3 keeps its Parquet position deletes, which
// are not merged: new position deletes there must be deletion vectors,
// which the task does not write. plan says so.
func TestFormatV3DoesNotMerge(t *testing.T) {
	ctx := context.Background()
	d := newDeleteTable(t, 2)
	files := d.dataFiles()
	d.addDeletes(position{files[0], 1})
	d.addDeletes(position{files[1], 2})
	txn := d.tbl.NewTransaction()
	if err := txn.UpgradeFormatVersion(3); err != nil {
		t.Fatal(err)
	}
	var err error
	if d.tbl, err = txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.MinInputFiles = 2
	plan, err := PlanTable(ctx, d.tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if plan.FormatVersion != 3 || len(plan.Groups) != 0 || len(plan.Skipped) != 1 || plan.Skipped[0].Reason != ReasonFormatV3 || plan.Skipped[0].Files != 2 {
		t.Fatalf("plan v%d: groups %+v, skipped %+v; want the two files skipped for format v3", plan.FormatVersion, plan.Groups, plan.Skipped)
	}
}

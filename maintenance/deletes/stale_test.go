package deletes

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
)

// A plan is run on a table whose main is no longer the snapshot it read:
// here main was rolled back to a snapshot where the delete the plan calls
// dangling still deletes a row of a live data file. The run plans again on
// that head and drops nothing: dropping the delete there would bring its
// row back.
func TestStalePlanIsPlannedAgain(t *testing.T) {
	ctx := context.Background()
	d := newDeleteTable(t, 2)
	tasks, err := d.tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f0 := tasks[0].File
	d.addDeletes(position{f0.FilePath(), 3})
	withDelete := d.tbl.CurrentSnapshot().SnapshotID
	want := d.verify()

	// A writer removes f0 with its rows: the delete now dangles.
	txn := d.tbl.NewTransaction()
	if err := txn.NewRewrite(nil).DeleteFile(f0).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if d.tbl, err = txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	plan, err := PlanTable(ctx, d.tbl, cfg)
	if err != nil || len(plan.Dangling) != 1 {
		t.Fatalf("plan %+v, %v; want the delete dangling", plan, err)
	}

	// Main is rolled back to the snapshot where f0 and its delete are live.
	cat := d.cat.(interface {
		CommitTable(context.Context, table.Identifier, []table.Requirement, []table.Update) (table.Metadata, string, error)
	})
	if _, _, err := cat.CommitTable(ctx, d.tbl.Identifier(), nil,
		[]table.Update{table.NewSetSnapshotRefUpdate(table.MainBranch, withDelete, table.BranchRef, -1, -1, -1)}); err != nil {
		t.Fatal(err)
	}
	if d.tbl, err = d.cat.LoadTable(ctx, d.tbl.Identifier()); err != nil {
		t.Fatal(err)
	}

	res, err := Execute(ctx, d.cat, d.tbl, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID != 0 || res.DanglingDropped != 0 || !res.Replanned {
		t.Fatalf("result %+v; want a new plan with nothing to do", res)
	}
	if d.tbl, err = d.cat.LoadTable(ctx, d.tbl.Identifier()); err != nil {
		t.Fatal(err)
	}
	after := d.verify()
	if after.LiveRows != want.LiveRows || after.Checksum != want.Checksum {
		t.Fatalf("after: %d rows %s; want %d rows %s", after.LiveRows, after.Checksum, want.LiveRows, want.Checksum)
	}
}

package expire

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// advance commits a child of ref's snapshot (same data) and moves ref onto
// it as typ with min-snapshots-to-keep minKeep (0: unset), as a writer's
// commit to a branch would; it returns the child's id.
func advance(t *testing.T, cat TableLoader, ident table.Identifier, ref string, typ table.RefType, minKeep int) int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	meta := tbl.Metadata()
	head := tbl.SnapshotByName(ref)
	if head == nil {
		t.Fatalf("no ref %q", ref)
	}
	child, parent := *head, head.SnapshotID
	child.SnapshotID, child.ParentSnapshotID = rand.Int64N(1<<62)+1, &parent
	child.SequenceNumber = meta.LastSequenceNumber() + 1
	child.TimestampMs = max(time.Now().UnixMilli(), meta.LastUpdatedMillis()+1)
	if _, _, err := cat.CommitTable(ctx, ident, nil, []table.Update{
		table.NewAddSnapshotUpdate(&child),
		table.NewSetSnapshotRefUpdate(ref, child.SnapshotID, typ, 0, 0, minKeep),
	}); err != nil {
		t.Fatalf("advance %s: %v", ref, err)
	}
	return child.SnapshotID
}

// Which moves of a ref between planning and committing the plan survives.
// A kept branch moved on by a writer's new snapshot: committed as planned.
// Anything that could change what the plan's retention would keep (a tag
// moved, a branch the plan removes moved, retention settings of the ref or
// the table changed with the move) or what the plan removes besides
// snapshots (schemas, specs): the commit conflicts, and with no retry left
// nothing changes.
func TestRefMovesBetweenPlanAndCommit(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		refs     func(f *fixture, ids []int64) // refs made before planning
		tune     func(*Config)
		move     func(f *fixture) int64 // the concurrent commit; the ref's new snapshot
		ref      string
		accepted bool
	}{
		{name: "a branch moved on", ref: "dev", accepted: true,
			refs: func(f *fixture, ids []int64) {
				setRef(t, f.cat, f.opt.Identifier(), "dev", ids[3], table.BranchRef, 0, 0)
			},
			move: func(f *fixture) int64 { return advance(t, f.handle(t), f.opt.Identifier(), "dev", table.BranchRef, 0) }},
		{name: "main moved on", ref: table.MainBranch, accepted: true,
			move: func(f *fixture) int64 {
				return advance(t, f.handle(t), f.opt.Identifier(), table.MainBranch, table.BranchRef, 0)
			}},
		{name: "a tag moved to a descendant", ref: "audit",
			refs: func(f *fixture, ids []int64) {
				setRef(t, f.cat, f.opt.Identifier(), "audit", ids[3], table.TagRef, 0, 0)
			},
			move: func(f *fixture) int64 { return advance(t, f.handle(t), f.opt.Identifier(), "audit", table.TagRef, 0) }},
		{name: "a branch the plan removes moved on", ref: "old",
			refs: func(f *fixture, ids []int64) {
				setRef(t, f.cat, f.opt.Identifier(), "old", ids[0], table.BranchRef, 0, 0)
			},
			tune: func(c *Config) { c.MaxRefAge = time.Minute },
			move: func(f *fixture) int64 { return advance(t, f.handle(t), f.opt.Identifier(), "old", table.BranchRef, 0) }},
		{name: "main moved on with min-snapshots-to-keep set", ref: table.MainBranch,
			move: func(f *fixture) int64 {
				return advance(t, f.handle(t), f.opt.Identifier(), table.MainBranch, table.BranchRef, 4)
			}},
		{name: "main moved on after history.expire.min-snapshots-to-keep was set", ref: table.MainBranch,
			move: func(f *fixture) int64 {
				setProps(t, f.handle(t), f.opt.Identifier(), map[string]string{PropMinSnapshotsToKeep: "4"})
				return advance(t, f.handle(t), f.opt.Identifier(), table.MainBranch, table.BranchRef, 0)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newTable(t, 5, 30, 2, nil)
			f.deleteAppends(t, 3)
			ids := snapshotIDs(f.tbl)
			if c.refs != nil {
				c.refs(f, ids)
				f.tbl = f.reload(t)
			}
			cfg := strictConfig()
			cfg.CommitRetries = 0
			if c.tune != nil {
				c.tune(&cfg)
			}
			plan, err := PlanTable(ctx, f.tbl, cfg, lastTS(f.tbl).Add(time.Hour))
			if err != nil || plan.Empty() {
				t.Fatalf("plan %+v, %v", plan, err)
			}
			var moved int64
			opts := Options{Deleter: &localDeleter{}, beforeCommit: func(attempt int) error {
				if attempt == 0 {
					moved = c.move(f)
				}
				return nil
			}}
			snapsBefore := len(f.tbl.Metadata().Snapshots())
			res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, opts)
			after := f.reload(t)
			if s := after.SnapshotByName(c.ref); s == nil || s.SnapshotID != moved {
				t.Fatalf("ref %s at %v after the run, want the concurrent commit's %d (%v)", c.ref, s, moved, err)
			}
			if c.accepted {
				if err != nil || res.CommitRetries != 0 || res.SnapshotsExpired() != len(plan.Expired) {
					t.Fatalf("want the plan committed as it is: %v (%+v)", err, res)
				}
				return
			}
			if !errors.Is(err, ErrConflict) || res.Committed || res.FilesDeleted() != 0 {
				t.Fatalf("want ErrConflict, got %v (%+v)", err, res)
			}
			if n := len(after.Metadata().Snapshots()); n != snapsBefore+1 {
				t.Fatalf("%d snapshots, want the %d before and the concurrent commit's", n, snapsBefore)
			}
		})
	}
}

// clean_expired_metadata: a plan that removes a spec or schema no kept
// snapshot uses holds only on the snapshots it weighed, so a writer's new
// snapshot (which may use one) makes it conflict.
func TestCleanExpiredMetadataRefusesAMovedBranch(t *testing.T) {
	f, cfg, plan := evolvedPlan(t, 6)
	if len(plan.RemovedSpecs) == 0 {
		t.Fatalf("the plan removes no spec: %+v", plan)
	}
	cfg.CommitRetries = 0
	opts := Options{Deleter: &localDeleter{}, beforeCommit: func(attempt int) error {
		if attempt == 0 {
			advance(t, f.handle(t), f.opt.Identifier(), table.MainBranch, table.BranchRef, 0)
		}
		return nil
	}}
	res, err := Execute(context.Background(), f.cat, f.tbl, plan, cfg, opts)
	if !errors.Is(err, ErrConflict) || res.Committed {
		t.Fatalf("want ErrConflict, got %v (%+v)", err, res)
	}
	if _, specs := ids(f.reload(t)); len(specs) != len(f.tbl.Metadata().PartitionSpecs()) {
		t.Fatalf("specs %v after a refused commit", specs)
	}
}

// What a REST server receives: Iceberg's assert-ref-snapshot-id for every
// planned ref, at its planned snapshot.
func TestRefRequirementsOnTheWire(t *testing.T) {
	f, _, _, plan := history(t)
	setRef(t, f.cat, f.opt.Identifier(), "audit", snapshotIDs(f.tbl)[4], table.TagRef, 0, 0)
	plan, err := PlanTable(context.Background(), f.reload(t), strictConfig(), plan.Now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(requirements(plan, newRefsRequirement(plan)))
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Type       string `json:"type"`
		Ref        string `json:"ref"`
		SnapshotID int64  `json:"snapshot-id"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	asserted := map[string]int64{}
	for _, r := range got {
		if r.Type == "assert-ref-snapshot-id" {
			asserted[r.Ref] = r.SnapshotID
		}
	}
	if len(asserted) != len(plan.Refs) || len(plan.Refs) != 2 {
		t.Fatalf("asserted refs %v, planned %v (JSON %s)", asserted, plan.Refs, b)
	}
	for name, id := range plan.Refs {
		if asserted[name] != id {
			t.Fatalf("ref %s asserted at %d, planned at %d (JSON %s)", name, asserted[name], id, b)
		}
	}
	if !strings.Contains(string(b), `"assert-table-uuid"`) {
		t.Fatalf("no assert-table-uuid in %s", b)
	}
}

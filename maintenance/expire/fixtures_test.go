package expire

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// loadFixture relocates a fixture into a hadoop-catalog warehouse.
func loadFixture(t *testing.T, name string) (*hadoop.Catalog, *table.Table, string) {
	return testenv.FixtureTable(t, name)
}

// TestExpireFixtures expires every snapshot but the current one of each
// table written by Spark, Flink, Hive, Impala and PyIceberg, then reads it
// with the independent verifier: the current snapshot holds the rows of
// expected.json, every file a remaining snapshot references exists, and the
// files only expired snapshots referenced are gone.
func TestExpireFixtures(t *testing.T) {
	expected := testenv.Expected(t)
	for _, name := range testenv.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			want := expected[name]
			cat, tbl, dir := loadFixture(t, name)
			before := capture(t, tbl, false)

			cfg := strictConfig() // retain_last 1, everything older than 1ms
			plan, err := PlanTable(ctx, tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(plan.Expired), len(want.Snapshots)-1; got != want {
				t.Fatalf("plan expires %d snapshots, want %d", got, want)
			}
			res, err := Execute(ctx, cat, tbl, plan, cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("expired %d snapshots, deleted %d files (%d bytes), %d unreadable", res.SnapshotsExpired(),
				res.FilesDeleted(), res.BytesDeleted(), len(plan.Unreadable))

			after, err := cat.LoadTable(ctx, tbl.Identifier())
			if err != nil {
				t.Fatal(err)
			}
			checkAfter(t, before, after, false)
			all := testenv.VerifyAll(t, dir)
			if len(all) != 1 {
				t.Fatalf("verifier sees %d snapshots, want 1", len(all))
			}
			cur := all[0]
			if cur.SnapshotID != want.CurrentSnapshotID || cur.Error != "" || cur.LiveRows != want.LiveRows || cur.Checksum != want.Checksum {
				t.Fatalf("current snapshot %s: %d rows %s (err %q); expected %s: %d rows %s", cur.SnapshotID,
					cur.LiveRows, cur.Checksum, cur.Error, want.CurrentSnapshotID, want.LiveRows, want.Checksum)
			}
		})
	}
}

// spark_v2_eqdel has a snapshot whose manifest list is missing upstream.
// Expiring it is fine: its unique files cannot be known and stay for the
// orphan pass, the others' files go. Keeping it (a tag) means no file can be
// proven unreferenced: snapshots still expire, but nothing is deleted.
func TestUnreadableSnapshot(t *testing.T) {
	const name = "spark_v2_eqdel"
	want := testenv.Expected(t)[name]
	var broken int64
	for _, s := range want.Snapshots {
		if s.Error != "" {
			broken, _ = strconv.ParseInt(s.SnapshotID, 10, 64)
		}
	}
	if broken == 0 {
		t.Fatal("fixture has no unreadable snapshot")
	}
	for _, tagged := range []bool{false, true} {
		t.Run(map[bool]string{false: "expired", true: "retained"}[tagged], func(t *testing.T) {
			ctx := context.Background()
			cat, tbl, dir := loadFixture(t, name)
			if tagged {
				setRef(t, cat, tbl.Identifier(), "keep-broken", broken, table.TagRef, 0, 0)
				tbl, _ = cat.LoadTable(ctx, tbl.Identifier())
			}
			before := capture(t, tbl, false)
			files := filesOnDisk(t, dir)
			plan, err := PlanTable(ctx, tbl, strictConfig(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Unreadable) != 1 || plan.Unreadable[0].SnapshotID != broken || plan.Unreadable[0].Retained != tagged {
				t.Fatalf("unreadable %+v", plan.Unreadable)
			}
			if tagged && (plan.FilesBlocked != BlockedUnreadable || len(plan.Files) != 0 || len(plan.Expired) != 4) {
				t.Fatalf("retained unreadable snapshot: blocked %q, %d files, %d expired", plan.FilesBlocked, len(plan.Files), len(plan.Expired))
			}
			if !tagged && (plan.FilesBlocked != "" || len(plan.Files) == 0 || len(plan.Expired) != 5) {
				t.Fatalf("expired unreadable snapshot: blocked %q, %d files, %d expired", plan.FilesBlocked, len(plan.Files), len(plan.Expired))
			}
			res, err := Execute(ctx, cat, tbl, plan, strictConfig(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			after, _ := cat.LoadTable(ctx, tbl.Identifier())
			if tagged {
				checkKept(t, before, after, false)
				if res.FilesDeleted() != 0 || res.FilesBlocked == "" || after.SnapshotByName("keep-broken") == nil {
					t.Fatalf("result %+v", res)
				}
				for _, p := range files {
					if !exists(t, p) {
						t.Fatalf("%s deleted although a retained snapshot is unreadable", p)
					}
				}
			} else {
				checkAfter(t, before, after, false)
			}
			// The missing manifest list is not planned, and nothing fails.
			if slices.ContainsFunc(plan.Files, func(f File) bool { return f.Path == plan.Unreadable[0].Path }) || len(res.DeleteFailures) != 0 {
				t.Fatalf("planned the unreadable list or failed deletes: %+v", res.DeleteFailures)
			}
			cur := testenv.Verify(t, dir)
			if cur.LiveRows != want.LiveRows || cur.Checksum != want.Checksum {
				t.Fatalf("current snapshot: %d rows %s, expected %d %s", cur.LiveRows, cur.Checksum, want.LiveRows, want.Checksum)
			}
		})
	}
}

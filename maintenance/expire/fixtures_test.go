package expire

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
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
			res, err := Execute(ctx, cat, tbl, plan, cfg, Options{Deleter: &localDeleter{}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("expired %d snapshots, deleted %d files (%d bytes), %d unreadable", res.SnapshotsExpired(),
				res.FilesDeleted(), res.BytesDeleted(), len(plan.Unreadable))

			after, err := cat.LoadTable(ctx, tbl.Identifier())
			if err != nil {
				t.Fatal(err)
			}
			if plan.FilesBlocked != "" {
				checkKept(t, before, after, false) // an expiring snapshot is unreadable: nothing deleted
			} else {
				checkAfter(t, before, after, false)
			}
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
// Expiring it is allowed, but no file at all is deleted: what it referenced
// is unknown. Keeping it (a tag) fails the plan, naming the list: nothing is
// committed while a retained snapshot cannot be read.
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
			list := tbl.Metadata().SnapshotByID(broken).ManifestList
			files := filesOnDisk(t, dir)
			plan, err := PlanTable(ctx, tbl, strictConfig(), time.Now())
			if tagged {
				if !errors.Is(err, ErrUnreadableRetained) || !errors.Is(err, manifestscan.ErrMissing) || !strings.Contains(err.Error(), list) {
					t.Fatalf("plan with a retained snapshot's list missing: %v, want ErrUnreadableRetained naming %s", err, list)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Unreadable) != 1 || plan.Unreadable[0].SnapshotID != broken || plan.Unreadable[0].Path != list {
				t.Fatalf("unreadable %+v", plan.Unreadable)
			}
			if !strings.HasPrefix(plan.FilesBlocked, BlockedUnreadable) || !strings.Contains(plan.FilesBlocked, list) ||
				len(plan.Files) != 0 || len(plan.Expired) != 5 {
				t.Fatalf("expired unreadable snapshot: blocked %q, %d files, %d expired", plan.FilesBlocked, len(plan.Files), len(plan.Expired))
			}
			res, err := Execute(ctx, cat, tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Committed || res.FilesDeleted() != 0 || res.FilesBlocked != plan.FilesBlocked {
				t.Fatalf("result %+v", res)
			}
			for _, p := range files {
				if !exists(t, p) {
					t.Fatalf("%s deleted although an expiring snapshot is unreadable", p)
				}
			}
			cur := testenv.Verify(t, dir)
			if cur.LiveRows != want.LiveRows || cur.Checksum != want.Checksum {
				t.Fatalf("current snapshot: %d rows %s, expected %d %s", cur.LiveRows, cur.Checksum, want.LiveRows, want.Checksum)
			}
		})
	}
}

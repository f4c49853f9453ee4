package orphans

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// TestOrphansOnFixtures runs orphan removal on a copy of every table that
// Spark, Flink, Hive, Impala and PyIceberg wrote in testdata/fixtures, with
// every file of the copy made old and old orphans planted, then reads every
// snapshot back with the independent verifier: all must still hold the rows
// of expected.json. It also checks the referenced set against iceberg-go's
// own orphan planner and the projected manifest-list decoding against
// iceberg-go's full decoding.
func TestOrphansOnFixtures(t *testing.T) {
	expected := testenv.Expected(t)
	for _, name := range testenv.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			want := expected[name]
			cat, tbl, dir := testenv.FixtureTable(t, name)
			now := time.Now()
			original := walkFiles(t, dir)
			for f := range original {
				age(t, f, now, old)
			}
			fs, err := tbl.FS(ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkDecoding(t, fs, tbl)

			// A folder holding live data files: a partition folder when the
			// table is partitioned (pyiceberg's is "_day=...", a partition
			// folder of a hidden-looking field, which must be cleaned).
			partDir := filepath.Join(dir, "data")
			if snap := tbl.CurrentSnapshot(); snap != nil {
				tasks, err := tbl.Scan().PlanFiles(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(tasks) > 0 {
					partDir = filepath.Dir(localPath(t, tasks[0].File.FilePath()))
				}
			}
			planted := []string{
				plant(t, filepath.Join(dir, "data", "00000-9-crashed-writer.parquet"), now, old),
				plant(t, filepath.Join(partDir, "00001-9-crashed-writer.parquet"), now, old),
				plant(t, filepath.Join(dir, "metadata", "snap-9-9-lost.avro"), now, old),
			}
			keep := []string{
				plant(t, filepath.Join(partDir, "00002-9-in-flight.parquet"), now, young),
				plant(t, filepath.Join(dir, "data", "_temporary", "0", "x.parquet"), now, old),
				plant(t, filepath.Join(dir, ".spark-staging", "y.parquet"), now, old),
				plant(t, filepath.Join(dir, "data", "_staging=1", "z.parquet"), now, old),
			}
			for f := range original {
				if strings.HasPrefix(filepath.Base(f), ".") {
					keep = append(keep, f) // Hadoop .crc side files: hidden
				}
			}

			cfg := DefaultConfig()
			store := objstore.IOStore{FS: fs}
			plan, err := PlanTable(ctx, tbl, store, cfg, now, nil)
			if unreadable(want) {
				// A snapshot of the fixture cannot be read (its manifest
				// list is missing): its files are unknown, so nothing may
				// be deleted.
				if !errors.Is(err, ErrMetadataRead) {
					t.Fatalf("plan of a table with an unreadable snapshot: %v; want ErrMetadataRead", err)
				}
				t.Logf("refused: %v", err)
				for _, p := range append(planted, keep...) {
					if !exists(p) {
						t.Errorf("deleted %s", p)
					}
				}
				verifyAllSnapshots(t, dir, want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := candidatePaths(plan)
			for _, p := range planted {
				if !slices.Contains(got, p) {
					t.Errorf("planted orphan %s is not a candidate", p)
				}
			}
			var fixtureOrphans []string
			for _, c := range got {
				if !slices.Contains(planted, c) {
					fixtureOrphans = append(fixtureOrphans, strings.TrimPrefix(c, dir+"/"))
				}
				if strings.HasSuffix(c, ".avro_tmp") {
					t.Logf("leftover %s is an old orphan: deleted", filepath.Base(c))
				}
			}
			t.Logf("location %s: %d listed, %d referenced, %d candidates; the fixture's own orphans: %v",
				tbl.Location(), plan.ListedFiles, plan.ReferencedFiles, len(got), fixtureOrphans)
			compareWithIcebergGo(t, tbl, plan, dir)

			res, err := Execute(ctx, cat, tbl, store, plan, cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.FilesDeleted != len(got) || len(res.NowReferenced) != 0 {
				t.Fatalf("result %+v", res)
			}
			for _, p := range planted {
				if exists(p) {
					t.Errorf("old orphan kept: %s", p)
				}
			}
			for _, p := range keep {
				if !exists(p) {
					t.Errorf("deleted %s", p)
				}
			}
			if !exists(localPath(t, tbl.MetadataLocation())) {
				t.Fatal("current metadata file deleted")
			}
			verifyAllSnapshots(t, dir, want)
		})
	}
}

func unreadable(want testenv.FixtureExpect) bool {
	for _, s := range want.Snapshots {
		if s.Error != "" {
			return true
		}
	}
	return false
}

// verifyAllSnapshots reads every snapshot with the independent verifier and
// compares it with expected.json.
func verifyAllSnapshots(t *testing.T, dir string, want testenv.FixtureExpect) {
	t.Helper()
	results := testenv.VerifyAll(t, dir)
	if len(results) != len(want.Snapshots) {
		t.Fatalf("%d snapshots read, expected.json has %d", len(results), len(want.Snapshots))
	}
	for _, s := range results {
		exp, ok := want.Snapshot(s.SnapshotID)
		if !ok {
			t.Fatalf("unknown snapshot %s", s.SnapshotID)
		}
		if exp.Error != "" {
			continue // unreadable in the fixture itself
		}
		if s.Error != "" || s.LiveRows != exp.LiveRows || s.Checksum != exp.Checksum {
			t.Errorf("snapshot %s: %d rows %s (err %q), expected %d rows %s", s.SnapshotID,
				s.LiveRows, s.Checksum, s.Error, exp.LiveRows, exp.Checksum)
		}
	}
}

// checkDecoding compares this package's Avro reading with iceberg-go's
// full decoding: the manifest paths and content types of every snapshot's
// manifest list, and the live paths of every manifest.
func checkDecoding(t *testing.T, fs iceio.IO, tbl *table.Table) {
	t.Helper()
	manifests := map[string]iceberg.ManifestFile{}
	for _, s := range tbl.Metadata().Snapshots() {
		if s.ManifestList == "" {
			continue
		}
		theirs, err := s.Manifests(fs)
		var mine []listEntry
		_, merr := manifestscan.ReadList(fs, s.ManifestList, manifestscan.ListOptions{Fields: manifestscan.ListLength}, func(e *manifestscan.ListEntry) error {
			mine = append(mine, listEntry{string(e.Path), e.Length})
			return nil
		})
		if err != nil {
			if merr == nil {
				t.Fatalf("iceberg-go cannot read manifest list %s (%v), we can", s.ManifestList, err)
			}
			continue
		}
		if merr != nil {
			t.Fatalf("read manifest list %s: %v", s.ManifestList, merr)
		}
		if len(mine) != len(theirs) {
			t.Fatalf("%s: %d entries, iceberg-go reads %d", s.ManifestList, len(mine), len(theirs))
		}
		for i, m := range theirs {
			manifests[m.FilePath()] = m
			if mine[i].path != m.FilePath() || mine[i].length != m.Length() {
				t.Fatalf("%s entry %d: %+v, iceberg-go reads %s (%d bytes)", s.ManifestList, i, mine[i], m.FilePath(), m.Length())
			}
		}
	}
	for path, m := range manifests {
		var want, got []string
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				t.Fatalf("iceberg-go reads manifest %s: %v", path, err)
			}
			want = append(want, e.DataFile().FilePath())
			if ref := e.DataFile().ReferencedDataFile(); ref != nil {
				want = append(want, "ref:"+*ref)
			}
		}
		opt := manifestscan.ManifestOptions{Fields: manifestscan.ManifestReferencedDataFile, Length: m.Length()}
		err := manifestscan.ReadManifest(fs, path, opt, func(e *manifestscan.ManifestEntry) error {
			if e.Status == manifestscan.StatusDeleted {
				return nil
			}
			got = append(got, string(e.FilePath))
			if e.ReferencedDataFile != nil {
				got = append(got, "ref:"+string(e.ReferencedDataFile))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read manifest %s: %v", path, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("manifest %s: live paths %v, iceberg-go reads %v", path, got, want)
		}
	}
}

type listEntry struct {
	path   string
	length int64
}

// compareWithIcebergGo runs iceberg-go's own orphan planner on the same
// table: apart from hidden files (which it does not skip), it must find
// the same orphans. This cross-checks the referenced set.
func compareWithIcebergGo(t *testing.T, tbl *table.Table, plan *Plan, dir string) {
	t.Helper()
	theirs, err := tbl.PlanOrphanFiles(context.Background(), table.WithFilesOlderThan(plan.MinAge),
		table.WithEqualSchemes(map[string]string{"s3a,s3n": "s3"}))
	if err != nil {
		t.Logf("iceberg-go's planner fails on this table, no cross-check: %v", err)
		return
	}
	var want []string
	for _, f := range theirs.Files() {
		p := localPath(t, f)
		if rel, ok := strings.CutPrefix(p, dir+"/"); ok && hiddenSegment(rel, plan.hiddenFields) != "" {
			continue
		}
		want = append(want, p)
	}
	slices.Sort(want)
	if got := candidatePaths(plan); !slices.Equal(got, want) {
		t.Errorf("candidates differ from iceberg-go's orphans (minus hidden):\nours:   %v\ntheirs: %v", got, want)
	}
}

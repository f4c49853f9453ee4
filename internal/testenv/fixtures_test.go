package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExpected checks that expected.json covers exactly the fixture folders
// and that 64-bit snapshot ids come through exactly.
func TestExpected(t *testing.T) {
	exp := Expected(t)
	entries, err := os.ReadDir(FixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(FixturesDir(t), e.Name(), "metadata")); err == nil && fi.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if names := FixtureNames(t); !slices.Equal(names, dirs) {
		t.Fatalf("expected.json names %v, fixture folders %v", names, dirs)
	}
	for name, f := range exp {
		if f.Name != name || len(f.Snapshots) == 0 {
			t.Errorf("%s: name %q, %d snapshots", name, f.Name, len(f.Snapshots))
		}
		cur, ok := f.Snapshot(f.CurrentSnapshotID)
		if !ok || cur.LiveRows != f.LiveRows || cur.Checksum != f.Checksum {
			t.Errorf("%s: current snapshot %s: %+v (found %v), want %d rows %s", name, f.CurrentSnapshotID, cur, ok, f.LiveRows, f.Checksum)
		}
	}
	// 853766660775201079 and 7342794868382145167 do not survive a float64.
	eq := exp["spark_v2_eqdel"]
	if len(eq.Snapshots) != 6 || eq.Snapshots[0].SnapshotID != "853766660775201079" ||
		eq.Snapshots[1].SnapshotID != "7342794868382145167" || eq.Snapshots[1].Error == "" ||
		eq.CurrentSnapshotID != "1916084761853986166" || eq.LiveRows != 2 {
		t.Errorf("spark_v2_eqdel: %+v", eq)
	}
}

// TestRelocatedFixturesMatchExpected proves the harness: every fixture,
// relocated into a temporary warehouse, reads back through the verifier with
// the row counts, checksums and file counts of expected.json in every
// snapshot. --strict-paths makes position deletes match only when the
// relocation rewrote their file_path values too.
func TestRelocatedFixturesMatchExpected(t *testing.T) {
	exp := Expected(t)
	warehouse := t.TempDir()
	metas := RelocateAll(t, warehouse, "default")
	if len(metas) != len(exp) {
		t.Errorf("relocated %d tables, expected.json has %d", len(metas), len(exp))
	}
	for _, name := range FixtureNames(t) {
		want := exp[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			meta, ok := metas[name]
			if !ok {
				t.Fatalf("not relocated")
			}
			if dir := filepath.Join(warehouse, "default", name, "metadata"); filepath.Dir(meta) != dir {
				t.Errorf("metadata %s is not in %s", meta, dir)
			}
			r := Verify(t, meta, AllSnapshots(), StrictPaths())
			if r.SnapshotID != want.CurrentSnapshotID || r.LiveRows != want.LiveRows || r.Checksum != want.Checksum {
				t.Errorf("current snapshot %s: %d rows, checksum %s; want %s: %d rows, %s",
					r.SnapshotID, r.LiveRows, r.Checksum, want.CurrentSnapshotID, want.LiveRows, want.Checksum)
			}
			if r.FormatVersion != want.FormatVersion || r.Metadata != meta {
				t.Errorf("format version %d, metadata %s; want %d, %s", r.FormatVersion, r.Metadata, want.FormatVersion, meta)
			}
			if len(r.Snapshots) != len(want.Snapshots) {
				t.Fatalf("%d snapshots, want %d", len(r.Snapshots), len(want.Snapshots))
			}
			for i, got := range r.Snapshots {
				w := want.Snapshots[i]
				switch {
				case got.SnapshotID != w.SnapshotID:
					t.Errorf("snapshot %d: id %s, want %s", i, got.SnapshotID, w.SnapshotID)
				case w.Error != "":
					t.Logf("snapshot %s unreadable as expected (%s); verifier: %q", w.SnapshotID, w.Error, got.Error)
				case got.Error != "":
					t.Errorf("snapshot %s: %s", got.SnapshotID, got.Error)
				case got.LiveRows != w.LiveRows || got.Checksum != w.Checksum ||
					got.DataFiles != w.DataFiles || got.PositionDeleteFiles != w.PositionDeleteFiles ||
					got.DeletionVectors != w.DeletionVectors || got.EqualityDeleteFiles != w.EqualityDeleteFiles:
					t.Errorf("snapshot %s: %d rows %s, files %d data %d pos %d dv %d eq; want %d rows %s, files %d/%d/%d/%d",
						got.SnapshotID, got.LiveRows, got.Checksum, got.DataFiles, got.PositionDeleteFiles,
						got.DeletionVectors, got.EqualityDeleteFiles, w.LiveRows, w.Checksum,
						w.DataFiles, w.PositionDeleteFiles, w.DeletionVectors, w.EqualityDeleteFiles)
				}
			}
		})
	}
}

// TestRelocateOneAndVerifyModes covers Relocate with a namespace and name of
// its own, Verify of a table folder and of one snapshot, and TryVerify of the
// snapshot whose manifest list is missing from the fixture.
func TestRelocateOneAndVerifyModes(t *testing.T) {
	want := Expected(t)["spark_v2_eqdel"]
	warehouse := t.TempDir()
	meta := Relocate(t, "spark_v2_eqdel", warehouse, "ns", "renamed")
	tableDir := filepath.Join(warehouse, "ns", "renamed")
	if filepath.Dir(meta) != filepath.Join(tableDir, "metadata") {
		t.Fatalf("metadata %s is not in %s", meta, tableDir)
	}

	cur := Verify(t, tableDir)
	if cur.SnapshotID != want.CurrentSnapshotID || cur.LiveRows != want.LiveRows || cur.Checksum != want.Checksum ||
		len(cur.Snapshots) != 1 || cur.Snapshots[0] != cur.SnapshotResult || cur.Metadata != meta {
		t.Errorf("current: %+v; want %s, %d rows, %s", cur, want.CurrentSnapshotID, want.LiveRows, want.Checksum)
	}

	first := want.Snapshots[0]
	old := Verify(t, meta, SnapshotID(first.SnapshotID))
	if old.SnapshotID != first.SnapshotID || old.LiveRows != first.LiveRows || old.Checksum != first.Checksum {
		t.Errorf("snapshot %s: %+v; want %d rows, %s", first.SnapshotID, old.SnapshotResult, first.LiveRows, first.Checksum)
	}

	// AllSnapshots with SnapshotID picks that snapshot's entry.
	if r := Verify(t, meta, AllSnapshots(), SnapshotID(first.SnapshotID)); r.SnapshotResult != old.SnapshotResult || len(r.Snapshots) != len(want.Snapshots) {
		t.Errorf("all snapshots, picked %s: %+v", first.SnapshotID, r.SnapshotResult)
	}

	missing := want.Snapshots[1]
	if missing.Error == "" {
		t.Fatalf("expected.json no longer marks snapshot %s unreadable", missing.SnapshotID)
	}
	_, err := TryVerify(t, meta, SnapshotID(missing.SnapshotID))
	if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "snap-"+missing.SnapshotID) {
		t.Errorf("TryVerify of snapshot %s: %v; want an ErrVerify naming its manifest list", missing.SnapshotID, err)
	}
	all := VerifyAll(t, tableDir)
	if len(all) != len(want.Snapshots) || all[1].SnapshotID != missing.SnapshotID || all[1].Error == "" {
		t.Errorf("VerifyAll: %+v", all)
	}
}

package verify_test

import (
	"path/filepath"
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/internal/testenv/verify"
)

// TestFixturesInPlace reads every snapshot of every fixture where it lies,
// with the writers' paths mapped onto its folder, and compares row counts,
// checksums and file counts with expected.json.
func TestFixturesInPlace(t *testing.T) {
	dir := testenv.FixturesDir(t)
	readable := 0
	for name, want := range testenv.Expected(t) {
		got, cur, err := verify.AllSnapshots(filepath.Join(dir, name), verify.Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if cur != want.CurrentSnapshotID || len(got) != len(want.Snapshots) {
			t.Errorf("%s: current %s, %d snapshots; want %s, %d", name, cur, len(got), want.CurrentSnapshotID, len(want.Snapshots))
			continue
		}
		if got[0].Metadata != filepath.Join(dir, want.Metadata) || got[0].FormatVersion != want.FormatVersion {
			t.Errorf("%s: metadata %s, format %d; want %s, %d", name, got[0].Metadata, got[0].FormatVersion, want.Metadata, want.FormatVersion)
		}
		for i, g := range got {
			w := want.Snapshots[i]
			switch {
			case g.SnapshotID != w.SnapshotID:
				t.Errorf("%s: snapshot %d: id %s, want %s", name, i, g.SnapshotID, w.SnapshotID)
			case w.Error != "":
				if g.Error == "" {
					t.Errorf("%s: snapshot %s read; want an error like %q", name, g.SnapshotID, w.Error)
				}
			case g.Error != "":
				t.Errorf("%s: snapshot %s: %s", name, g.SnapshotID, g.Error)
			case g.LiveRows != w.LiveRows || g.Checksum != w.Checksum || g.DataFiles != w.DataFiles ||
				g.PositionDeleteFiles != w.PositionDeleteFiles || g.DeletionVectors != w.DeletionVectors ||
				g.EqualityDeleteFiles != w.EqualityDeleteFiles:
				t.Errorf("%s: snapshot %s: %d rows %s, files %d/%d/%d/%d; want %d rows %s, files %d/%d/%d/%d",
					name, g.SnapshotID, g.LiveRows, g.Checksum, g.DataFiles, g.PositionDeleteFiles, g.DeletionVectors,
					g.EqualityDeleteFiles, w.LiveRows, w.Checksum, w.DataFiles, w.PositionDeleteFiles,
					w.DeletionVectors, w.EqualityDeleteFiles)
			default:
				readable++
			}
		}
	}
	if readable != 57 {
		t.Errorf("%d snapshots matched expected.json, want 57", readable)
	}
}

package verify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

const fixtures = "../../../testdata/fixtures"

type expectedSnapshot struct {
	SnapshotID          json.Number `json:"snapshot_id"`
	LiveRows            int64       `json:"live_rows"`
	Checksum            string      `json:"checksum"`
	DataFiles           int         `json:"data_files"`
	PositionDeleteFiles int         `json:"position_delete_files"`
	DeletionVectors     int         `json:"deletion_vectors"`
	EqualityDeleteFiles int         `json:"equality_delete_files"`
	Error               string      `json:"error"`
}

// TestFixturesInPlace reads every snapshot of every fixture where it lies,
// with the writers' paths mapped onto the folder, and compares row counts,
// checksums and file counts with expected.json.
func TestFixturesInPlace(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixtures, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp map[string]struct {
		Metadata          string             `json:"metadata"`
		CurrentSnapshotID json.Number        `json:"current_snapshot_id"`
		Snapshots         []expectedSnapshot `json:"snapshots"`
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp) != 19 {
		t.Fatalf("expected.json has %d fixtures", len(exp))
	}
	readable := 0
	for name, want := range exp {
		t.Run(name, func(t *testing.T) {
			got, cur, err := AllSnapshots(filepath.Join(fixtures, name), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if cur != want.CurrentSnapshotID.String() || len(got) != len(want.Snapshots) {
				t.Fatalf("current %s, %d snapshots; want %s, %d", cur, len(got), want.CurrentSnapshotID, len(want.Snapshots))
			}
			if wantMeta, _ := filepath.Abs(filepath.Join(fixtures, want.Metadata)); got[0].Metadata != wantMeta {
				t.Errorf("metadata %s, want %s", got[0].Metadata, wantMeta)
			}
			for i, g := range got {
				w := want.Snapshots[i]
				switch {
				case g.SnapshotID != w.SnapshotID.String():
					t.Errorf("snapshot %d: id %s, want %s", i, g.SnapshotID, w.SnapshotID)
				case w.Error != "":
					if g.Error == "" {
						t.Errorf("snapshot %s: read, want an error like %q", g.SnapshotID, w.Error)
					}
				case g.Error != "":
					t.Errorf("snapshot %s: %s", g.SnapshotID, g.Error)
				case g.LiveRows != w.LiveRows || g.Checksum != w.Checksum || g.DataFiles != w.DataFiles ||
					g.PositionDeleteFiles != w.PositionDeleteFiles || g.DeletionVectors != w.DeletionVectors ||
					g.EqualityDeleteFiles != w.EqualityDeleteFiles:
					t.Errorf("snapshot %s: %d rows %s, files %d/%d/%d/%d; want %d rows %s, files %d/%d/%d/%d",
						g.SnapshotID, g.LiveRows, g.Checksum, g.DataFiles, g.PositionDeleteFiles, g.DeletionVectors,
						g.EqualityDeleteFiles, w.LiveRows, w.Checksum, w.DataFiles, w.PositionDeleteFiles,
						w.DeletionVectors, w.EqualityDeleteFiles)
				default:
					readable++
				}
			}
		})
	}
	if readable != 57 {
		t.Errorf("%d snapshots matched, want 57", readable)
	}
}

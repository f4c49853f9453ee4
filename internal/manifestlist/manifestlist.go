// Package manifestlist writes the manifest list of a snapshot the
// maintainer builds itself (compaction's re-applied retry, the manifest
// rewrite), for every table format version.
package manifestlist

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// NewSnapshotID returns a snapshot id the table does not use, made as
// Iceberg makes them (the two halves of a random UUID folded).
func NewSnapshotID(meta table.Metadata) int64 {
	for {
		u := uuid.New()
		id := int64((binary.LittleEndian.Uint64(u[:8]) ^ binary.LittleEndian.Uint64(u[8:])) & math.MaxInt64)
		if id != 0 && meta.SnapshotByID(id) == nil {
			return id
		}
	}
}

// Write writes snap's manifest list, listing list, to snap.ManifestList for
// a table of format version. On v3, data manifests without a first row id
// take row ids from nextRowID (the table's next-row-id) and snap records
// them (FirstRowID, AddedRows), as the table metadata requires. A list that
// could not be written in full is removed.
func Write(fs iceio.WriteFileIO, snap *table.Snapshot, version int, nextRowID int64, list []iceberg.ManifestFile) (err error) {
	f, err := fs.Create(snap.ManifestList)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = fs.Remove(snap.ManifestList)
		}
	}()
	var w *iceberg.ManifestListWriter
	switch version {
	case 1:
		w, err = iceberg.NewManifestListWriterV1(f, snap.SnapshotID, snap.ParentSnapshotID)
	case 2:
		w, err = iceberg.NewManifestListWriterV2(f, snap.SnapshotID, snap.SequenceNumber, snap.ParentSnapshotID)
	case 3:
		w, err = iceberg.NewManifestListWriterV3(f, snap.SnapshotID, snap.SequenceNumber, nextRowID, snap.ParentSnapshotID)
	default:
		return fmt.Errorf("format version %d", version)
	}
	if err != nil {
		return err
	}
	if err := w.AddManifests(list); err != nil {
		_ = w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if version == 3 {
		first, added := nextRowID, *w.NextRowID()-nextRowID
		snap.FirstRowID, snap.AddedRows = &first, &added
	}
	return nil
}

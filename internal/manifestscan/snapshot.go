package manifestscan

import (
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// ReadSnapshot calls fn for each manifest that snapshot s lists: the
// entries of its manifest list, or, where v1 metadata embeds the manifest
// locations in the snapshot instead, those as iceberg-go reads them (each
// file's length, s as the adding snapshot, unknown counts as -1). size is
// the manifest list's size, 0 when there is none. Errors are as ReadList's;
// reading embedded locations fails with iceberg-go's error.
func ReadSnapshot(fs iceio.IO, s *table.Snapshot, opt ListOptions, fn func(*ListEntry) error) (size int64, err error) {
	if s.ManifestList != "" {
		return ReadList(fs, s.ManifestList, opt, fn)
	}
	mans, err := s.Manifests(fs)
	if err != nil {
		return 0, err
	}
	for _, m := range mans {
		e := listEntryOf(m)
		if err := fn(&e); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// listEntryOf is iceberg-go's manifest record as a ListEntry.
func listEntryOf(m iceberg.ManifestFile) ListEntry {
	return ListEntry{
		Path: []byte(m.FilePath()), Length: m.Length(), SpecID: m.PartitionSpecID(),
		Content: int32(m.ManifestContent()), SequenceNumber: m.SequenceNum(), MinSequenceNumber: m.MinSequenceNum(),
		AddedSnapshotID: m.SnapshotID(), AddedFiles: m.AddedDataFiles(), ExistingFiles: m.ExistingDataFiles(),
		DeletedFiles: m.DeletedDataFiles(), AddedRows: m.AddedRows(), ExistingRows: m.ExistingRows(), DeletedRows: m.DeletedRows(),
	}
}

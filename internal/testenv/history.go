package testenv

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

// CompactionHistory reads the maintainer's compaction snapshots of the
// table: how many there are, and how often each data file was replaced by
// one (a file replaced twice means a group was committed twice).
func CompactionHistory(ctx context.Context, tbl *table.Table) (commits int, replaced map[string]int, err error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0, nil, err
	}
	replaced = map[string]int{}
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary == nil || s.Summary.Properties[tableprops.SummaryOperation] != "compact" {
			continue
		}
		commits++
		mans, err := s.Manifests(fs)
		if err != nil {
			return 0, nil, fmt.Errorf("manifest list of snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range mans {
			for e, err := range m.Entries(fs, false) {
				if err != nil {
					return 0, nil, fmt.Errorf("manifest %s: %w", m.FilePath(), err)
				}
				if e.SnapshotID() == s.SnapshotID && e.Status() == iceberg.EntryStatusDELETED {
					replaced[e.DataFile().FilePath()]++
				}
			}
		}
	}
	return commits, replaced, nil
}

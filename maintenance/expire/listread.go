package expire

import (
	"context"
	"fmt"
	"sync"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
)

// listEntry is the part of a manifest list entry that expiry needs: which
// manifest, and how long it is.
type listEntry struct {
	Path   string
	Length int64
}

// listOptions reads manifest_path and manifest_length only; a list without
// manifest_length is not one expiry understands. specListOptions also reads
// partition_spec_id (required by the spec), for clean_expired_metadata: a
// list without it cannot show which specs are in use.
var (
	listOptions     = manifestscan.ListOptions{Fields: manifestscan.ListLength, Required: manifestscan.ListLength}
	specListOptions = manifestscan.ListOptions{Fields: manifestscan.ListLength | manifestscan.ListSpecID,
		Required: manifestscan.ListLength | manifestscan.ListSpecID}
)

// visitList calls visit for each manifest of a snapshot's list and returns
// the list's size. visit gets each entry's path, valid only during the
// call: looking it up in a map costs no allocation, and most paths of an
// expiring list are only looked up. On an error, visit may already have
// seen some entries.
func visitList(fs iceio.IO, s table.Snapshot, visit func(path []byte, length int64)) (int64, error) {
	return visitEntries(fs, s, listOptions, func(e *manifestscan.ListEntry) { visit(e.Path, e.Length) })
}

// visitEntries is visitList with the fields of opt.
func visitEntries(fs iceio.IO, s table.Snapshot, opt manifestscan.ListOptions, visit func(e *manifestscan.ListEntry)) (int64, error) {
	return manifestscan.ReadSnapshot(fs, &s, opt, func(e *manifestscan.ListEntry) error {
		visit(e)
		return nil
	})
}

// readList returns a snapshot's manifests.
func readList(fs iceio.IO, s table.Snapshot) ([]listEntry, error) {
	var out []listEntry
	_, err := visitList(fs, s, func(path []byte, length int64) {
		out = append(out, listEntry{Path: string(path), Length: length})
	})
	return out, err
}

// manifestsOf reads the lists of snaps and returns, once each, the
// manifests whose key want accepts.
func manifestsOf(ctx context.Context, fs iceio.IO, snaps []table.Snapshot, want func(string) bool) ([]listEntry, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var out []listEntry
	err := forEach(ctx, snaps, func(s table.Snapshot) error {
		mans, err := readList(fs, s)
		if err != nil {
			return fmt.Errorf("snapshot %d: %w", s.SnapshotID, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range mans {
			if k := key(m.Path); want(k) && !seen[k] {
				seen[k] = true
				out = append(out, m)
			}
		}
		return nil
	})
	return out, err
}

// manifestOptions reads what expiry weighs of a data or delete file.
var manifestOptions = manifestscan.ManifestOptions{Fields: manifestscan.ManifestContent | manifestscan.ManifestFileSize}

// readEntries calls fn for each entry of manifest m, DELETED ones too
// unless live. A manifest whose size is not the manifest_length its list
// records is an error: one cut at a block boundary decodes as a shorter,
// valid manifest, and a retained one read short would hide live files.
func readEntries(fs iceio.IO, m listEntry, live bool, fn func(e *manifestscan.ManifestEntry)) error {
	opt := manifestOptions
	opt.Length = m.Length
	return manifestscan.ReadManifest(fs, m.Path, opt, func(e *manifestscan.ManifestEntry) error {
		if !live || e.Status != manifestscan.StatusDeleted {
			fn(e)
		}
		return nil
	})
}

func distinctSnapshots(m map[string]table.Snapshot) []table.Snapshot {
	seen := map[int64]bool{}
	var out []table.Snapshot
	for _, s := range m {
		if !seen[s.SnapshotID] {
			seen[s.SnapshotID] = true
			out = append(out, s)
		}
	}
	return out
}

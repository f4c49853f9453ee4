package expire

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// listEntry is the part of a manifest list entry that expiry needs to decide
// which manifests are referenced.
type listEntry struct {
	Path   string
	Length int64
}

// visitList calls visit for each manifest of a snapshot's list (see
// scanList) and returns the list's size. If scanList cannot read the list
// (an unexpected codec or schema), iceberg-go's reader does, and its error
// is the one returned; visit may then see a path twice.
func visitList(fs iceio.IO, s table.Snapshot, visit func(path []byte, length int64)) (int64, error) {
	if s.ManifestList == "" {
		mans, err := s.Manifests(fs) // v1 snapshots may embed manifest paths
		for _, m := range mans {
			visit([]byte(m.FilePath()), m.Length())
		}
		return 0, err
	}
	data, err := readAll(fs, s.ManifestList)
	if err != nil {
		return 0, err
	}
	if err := scanList(data, visit); err == nil {
		return int64(len(data)), nil
	}
	mans, err := iceberg.ReadManifestList(bytes.NewReader(data))
	for _, m := range mans {
		visit([]byte(m.FilePath()), m.Length())
	}
	return int64(len(data)), err
}

func toEntries(mans []iceberg.ManifestFile) []listEntry {
	out := make([]listEntry, len(mans))
	for i, m := range mans {
		out[i] = listEntry{Path: m.FilePath(), Length: m.Length()}
	}
	return out
}

// readManifestList returns a snapshot's full manifest records.
func readManifestList(fs iceio.IO, s table.Snapshot) ([]iceberg.ManifestFile, error) {
	if s.ManifestList == "" {
		return s.Manifests(fs)
	}
	data, err := readAll(fs, s.ManifestList)
	if err != nil {
		return nil, err
	}
	return iceberg.ReadManifestList(bytes.NewReader(data))
}

func readAll(fs iceio.IO, path string) (_ []byte, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	return io.ReadAll(f)
}

// manifestsOf reads the full lists of snaps and returns, once each, the
// manifests whose key want accepts.
func manifestsOf(ctx context.Context, fs iceio.IO, snaps []table.Snapshot, want func(string) bool) ([]iceberg.ManifestFile, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var out []iceberg.ManifestFile
	err := forEach(ctx, snaps, func(s table.Snapshot) error {
		mans, err := readManifestList(fs, s)
		if err != nil {
			return fmt.Errorf("read manifest list of snapshot %d: %w", s.SnapshotID, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range mans {
			if k := key(m.FilePath()); want(k) && !seen[k] {
				seen[k] = true
				out = append(out, m)
			}
		}
		return nil
	})
	return out, err
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

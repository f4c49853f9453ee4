package orphans

import (
	"context"
	"errors"
	"fmt"
	"sync"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
)

// ErrMetadataRead wraps any failure to read a manifest list or manifest;
// nothing is deleted when it happens.
var ErrMetadataRead = errors.New("cannot read table metadata")

// refStats counts what the walk read.
type refStats struct {
	Snapshots     int
	ManifestLists int
	Manifests     int // distinct manifests read
	Entries       int // manifest entries read (live ones)
}

// walkReferences streams every path the table metadata references into
// sink: the current metadata file and the metadata log, version-hint.text,
// statistics and partition-statistics files, every snapshot's manifest list
// (all snapshots in the metadata, so every branch and tag), every manifest
// they list and every data and delete file those manifests hold live (and
// the data file a deletion vector points at). Each manifest is read once,
// however many snapshots share it; manifest lists are decoded for their
// manifest paths only and never held together. Any read error aborts.
//
// known records the manifest lists and manifests already read: a walk skips
// them (their files are already in sink), so walking the metadata of a later
// commit reads only what that commit added. Lists and manifests are
// immutable, so a path read once needs no second read. A walk that fails
// leaves known holding paths it did not finish; do not walk with it again.
//
// sink must be safe for concurrent use; it gets batches.
func walkReferences(ctx context.Context, fs iceio.IO, meta table.Metadata, metadataLocation string, concurrency int, known *walked, sink func([]string) error) (refStats, error) {
	var st refStats
	top := []string{metadataLocation, join(meta.Location(), "metadata/version-hint.text")}
	for e := range meta.PreviousFiles() {
		top = append(top, e.MetadataFile)
	}
	for sf := range meta.Statistics() {
		if sf.StatisticsPath != "" {
			top = append(top, sf.StatisticsPath)
		}
	}
	for psf := range meta.PartitionStatistics() {
		if psf.StatisticsPath != "" {
			top = append(top, psf.StatisticsPath)
		}
	}
	if metadataLocation == "" {
		top = top[1:]
	}
	if err := sink(top); err != nil {
		return st, err
	}

	snaps := meta.Snapshots()
	st.Snapshots = len(snaps)
	// A ref to a snapshot missing from the metadata would hide that
	// snapshot's files: refuse rather than guess.
	for name, ref := range meta.Refs() {
		if meta.SnapshotByID(ref.SnapshotID) == nil {
			return st, fmt.Errorf("%w: ref %q points at snapshot %d, which the metadata does not hold", ErrMetadataRead, name, ref.SnapshotID)
		}
	}
	if len(snaps) > 0 && fs == nil {
		return st, errors.New("no table IO to read manifests with")
	}

	concurrency = max(1, concurrency)
	g, gctx := errgroup.WithContext(ctx)
	lists := make(chan table.Snapshot)
	type manifestJob struct {
		path   string
		length int64
	}
	manifests := make(chan manifestJob, 1024)

	var mu sync.Mutex
	count := func(lists, manifests, entries int) {
		mu.Lock()
		st.ManifestLists += lists
		st.Manifests += manifests
		st.Entries += entries
		mu.Unlock()
	}

	g.Go(func() error {
		defer close(lists)
		for _, s := range snaps {
			select {
			case lists <- s:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})

	var listers sync.WaitGroup
	for range concurrency {
		listers.Add(1)
		g.Go(func() error {
			defer listers.Done()
			for s := range lists {
				var fresh []string
				var lengths []int64
				if s.ManifestList != "" {
					if !known.lists.add([]byte(s.ManifestList)) {
						continue
					}
					if err := sink([]string{s.ManifestList}); err != nil {
						return err
					}
				}
				_, err := manifestscan.ReadSnapshot(fs, &s, manifestscan.ListOptions{Fields: manifestscan.ListLength, Required: manifestscan.ListLength}, func(e *manifestscan.ListEntry) error {
					if known.manifests.add(e.Path) {
						fresh = append(fresh, string(e.Path))
						lengths = append(lengths, e.Length)
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("%w: snapshot %d: %v", ErrMetadataRead, s.SnapshotID, err)
				}
				if err := sink(fresh); err != nil {
					return err
				}
				count(1, 0, 0)
				for i, m := range fresh {
					select {
					case manifests <- manifestJob{m, lengths[i]}:
					case <-gctx.Done():
						return gctx.Err()
					}
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		listers.Wait()
		close(manifests)
		return nil
	})

	for range concurrency {
		g.Go(func() error {
			batch := make([]string, 0, 1024)
			for m := range manifests {
				n := 0
				// DELETED entries are not live in any snapshot that lists the
				// manifest, as in Java's and iceberg-go's orphan planners. The
				// manifest must be as long as its list says: a truncated one
				// would hide live files.
				opt := manifestscan.ManifestOptions{Fields: manifestscan.ManifestReferencedDataFile, Length: m.length}
				err := manifestscan.ReadManifest(fs, m.path, opt, func(e *manifestscan.ManifestEntry) error {
					if e.Status == manifestscan.StatusDeleted {
						return nil
					}
					batch = append(batch, string(e.FilePath))
					if e.ReferencedDataFile != nil {
						batch = append(batch, string(e.ReferencedDataFile))
					}
					n++
					if len(batch) >= cap(batch)-1 {
						if err := sink(batch); err != nil {
							return err
						}
						batch = batch[:0]
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("%w: %v", ErrMetadataRead, err)
				}
				if err := sink(batch); err != nil {
					return err
				}
				batch = batch[:0]
				count(0, 1, n)
				if err := gctx.Err(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return st, err
	}
	return st, ctx.Err()
}

// walked is what walks with it have read, by path: manifest lists and
// manifests.
type walked struct{ lists, manifests *seenSet }

func newWalked() *walked { return &walked{lists: newSeenSet(), manifests: newSeenSet()} }

// seenSet records the paths already queued, by path hash, in shards.
type seenSet struct {
	h      hasher
	shards [64]struct {
		mu sync.Mutex
		m  map[pathHash]struct{}
	}
}

func newSeenSet() *seenSet {
	s := &seenSet{h: newHasher()}
	for i := range s.shards {
		s.shards[i].m = map[pathHash]struct{}{}
	}
	return s
}

// add marks path seen and reports whether it was new.
func (s *seenSet) add(path []byte) bool {
	h := s.h.sumBytes(path)
	sh := &s.shards[h[0]%uint64(len(s.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[h]; ok {
		return false
	}
	sh.m[h] = struct{}{}
	return true
}

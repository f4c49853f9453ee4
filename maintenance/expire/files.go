package expire

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
)

// readConcurrency is how many manifest lists or manifests are read at once.
// Reads are small and latency-bound on object stores.
const readConcurrency = 8

// planFiles finds the files that only expired snapshots reference: their
// manifest lists, the manifests no retained snapshot lists, the data and
// delete files of those manifests that no retained manifest holds live, and
// the statistics files of expired snapshots. Each manifest is read once and
// its entries streamed; each manifest list is scanned once for its paths,
// and again only when one of its manifests must be opened. Memory is
// bounded by the candidates and the retained manifest paths.
//
// Every retained manifest list and manifest is read in full, whether or not
// a candidate needs it: any error there fails the plan, so that nothing is
// committed while the snapshots that stay cannot be read. A bad manifest
// list or manifest of an expiring snapshot (missing, truncated, corrupt)
// does not stop the snapshots from expiring, but blocks every delete
// (FilesBlocked); an error reaching the store fails the plan. A non-nil
// specs collects the partition spec ids of the retained manifests.
func planFiles(ctx context.Context, fs iceio.IO, meta table.Metadata, keep map[int64]bool, p *Plan, specs map[int32]bool) error {
	expired := make(map[int64]bool, len(p.Expired))
	for _, e := range p.Expired {
		expired[e.SnapshotID] = true
	}
	var kept, gone []table.Snapshot
	for _, s := range meta.Snapshots() {
		if expired[s.SnapshotID] {
			gone = append(gone, s)
		} else {
			kept = append(kept, s)
		}
	}

	var mu sync.Mutex
	p.retained = make(map[int64]string, len(kept))
	p.retainedManifests = map[string]struct{}{}
	retainedLists := map[string]struct{}{}
	err := forEach(ctx, kept, func(s table.Snapshot) error {
		var paths []string
		var used []int32
		opt := listOptions
		if specs != nil {
			opt = specListOptions
		}
		_, err := visitEntries(fs, s, opt, func(e *manifestscan.ListEntry) {
			paths = append(paths, key(string(e.Path)))
			used = append(used, e.SpecID)
		})
		if err != nil {
			return retainedErr(s.SnapshotID, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if specs != nil {
			for _, id := range used {
				specs[id] = true
			}
		}
		p.retained[s.SnapshotID] = s.ManifestList
		retainedLists[key(s.ManifestList)] = struct{}{}
		for _, k := range paths {
			p.retainedManifests[k] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return err
	}

	files := map[string]File{}              // by key
	candFrom := map[string]table.Snapshot{} // candidate manifest -> a snapshot listing it
	err = forEach(ctx, gone, func(s table.Snapshot) error {
		// Most paths here are retained ones: look them up without copying.
		var cands []string
		size, err := visitList(fs, s, func(path []byte, _ int64) {
			if !retainedKey(p.retainedManifests, path) {
				cands = append(cands, key(string(path)))
			}
		})
		mu.Lock()
		defer mu.Unlock()
		if badFile(err) {
			p.Unreadable = append(p.Unreadable, Unreadable{SnapshotID: s.SnapshotID, Path: s.ManifestList, Err: err.Error()})
			return nil
		} else if err != nil {
			return fmt.Errorf("expiring snapshot %d: %w", s.SnapshotID, err)
		}
		if _, ok := retainedLists[key(s.ManifestList)]; s.ManifestList != "" && !ok {
			files[key(s.ManifestList)] = File{Path: s.ManifestList, Kind: KindManifestList, Size: size}
		}
		for _, k := range cands {
			if _, seen := candFrom[k]; !seen {
				candFrom[k] = s
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(p.Unreadable) > 0 {
		clear(candFrom) // nothing will be deleted: the candidates need no reading
	}
	// Re-read only the lists that named a candidate, for its length.
	candMans, err := manifestsOf(ctx, fs, distinctSnapshots(candFrom), func(k string) bool { _, ok := candFrom[k]; return ok })
	if err != nil {
		return err
	}
	if len(candMans) != len(candFrom) {
		return fmt.Errorf("manifest lists decode inconsistently: %d candidate manifests, %d found again", len(candFrom), len(candMans))
	}

	// Data and delete files of the manifests that leave with the expired
	// snapshots; all entries, since a DELETED entry names a file that some
	// older, possibly expired, snapshot read.
	err = forEach(ctx, candMans, func(m listEntry) error {
		var local []File
		err := readEntries(fs, m, false, func(e *manifestscan.ManifestEntry) {
			local = append(local, File{Path: string(e.FilePath), Kind: contentKind(e.Content), Size: e.FileSizeInBytes})
		})
		mu.Lock()
		defer mu.Unlock()
		if badFile(err) {
			p.Unreadable = append(p.Unreadable, Unreadable{Path: m.Path, Err: err.Error()})
			return nil
		} else if err != nil {
			return fmt.Errorf("expiring: %w", err)
		}
		files[key(m.Path)] = File{Path: m.Path, Kind: KindManifest, Size: m.Length}
		for _, f := range local {
			files[key(f.Path)] = f
		}
		return nil
	})
	if err != nil {
		return err
	}

	// Keep every data or delete file that a retained manifest holds live.
	// files is only read while the manifests are scanned.
	retainedMans, err := manifestsOf(ctx, fs, kept, func(string) bool { return true })
	if err != nil {
		return fmt.Errorf("retained: %w", err)
	}
	var live []string
	err = forEach(ctx, retainedMans, func(m listEntry) error {
		var hits []string
		err := readEntries(fs, m, true, func(e *manifestscan.ManifestEntry) {
			if retainedKey(files, e.FilePath) {
				hits = append(hits, key(string(e.FilePath)))
			}
		})
		if err != nil {
			return retainedErr(0, err)
		}
		mu.Lock()
		live = append(live, hits...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range live {
		delete(files, k)
	}
	slices.SortFunc(p.Unreadable, func(a, b Unreadable) int { return strings.Compare(a.Path, b.Path) })
	if len(p.Unreadable) > 0 {
		p.block()
		return nil
	}

	// Statistics of expired snapshots, unless a retained one shares the file.
	for sf := range meta.Statistics() {
		if expired[sf.SnapshotID] && sf.StatisticsPath != "" {
			files[key(sf.StatisticsPath)] = File{Path: sf.StatisticsPath, Kind: KindStatistics, Size: sf.FileSizeInBytes}
		}
	}
	for sf := range meta.PartitionStatistics() {
		if expired[sf.SnapshotID] && sf.StatisticsPath != "" {
			files[key(sf.StatisticsPath)] = File{Path: sf.StatisticsPath, Kind: KindPartitionStatistics, Size: sf.FileSizeInBytes}
		}
	}
	for path := range statisticsPaths(meta, expired) {
		delete(files, key(path))
	}

	p.Files = slices.SortedFunc(maps.Values(files), func(a, b File) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), strings.Compare(a.Path, b.Path))
	})
	return nil
}

// retainedErr is ErrUnreadableRetained for a retained snapshot (id, or 0
// for one of their manifests) that could not be read.
func retainedErr(id int64, err error) error {
	if id != 0 {
		return fmt.Errorf("%w: snapshot %d: %w", ErrUnreadableRetained, id, err)
	}
	return fmt.Errorf("%w: %w", ErrUnreadableRetained, err)
}

// block drops every planned file because a manifest list or manifest of an
// expiring snapshot could not be read, and says which.
func (p *Plan) block() {
	u := p.Unreadable[0]
	p.FilesBlocked = BlockedUnreadable + ": " + u.Err
	if n := len(p.Unreadable) - 1; n > 0 {
		p.FilesBlocked += fmt.Sprintf(" (and %d more, see unreadable)", n)
	}
	p.Files = nil
}

// badFile reports a manifest list or manifest that was reached but is
// missing or cannot be decoded, as opposed to a store that could not be
// reached or a cancelled read.
func badFile(err error) bool {
	var se *manifestscan.Error
	if !errors.As(err, &se) {
		return false
	}
	for _, bad := range []error{manifestscan.ErrMissing, iofs.ErrNotExist, manifestscan.ErrBadMagic, manifestscan.ErrTruncated,
		manifestscan.ErrUnknownCodec, manifestscan.ErrMissingField, manifestscan.ErrBadSchema, manifestscan.ErrCorrupt} {
		if errors.Is(err, bad) {
			return true
		}
	}
	return false
}

// referencedNow returns the keys of the planned files that the fresh
// metadata references. Files are immutable, so a manifest list or manifest
// the plan already weighed is not read again.
func referencedNow(ctx context.Context, fs iceio.IO, meta table.Metadata, p *Plan) (map[string]bool, error) {
	planned := make(map[string]bool, len(p.Files))
	hasContent := false
	for _, f := range p.Files {
		planned[key(f.Path)] = true
		hasContent = hasContent || isContent(f.Kind)
	}
	return referenced(ctx, fs, meta, planned, hasContent, p.retained, p.retainedManifests, nil)
}

// referenced returns the keys in want that meta references: through any of
// its snapshots' manifest lists, manifests and live entries, or its
// statistics. Snapshots whose list knownLists records, and manifests in
// knownMans, were weighed before and are not read; manifests are opened
// only when content says want may hold data or delete files. Any read error
// is returned: a file that cannot be proven unreferenced is not deleted.
// After a full read, learn (if set) gets the snapshots' lists and the
// manifests read (only if content), for a caller that catches up later.
func referenced(ctx context.Context, fs iceio.IO, meta table.Metadata, want map[string]bool, content bool,
	knownLists map[int64]string, knownMans map[string]struct{}, learn func(lists []table.Snapshot, mans []listEntry),
) (map[string]bool, error) {
	var mu sync.Mutex
	refd := map[string]bool{}
	mark := func(path string) {
		if want[key(path)] {
			mu.Lock()
			refd[key(path)] = true
			mu.Unlock()
		}
	}
	for path := range statisticsPaths(meta, nil) {
		mark(path)
	}
	var fresh []table.Snapshot
	for _, s := range meta.Snapshots() {
		mark(s.ManifestList)
		if list, ok := knownLists[s.SnapshotID]; !ok || list != s.ManifestList {
			fresh = append(fresh, s)
		}
	}
	var newMans []listEntry
	seen := map[string]bool{}
	err := forEach(ctx, fresh, func(s table.Snapshot) error {
		mans, err := readList(fs, s)
		if err != nil {
			return fmt.Errorf("snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range mans {
			mark(m.Path)
			k := key(m.Path)
			if _, known := knownMans[k]; !known {
				mu.Lock()
				if !seen[k] {
					seen[k] = true
					newMans = append(newMans, m)
				}
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil || !content {
		return refd, err
	}
	err = forEach(ctx, newMans, func(m listEntry) error {
		return readEntries(fs, m, true, func(e *manifestscan.ManifestEntry) { mark(string(e.FilePath)) })
	})
	if err == nil && learn != nil {
		learn(fresh, newMans)
	}
	return refd, err
}

// statisticsPaths lists the statistics files of the snapshots not in skip.
func statisticsPaths(meta table.Metadata, skip map[int64]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for sf := range meta.Statistics() {
			if !skip[sf.SnapshotID] && sf.StatisticsPath != "" && !yield(sf.StatisticsPath) {
				return
			}
		}
		for sf := range meta.PartitionStatistics() {
			if !skip[sf.SnapshotID] && sf.StatisticsPath != "" && !yield(sf.StatisticsPath) {
				return
			}
		}
	}
}

// key normalises a location for comparison only (files are deleted by their
// recorded path): s3a:// and s3n:// name the same objects as s3://, and
// file:///p, file:/p and /p the same local file. Treating them as one can
// only keep more files, never fewer.
func key(path string) string {
	for _, alias := range []string{"s3a://", "s3n://"} {
		if strings.HasPrefix(path, alias) {
			return "s3://" + path[len(alias):]
		}
	}
	if rest, ok := strings.CutPrefix(path, "file://"); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(path, "file:"); ok {
		return rest
	}
	return path
}

// retainedKey reports whether set holds key(path) without allocating,
// except for the s3a:// and s3n:// aliases.
func retainedKey[V any](set map[string]V, path []byte) bool {
	var ok bool
	switch {
	case bytes.HasPrefix(path, []byte("s3a://")), bytes.HasPrefix(path, []byte("s3n://")):
		_, ok = set[key(string(path))]
	case bytes.HasPrefix(path, []byte("file://")):
		_, ok = set[string(path[len("file://"):])]
	case bytes.HasPrefix(path, []byte("file:")):
		_, ok = set[string(path[len("file:"):])]
	default:
		_, ok = set[string(path)]
	}
	return ok
}

func contentKind(c int32) FileKind {
	switch iceberg.ManifestEntryContent(c) {
	case iceberg.EntryContentPosDeletes:
		return KindPositionDeletes
	case iceberg.EntryContentEqDeletes:
		return KindEqualityDeletes
	default:
		return KindData
	}
}

func isContent(k FileKind) bool {
	return k == KindData || k == KindPositionDeletes || k == KindEqualityDeletes
}

// kindOrder groups the planned files for people: content first, then the
// metadata that listed it.
func kindOrder(k FileKind) int {
	return slices.Index([]FileKind{KindData, KindPositionDeletes, KindEqualityDeletes, KindStatistics,
		KindPartitionStatistics, KindManifest, KindManifestList}, k)
}

// forEach runs fn over items, readConcurrency at a time, and returns the
// first error (or the context's cause); the rest stop early.
func forEach[T any](ctx context.Context, items []T, fn func(T) error) error {
	return forEachN(ctx, readConcurrency, items, fn)
}

// forEachN is forEach, n at a time.
func forEachN[T any](ctx context.Context, n int, items []T, fn func(T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan T)
	var wg sync.WaitGroup
	for range min(n, len(items)) {
		wg.Go(func() {
			for it := range next {
				if err := fn(it); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case next <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

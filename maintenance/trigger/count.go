package trigger

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

// Snapshot summary keys (Iceberg spec, written by Java, Spark, Flink and
// iceberg-go alike). Writers omit a figure that is zero.
const (
	keyAddedDataFiles      = "added-data-files"
	keyAddedDeleteFiles    = "added-delete-files"
	keyAddedPosDeleteFiles = "added-position-delete-files"
	keyAddedEqDeleteFiles  = "added-equality-delete-files"
	keyAddedDVs            = "added-dvs"
	keyAddedFilesSize      = "added-files-size"
	keyAddedPosDeletes     = "added-position-deletes"
	keyAddedEqDeletes      = "added-equality-deletes"
)

// Counters is what writers did on main since the position of a State.
type Counters struct {
	Commits     int
	DataFiles   int
	DataBytes   int64 // added-files-size: data files and delete files committed with them
	DeleteFiles int
	// PositionDeleteFiles (deletion vectors among them),
	// PositionDeleteRecords, EqualityDeleteFiles and EqualityDeleteRecords
	// tell the delete files apart by kind; they are counted only for a
	// Config with a threshold on one of them.
	PositionDeleteFiles   int64
	PositionDeleteRecords int64
	EqualityDeleteFiles   int64
	EqualityDeleteRecords int64
	// FromCreation: the State held no position (never run, or the table was
	// re-created), so the count covers main's whole retained history.
	FromCreation bool
	// ManifestsRead counts the manifest lists and manifests read because a
	// summary lacked a needed figure; 0 when summaries sufficed.
	ManifestsRead int
}

// IsMaintenanceCommit reports whether s is a rewrite rather than a writer's
// commit: the maintainer's own (tagged with tableprops.SummaryOperation) or another
// engine's (operation "replace", e.g. Spark's rewrite_data_files). Such
// commits, and the files they add, do not count.
func IsMaintenanceCommit(s *table.Snapshot) bool {
	if s.Summary == nil {
		return false
	}
	_, tagged := s.Summary.Properties[tableprops.SummaryOperation]
	return tagged || s.Summary.Operation == table.OpReplace
}

// Count adds up the writers' commits on main's ancestry, from the current
// snapshot back to the position recorded in st (or the oldest retained
// snapshot when st has none). Figures come from snapshot summaries; the
// table's manifests are read only for a snapshot whose summary lacks a
// figure that need has a threshold for, so a Config of commit_count and
// interval alone never reads a manifest.
func Count(ctx context.Context, tbl *table.Table, st State, need Config) (Counters, error) {
	return count(ctx, tbl.Metadata(), st, need, tbl.FS)
}

// count is Count over metadata, with the table IO opened only if needed.
func count(ctx context.Context, meta table.Metadata, st State, need Config, openFS func(context.Context) (iceio.IO, error)) (Counters, error) {
	c := Counters{FromCreation: !st.hasPosition() || (st.TableUUID != "" && st.TableUUID != meta.TableUUID().String())}
	w := want{
		data:    need.DataFileCount > 0,
		deletes: need.DeleteFileCount > 0,
		bytes:   need.DataFileBytes > 0,
	}
	var fs iceio.IO
	// The step bound guards against a parent cycle in broken metadata.
	limit := len(meta.Snapshots())
	for s, steps := meta.CurrentSnapshot(), 0; s != nil && steps <= limit; steps++ {
		if !c.FromCreation && reached(s, st) {
			break
		}
		if !IsMaintenanceCommit(s) {
			c.Commits++
			f := summaryFigures(s.Summary)
			if miss := w.missing(f); miss.any() {
				if fs == nil {
					var err error
					if fs, err = openFS(ctx); err != nil {
						return c, fmt.Errorf("open table IO: %w", err)
					}
				}
				m, reads, err := readAdded(ctx, fs, s, miss)
				c.ManifestsRead += reads
				if err != nil {
					return c, err
				}
				f = f.fill(m, miss)
			}
			// An unknown figure that no threshold needs adds nothing.
			if f.haveData {
				c.DataFiles += int(f.dataFiles)
			}
			if f.haveDeletes {
				c.DeleteFiles += int(f.deleteFiles)
			}
			if f.haveBytes {
				c.DataBytes += f.bytes
			}
			if need.wantsKinds() {
				k, ok := summaryKinds(s.Summary)
				if !ok {
					if fs == nil {
						var err error
						if fs, err = openFS(ctx); err != nil {
							return c, fmt.Errorf("open table IO: %w", err)
						}
					}
					var reads int
					var err error
					k, reads, err = readKinds(ctx, fs, s)
					c.ManifestsRead += reads
					if err != nil {
						return c, err
					}
				}
				c.PositionDeleteFiles += k.posFiles
				c.PositionDeleteRecords += k.posRecords
				c.EqualityDeleteFiles += k.eqFiles
				c.EqualityDeleteRecords += k.eqRecords
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID) // nil once history was expired
	}
	return c, nil
}

// reached reports whether s is at or before the position recorded in st:
// the recorded snapshot itself, or, when that one was expired or is no
// longer an ancestor, any snapshot with a sequence number (v2+) or, on v1
// tables whose sequence numbers are all 0, a timestamp not after it.
func reached(s *table.Snapshot, st State) bool {
	switch {
	case st.SnapshotID != 0 && s.SnapshotID == st.SnapshotID:
		return true
	case st.SequenceNumber > 0:
		return s.SequenceNumber <= st.SequenceNumber
	case st.TimestampMs > 0:
		return s.TimestampMs <= st.TimestampMs
	}
	return false
}

// want says which figures a Config has thresholds for.
type want struct{ data, deletes, bytes bool }

func (w want) any() bool { return w.data || w.deletes || w.bytes }

// missing returns the wanted figures that f does not know.
func (w want) missing(f figures) want {
	return want{
		data:    w.data && !f.haveData,
		deletes: w.deletes && !f.haveDeletes,
		bytes:   w.bytes && !f.haveBytes,
	}
}

// figures are what one snapshot added, each with whether it is known.
type figures struct {
	dataFiles, deleteFiles, bytes    int64
	haveData, haveDeletes, haveBytes bool
}

// fill takes the figures named by miss from m.
func (f figures) fill(m figures, miss want) figures {
	if miss.data {
		f.dataFiles, f.haveData = m.dataFiles, true
	}
	if miss.deletes {
		f.deleteFiles, f.haveDeletes = m.deleteFiles, true
	}
	if miss.bytes {
		f.bytes, f.haveBytes = m.bytes, true
	}
	return f
}

// summaryFigures reads what a snapshot added from its summary. Writers omit
// zero figures, so an absent key means 0 when the summary carries file
// metrics at all; a summary with none (old or minimal writers), or with a
// malformed value, leaves the figure unknown.
func summaryFigures(s *table.Summary) figures {
	var f figures
	if s == nil {
		return f
	}
	p := s.Properties
	metrics := hasMetrics(p)
	num := func(key string) (v int64, present, ok bool) {
		str, present := p[key]
		if !present {
			return 0, false, metrics
		}
		v, err := strconv.ParseInt(strings.TrimSpace(str), 10, 64)
		if err != nil || v < 0 {
			return 0, true, false
		}
		return v, true, true
	}

	f.dataFiles, _, f.haveData = num(keyAddedDataFiles)

	if v, present, ok := num(keyAddedDeleteFiles); present || !ok {
		f.deleteFiles, f.haveDeletes = v, ok
	} else {
		// Older writers give the kinds apart; added-delete-files counts
		// position deletes, equality deletes and DVs together.
		f.haveDeletes = true
		for _, k := range []string{keyAddedPosDeleteFiles, keyAddedEqDeleteFiles, keyAddedDVs} {
			v, _, ok := num(k)
			f.deleteFiles += v
			f.haveDeletes = f.haveDeletes && ok
		}
	}

	if v, present, ok := num(keyAddedFilesSize); present {
		f.bytes, f.haveBytes = v, ok
	} else {
		// Absent size with files added is a writer that does not report
		// sizes, not zero bytes.
		f.haveBytes = ok && f.haveData && f.haveDeletes && f.dataFiles == 0 && f.deleteFiles == 0
	}
	return f
}

// hasMetrics reports whether summary properties p hold file metrics, which
// Java and iceberg-go write on every commit (at least the totals).
func hasMetrics(p iceberg.Properties) bool {
	for k := range p {
		if k == "changed-partition-count" || strings.HasPrefix(k, "added-") || strings.HasPrefix(k, "deleted-") ||
			strings.HasPrefix(k, "removed-") || strings.HasPrefix(k, "total-") {
			return true
		}
	}
	return false
}

// readAdded measures the figures named by miss from snapshot s's manifests:
// only the manifests s added (the others hold earlier snapshots' files), and
// only their entries with status ADDED by s. File counts come from the
// manifest list when it has them; bytes need the manifests themselves.
// reads is the number of manifest lists and manifests read.
func readAdded(ctx context.Context, fs iceio.IO, s *table.Snapshot, miss want) (f figures, reads int, err error) {
	manifests, reads, err := listAdded(ctx, fs, s)
	if err != nil {
		return f, reads, err
	}
	for _, m := range manifests {
		counted := (m.deletes && miss.deletes) || (!m.deletes && miss.data)
		switch {
		case !counted && !miss.bytes, m.added == 0:
			continue
		case m.added > 0 && !miss.bytes:
			if m.deletes {
				f.deleteFiles += int64(m.added)
			} else {
				f.dataFiles += int64(m.added)
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return f, reads, err
		}
		reads++
		err := manifestscan.ReadManifest(fs, m.path, entryFields, func(e *manifestscan.ManifestEntry) error {
			// A null snapshot_id is inherited from the manifest, which s added.
			if e.Status != manifestscan.StatusAdded || e.HasSnapshotID && e.SnapshotID != s.SnapshotID {
				return nil
			}
			size := e.FileSizeInBytes
			if e.HasContentSizeInBytes {
				size = e.ContentSizeInBytes // a deletion vector: its blob, not the whole Puffin file, as in summaries
			}
			f.bytes += size
			if e.Content == int32(iceberg.EntryContentData) {
				f.dataFiles++
			} else {
				f.deleteFiles++
			}
			return nil
		})
		if err != nil {
			return f, reads, fmt.Errorf("read manifest of snapshot %d: %w", s.SnapshotID, err)
		}
	}
	return f, reads, nil
}

var entryFields = manifestscan.ManifestOptions{Fields: manifestscan.ManifestSnapshotID | manifestscan.ManifestContent |
	manifestscan.ManifestFileSize | manifestscan.ManifestContentSize}

// listAdded reads s's manifest list for the manifests s added; reads counts
// the list (1, or 0 for a v1 snapshot without one).
func listAdded(ctx context.Context, fs iceio.IO, s *table.Snapshot) ([]addedManifest, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	reads := 0
	if s.ManifestList != "" {
		reads = 1
	}
	manifests, err := addedManifests(fs, s)
	if err != nil {
		return nil, reads, fmt.Errorf("read manifest list of snapshot %d: %w", s.SnapshotID, err)
	}
	return manifests, reads, nil
}

// addedManifest is a manifest that a snapshot added.
type addedManifest struct {
	path    string
	deletes bool
	added   int32 // added files, -1 when the list does not say
}

// addedManifests returns the manifests that s added.
func addedManifests(fs iceio.IO, s *table.Snapshot) ([]addedManifest, error) {
	var out []addedManifest
	opt := manifestscan.ListOptions{Fields: manifestscan.ListContent | manifestscan.ListAddedSnapshotID | manifestscan.ListFileCounts}
	_, err := manifestscan.ReadSnapshot(fs, s, opt, func(e *manifestscan.ListEntry) error {
		if e.AddedSnapshotID == s.SnapshotID {
			out = append(out, addedManifest{string(e.Path), e.Content == int32(iceberg.ManifestContentDeletes), e.AddedFiles})
		}
		return nil
	})
	return out, err
}

// kinds are the delete files and rows one snapshot added, by kind.
type kinds struct{ posFiles, posRecords, eqFiles, eqRecords int64 }

// summaryKinds reads the deletes a snapshot added by kind from its summary:
// added-position-delete-files plus added-dvs (Java counts deletion vectors
// apart), added-equality-delete-files, added-position-deletes and
// added-equality-deletes. ok is false, and the manifests must tell, when
// the summary has no file metrics, a value is malformed, the kinds do not
// add up to added-delete-files (writers such as Hive give only the total),
// or files of a kind were added without their row count.
func summaryKinds(s *table.Summary) (k kinds, ok bool) {
	if s == nil || !hasMetrics(s.Properties) {
		return k, false
	}
	ok = true
	num := func(key string) int64 {
		str, present := s.Properties[key]
		if !present {
			return 0 // writers omit zero figures
		}
		v, err := strconv.ParseInt(strings.TrimSpace(str), 10, 64)
		if err != nil || v < 0 {
			ok = false
		}
		return v
	}
	has := func(key string) bool { _, present := s.Properties[key]; return present }
	k.posFiles = num(keyAddedPosDeleteFiles) + num(keyAddedDVs)
	k.eqFiles = num(keyAddedEqDeleteFiles)
	k.posRecords, k.eqRecords = num(keyAddedPosDeletes), num(keyAddedEqDeletes)
	if has(keyAddedDeleteFiles) && num(keyAddedDeleteFiles) != k.posFiles+k.eqFiles {
		ok = false
	}
	if k.posFiles > 0 && !has(keyAddedPosDeletes) || k.eqFiles > 0 && !has(keyAddedEqDeletes) {
		ok = false
	}
	return k, ok
}

// readKinds measures the deletes snapshot s added by kind from the delete
// manifests it added: their entries with status ADDED by s.
func readKinds(ctx context.Context, fs iceio.IO, s *table.Snapshot) (k kinds, reads int, err error) {
	manifests, reads, err := listAdded(ctx, fs, s)
	if err != nil {
		return k, reads, err
	}
	for _, m := range manifests {
		if !m.deletes || m.added == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return k, reads, err
		}
		reads++
		err := manifestscan.ReadManifest(fs, m.path, kindFields, func(e *manifestscan.ManifestEntry) error {
			if e.Status != manifestscan.StatusAdded || e.HasSnapshotID && e.SnapshotID != s.SnapshotID {
				return nil
			}
			switch e.Content {
			case int32(iceberg.EntryContentPosDeletes):
				k.posFiles++
				k.posRecords += e.RecordCount
			case int32(iceberg.EntryContentEqDeletes):
				k.eqFiles++
				k.eqRecords += e.RecordCount
			}
			return nil
		})
		if err != nil {
			return k, reads, fmt.Errorf("read manifest of snapshot %d: %w", s.SnapshotID, err)
		}
	}
	return k, reads, nil
}

var kindFields = manifestscan.ManifestOptions{Fields: manifestscan.ManifestSnapshotID | manifestscan.ManifestContent |
	manifestscan.ManifestRecordCount}

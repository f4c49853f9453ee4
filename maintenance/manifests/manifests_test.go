package manifests

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// entryKey is what a manifest rewrite must keep of every live entry.
type entryKey struct {
	snapshotID, dataSeq, fileSeq int64
	content                      iceberg.ManifestEntryContent
	records                      int64
}

// liveEntries reads the live entries of tbl's current snapshot by path,
// failing on a path listed twice.
func liveEntries(t *testing.T, tbl *table.Table) (map[string]entryKey, []iceberg.ManifestFile) {
	t.Helper()
	fs, err := tbl.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	list, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entryKey{}
	for _, m := range list {
		es, err := m.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			k := entryKey{snapshotID: e.SnapshotID(), dataSeq: e.SequenceNum(), fileSeq: -1,
				content: e.DataFile().ContentType(), records: e.DataFile().Count()}
			if n := e.FileSequenceNum(); n != nil {
				k.fileSeq = *n
			}
			p := e.DataFile().FilePath()
			if ref := e.DataFile().ReferencedDataFile(); ref != nil {
				p += " for " + *ref // deletion vectors share a Puffin file
			}
			if _, dup := out[p]; dup {
				t.Fatalf("%s is live twice", p)
			}
			out[p] = k
		}
	}
	return out, list
}

func sameEntries(t *testing.T, before, after map[string]entryKey) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("%d live entries before, %d after", len(before), len(after))
	}
	for p, k := range before {
		if after[p] != k {
			t.Fatalf("entry %s was %+v, is %+v", p, k, after[p])
		}
	}
}

func metadataFile(tbl *table.Table) string {
	return strings.TrimPrefix(tbl.MetadataLocation(), "file://")
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.MinManifests = 2
	return cfg
}

// 60 single-append manifests over 3 day partitions become one, with the
// rows, the files and every entry's snapshot id and sequence numbers
// unchanged, its entries sorted by partition; every older snapshot still
// reads as before. (BenchmarkScanPlanning measures 300.)
func TestRewriteManyAppends(t *testing.T) {
	ctx := context.Background()
	cat, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: 60, RowsPerAppend: 5, Partitions: 3})
	_, listBefore := liveEntries(t, tbl)
	if len(listBefore) != 60 {
		t.Fatalf("%d manifests before; want 60", len(listBefore))
	}
	snapsBefore := testenv.VerifyAll(t, metadataFile(tbl))

	plan, err := PlanTable(ctx, tbl, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Empty() || plan.SmallManifests != 60 {
		t.Fatalf("60 small manifests are fewer than the default min_manifests: %+v", plan)
	}
	cfg := DefaultConfig()
	cfg.MinManifests = 60
	if plan, err = PlanTable(ctx, tbl, cfg); err != nil || plan.Empty() || plan.TargetSource != "default" {
		t.Fatalf("plan: %+v, %v", plan, err)
	}
	res, tbl, listAfter := executeKeepingRows(t, cat, tbl, plan, cfg)
	if len(listAfter) != 1 || res.ManifestsBefore != 60 || res.ManifestsAfter != 1 || res.Entries != 60 ||
		res.ManifestsReplaced != 60 || res.BytesAfter >= res.BytesBefore {
		t.Fatalf("%d manifests after; result %+v", len(listAfter), res)
	}
	if m := listAfter[0]; m.AddedDataFiles() != 0 || m.ExistingDataFiles() != 60 {
		t.Errorf("manifest %s: %d added, %d existing files; want 0 and 60", m.FilePath(), m.AddedDataFiles(), m.ExistingDataFiles())
	}
	fs, _ := tbl.FS(ctx)
	es, err := listAfter[0].FetchEntries(fs, true)
	if err != nil {
		t.Fatal(err)
	}
	minSeq := es[0].SequenceNum()
	for i := 1; i < len(es); i++ {
		if spec := tbl.Spec(); byPartition(&spec)(es[i-1], es[i]) > 0 {
			t.Fatalf("entries %d and %d are out of partition order", i-1, i)
		}
		minSeq = min(minSeq, es[i].SequenceNum())
	}
	snap := tbl.CurrentSnapshot()
	// The list gives the manifest the rewrite's sequence number and the
	// smallest of its entries' as its minimum: a minimum that came out as
	// the rewrite's own would let a writer's commit drop delete files that
	// still apply to these entries.
	if m := listAfter[0]; m.SequenceNum() != snap.SequenceNumber || m.MinSequenceNum() != minSeq || minSeq != 1 {
		t.Errorf("manifest %s: sequence number %d, min %d; want %d and %d (its entries')", m.FilePath(),
			m.SequenceNum(), m.MinSequenceNum(), snap.SequenceNumber, minSeq)
	}
	if snap.Summary.Operation != table.OpReplace || snap.Summary.Properties[tableprops.SummaryOperation] != Operation ||
		snap.Summary.Properties["total-records"] != "300" || *snap.ParentSnapshotID != plan.SnapshotID {
		t.Fatalf("snapshot %d: %+v", snap.SnapshotID, snap.Summary)
	}
	// Older snapshots and their manifests are untouched (expiry deletes
	// the replaced manifests once no snapshot needs them).
	for i, s := range testenv.VerifyAll(t, metadataFile(tbl))[:len(snapsBefore)] {
		s.Metadata = snapsBefore[i].Metadata // the metadata file is a new one
		if s != snapsBefore[i] {
			t.Fatalf("snapshot %s reads %+v, read %+v", s.SnapshotID, s, snapsBefore[i])
		}
	}
	for _, m := range listBefore {
		if _, err := os.Stat(strings.TrimPrefix(m.FilePath(), "file://")); err != nil {
			t.Fatalf("replaced manifest deleted: %v", err)
		}
	}
	// Done: the table is not due again.
	if again, err := PlanTable(ctx, tbl, DefaultConfig()); err != nil || !again.Empty() {
		t.Fatalf("plan after the rewrite: %+v, %v", again, err)
	}
}

// The plan says why it does nothing, and takes the table's target.
func TestPlanReasons(t *testing.T) {
	ctx := context.Background()
	_, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: 3, RowsPerAppend: 5,
		Properties: map[string]string{table.ManifestTargetSizeBytesKey: "1048576"}})
	plan, err := PlanTable(ctx, tbl, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Empty() || plan.TargetSize != 1<<20 || plan.TargetSource != "table property" || plan.SmallManifests != 3 ||
		!strings.Contains(plan.Reason, "3 small manifests (below 768.0 KiB) that can be merged, of 3; fewer than min_manifests (100)") {
		t.Fatalf("plan: %+v", plan)
	}
	cfg := testConfig()
	cfg.TargetManifestSize = 64 << 10
	if plan, err = PlanTable(ctx, tbl, cfg); err != nil || plan.Empty() || plan.TargetSource != "config" || len(plan.Groups) != 1 {
		t.Fatalf("plan: %+v, %v", plan, err)
	}
	// Manifests at or above 75% of the target are not small.
	big := &Plan{TargetSize: 4, SmallBelow: 3}
	planGroups(big, plan.Groups[0].inputs, cfg)
	if !big.Empty() || big.SmallManifests != 0 || big.Manifests != 3 {
		t.Fatalf("plan with nothing small: %+v", big)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{TargetManifestSize: 1000, MinManifests: 1, CommitRetries: -1}
	err := bad.Validate()
	for _, f := range []string{"target_manifest_size", "min_manifests", "commit_retries"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%s not reported: %v", f, err)
		}
	}
}

// The check before the commit refuses manifests whose entries do not keep
// their sequence numbers: written with the data sequence number moved past
// an equality delete's, the rows it deletes would come back.
func TestCheckRefusesChangedSequenceNumbers(t *testing.T) {
	ctx := context.Background()
	_, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: 2, RowsPerAppend: 5})
	fs, _ := tbl.FS(ctx)
	list, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	var live, moved []iceberg.ManifestEntry
	for _, m := range list {
		es, err := m.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			live = append(live, e)
			id := e.SnapshotID()
			moved = append(moved, iceberg.NewManifestEntryBuilder(iceberg.EntryStatusEXISTING, &id, e.DataFile()).
				SequenceNum(e.SequenceNum()+1).FileSequenceNum(*e.FileSequenceNum()).Build())
		}
	}
	loc, err := tbl.LocationProvider()
	if err != nil {
		t.Fatal(err)
	}
	r := &rewriter{fs: fs.(iceio.WriteFileIO), loc: loc, meta: tbl.Metadata(), prefix: "test"}
	spec := tbl.Metadata().PartitionSpec()
	kept, _, err := r.write(spec, iceberg.ManifestContentData, 1, live, DefaultTargetManifestSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.check(live, []iceberg.ManifestFile{kept}); err != nil {
		t.Fatalf("entries copied as they are: %v", err)
	}
	changed, _, err := r.write(spec, iceberg.ManifestContentData, 1, moved, DefaultTargetManifestSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.check(live, []iceberg.ManifestFile{changed}); !errors.Is(err, ErrEntriesChanged) {
		t.Fatalf("moved sequence numbers: %v; want ErrEntriesChanged", err)
	}
	if err := r.check(live, nil); !errors.Is(err, ErrEntriesChanged) {
		t.Fatalf("entries lost: %v; want ErrEntriesChanged", err)
	}
}

var discard = slog.New(slog.DiscardHandler)

// Manifests roll over at the target size, in partition order: with a
// target below one entry, each manifest holds one file, and the files of
// each partition follow one another.
func TestRollsOverInPartitionOrder(t *testing.T) {
	ctx := context.Background()
	_, tbl, _ := testenv.GeneratedTable(t, smallTable) // 6 appends over 2 days, alternating
	plan, err := PlanTable(ctx, tbl, testConfig())
	if err != nil || len(plan.Groups) != 1 {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	fs, _ := tbl.FS(ctx)
	loc, _ := tbl.LocationProvider()
	r := &rewriter{fs: fs.(iceio.WriteFileIO), loc: loc, meta: tbl.Metadata(), prefix: "test"}
	out, n, err := r.rewriteGroup(plan.Groups[0], 1, 1)
	if err != nil || n != 6 || len(out) != 6 {
		t.Fatalf("%d entries into %d manifests, %v; want 6 into 6", n, len(out), err)
	}
	var days []uint32 // day partitions: little-endian int32 bounds
	for _, m := range out {
		s := m.Partitions()
		if len(s) != 1 || string(*s[0].LowerBound) != string(*s[0].UpperBound) {
			t.Fatalf("manifest %s spans partitions: %+v", m.FilePath(), s)
		}
		days = append(days, binary.LittleEndian.Uint32(*s[0].LowerBound))
	}
	if days[0] != days[1] || days[1] != days[2] || days[3] != days[4] || days[4] != days[5] || days[2] >= days[3] {
		t.Fatalf("manifests by day %v; want three of the first day, then three of the second", days)
	}
}

// A table that asks for it (write.metadata.delete-after-commit.enabled)
// has the metadata files the rewrite's commit drops from its metadata log
// removed, as iceberg-go's own commits do.
func TestRewriteRemovesMetadataDroppedFromTheLog(t *testing.T) {
	cat, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: 6, RowsPerAppend: 5, Partitions: 1,
		Properties: map[string]string{table.MetadataDeleteAfterCommitEnabledKey: "true", table.MetadataPreviousVersionsMaxKey: "3"}})
	testenv.NoStrayMetadata(t, tbl) // the generator's commits removed theirs
	plan, err := PlanTable(t.Context(), tbl, testConfig())
	if err != nil || plan.Empty() {
		t.Fatalf("plan: %+v, %v", plan, err)
	}
	_, tbl, _ = executeKeepingRows(t, cat, tbl, plan, testConfig())
	testenv.NoStrayMetadata(t, tbl)
}

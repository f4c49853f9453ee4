package expire

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	bad := Config{RetainLast: -1, MaxSnapshotAge: -time.Hour, MaxRefAge: time.Microsecond, DeleteConcurrency: 0, CommitRetries: 101}
	err := bad.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *validate.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a FieldError", e)
		}
		fields = append(fields, fe.Field)
	}
	want := []string{"retain_last", "max_snapshot_age", "max_ref_age", "delete_concurrency", "commit_retries"}
	if !slices.Equal(fields, want) {
		t.Fatalf("fields %v, want %v", fields, want)
	}
}

func TestPolicyPrecedence(t *testing.T) {
	props := iceberg.Properties{PropMinSnapshotsToKeep: "4", PropMaxSnapshotAgeMs: "60000", PropMaxRefAgeMs: "3600000"}
	p, err := ResolvePolicy(Config{}, props)
	if err != nil {
		t.Fatal(err)
	}
	if p.RetainLast != 4 || p.MaxSnapshotAge != time.Minute || p.MaxRefAge != time.Hour || p.RetainLastSource != SourceProperty {
		t.Fatalf("from properties: %+v", p)
	}
	p, _ = ResolvePolicy(Config{RetainLast: 2, MaxSnapshotAge: time.Hour, MaxRefAge: time.Minute}, props)
	if p.RetainLast != 2 || p.MaxSnapshotAge != time.Hour || p.MaxRefAge != time.Minute || p.MaxSnapshotAgeSource != SourceConfig {
		t.Fatalf("config must win: %+v", p)
	}
	p, _ = ResolvePolicy(Config{}, nil)
	if p.RetainLast != 1 || p.MaxSnapshotAge != 5*24*time.Hour || p.MaxRefAge != 0 || p.RetainLastSource != SourceDefault {
		t.Fatalf("defaults: %+v", p)
	}
	p, _ = ResolvePolicy(Config{}, iceberg.Properties{"min-snapshots-to-keep": "3"})
	if p.RetainLast != 3 {
		t.Fatalf("legacy property ignored: %+v", p)
	}
	if _, err := ResolvePolicy(Config{}, iceberg.Properties{PropMaxSnapshotAgeMs: "5d"}); !errors.Is(err, ErrInvalidProperty) ||
		!strings.Contains(err.Error(), PropMaxSnapshotAgeMs) {
		t.Fatalf("malformed property: %v", err)
	}
}

// withMeta returns an in-memory copy of tbl with its metadata changed by
// edit: retention cases need refs and properties, not commits.
func withMeta(t *testing.T, tbl *table.Table, edit func(b *table.MetadataBuilder) error) *table.Table {
	t.Helper()
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	if err := edit(b); err != nil {
		t.Fatal(err)
	}
	meta, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return table.New(tbl.Identifier(), meta, tbl.MetadataLocation(),
		func(ctx context.Context) (iceio.IO, error) { return tbl.FS(ctx) }, nil)
}

func TestRetention(t *testing.T) {
	f := newTable(t, 6, 20, 0, nil)
	ids := snapshotIDs(f.tbl)
	ts := make([]time.Time, len(ids))
	for i, s := range f.tbl.Metadata().Snapshots() {
		ts[i] = time.UnixMilli(s.TimestampMs)
	}
	last := lastTS(f.tbl)
	// olderThan lists the snapshots strictly older than cut, but the head.
	olderThan := func(cut time.Time) []int64 {
		var out []int64
		for i, id := range ids[:len(ids)-1] {
			if ts[i].Before(cut) {
				out = append(out, id)
			}
		}
		return out
	}
	props := func(kv ...string) func(*table.MetadataBuilder) error {
		return func(b *table.MetadataBuilder) error {
			m := iceberg.Properties{}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return b.SetProperties(m)
		}
	}
	ref := func(name string, i int, typ table.RefType) func(*table.MetadataBuilder) error {
		return func(b *table.MetadataBuilder) error { return b.SetSnapshotRef(name, ids[i], typ) }
	}
	cases := []struct {
		name        string
		cfg         Config
		now         time.Time
		edit        func(*table.MetadataBuilder) error
		want        []int64
		wantRemoved []string
	}{
		{name: "retain_last is a floor", cfg: Config{RetainLast: 3, MaxSnapshotAge: time.Millisecond},
			now: last.Add(time.Hour), want: ids[:3]},
		{name: "max_snapshot_age is a cut-off", cfg: Config{RetainLast: 1, MaxSnapshotAge: last.Add(time.Hour).Sub(ts[3])},
			now: last.Add(time.Hour), want: olderThan(ts[3])},
		{name: "retain_last wins over max_snapshot_age", cfg: Config{RetainLast: 5, MaxSnapshotAge: time.Millisecond},
			now: last.Add(time.Hour), want: ids[:1]},
		{name: "future timestamps are never expired", cfg: Config{RetainLast: 1, MaxSnapshotAge: time.Millisecond},
			now: ts[0].Add(-time.Hour), want: nil},
		{name: "snapshots after now are kept, older ones go", cfg: Config{RetainLast: 1, MaxSnapshotAge: time.Millisecond},
			now: ts[3], want: olderThan(ts[3].Add(-time.Millisecond))},
		{name: "defaults keep five days", cfg: Config{}, now: last.Add(4 * 24 * time.Hour), want: nil},
		{name: "defaults expire after five days", cfg: Config{}, now: last.Add(6 * 24 * time.Hour), want: ids[:5]},
		{name: "table properties when the config is silent", cfg: Config{},
			edit: props(PropMinSnapshotsToKeep, "4", PropMaxSnapshotAgeMs, "1"), now: last.Add(time.Hour), want: ids[:2]},
		{name: "config beats table properties", cfg: Config{RetainLast: 2, MaxSnapshotAge: time.Millisecond},
			edit: props(PropMinSnapshotsToKeep, "4"), now: last.Add(time.Hour), want: ids[:4]},
		{name: "a branch keeps its own history", cfg: Config{RetainLast: 1, MaxSnapshotAge: time.Millisecond},
			edit: func(b *table.MetadataBuilder) error {
				return b.SetSnapshotRef("b", ids[2], table.BranchRef, table.WithMinSnapshotsToKeep(2))
			}, now: last.Add(time.Hour),
			want: []int64{ids[0], ids[3], ids[4]}},
		{name: "a tag keeps its snapshot only", cfg: Config{RetainLast: 1, MaxSnapshotAge: time.Millisecond},
			edit: ref("t", 1, table.TagRef), now: last.Add(time.Hour), want: []int64{ids[0], ids[2], ids[3], ids[4]}},
		{name: "max_ref_age removes an old tag but never main",
			cfg:  Config{RetainLast: 1, MaxSnapshotAge: time.Millisecond, MaxRefAge: 30 * time.Minute},
			edit: ref("t", 1, table.TagRef), now: last.Add(time.Hour), want: ids[:5], wantRemoved: []string{"t"}},
		{name: "a ref's own max-ref-age wins",
			cfg: Config{RetainLast: 1, MaxSnapshotAge: time.Millisecond, MaxRefAge: 30 * time.Minute},
			edit: func(b *table.MetadataBuilder) error {
				return b.SetSnapshotRef("t", ids[1], table.TagRef, table.WithMaxRefAgeMs(int64(2*time.Hour/time.Millisecond)))
			}, now: last.Add(time.Hour),
			want: []int64{ids[0], ids[2], ids[3], ids[4]}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tbl := f.tbl
			if tc.edit != nil {
				tbl = withMeta(t, tbl, tc.edit)
			}
			cfg := tc.cfg
			cfg.DeleteConcurrency, cfg.Enabled = 1, true
			p, err := PlanTable(context.Background(), tbl, cfg, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.ExpiredIDs(); !slices.Equal(got, tc.want) {
				t.Fatalf("expired %v, want %v (all %v)", got, tc.want, ids)
			}
			var removed []string
			for _, r := range p.RemovedRefs {
				removed = append(removed, r.Name)
			}
			if !slices.Equal(removed, tc.wantRemoved) {
				t.Fatalf("removed refs %v, want %v", removed, tc.wantRemoved)
			}
			if slices.Contains(p.ExpiredIDs(), ids[len(ids)-1]) {
				t.Fatal("the current snapshot was planned to expire")
			}
		})
	}
}

// The main scenario: old snapshots go, with the files only they referenced;
// everything retained still reads the same rows from files that exist.
func TestExpireDeletesOnlyUnreferencedFiles(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 40, 2, nil)
	f.deleteAppends(t, 2) // the files of appends 0 and 1 live only in old snapshots now
	before := capture(t, f.tbl, true)
	now := lastTS(f.tbl).Add(time.Hour)
	cfg := strictConfig()

	plan, err := PlanTable(ctx, f.tbl, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Expired) != 6 || plan.SnapshotsBefore != 7 {
		t.Fatalf("plan expires %d of %d snapshots, want 6 of 7", len(plan.Expired), plan.SnapshotsBefore)
	}
	kinds := map[FileKind]int{}
	for _, fl := range plan.Files {
		kinds[fl.Kind]++
	}
	if kinds[KindData] != 2 || kinds[KindManifestList] != 6 || kinds[KindManifest] == 0 {
		t.Fatalf("planned files by kind %v", kinds)
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{Deleter: &localDeleter{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || res.SnapshotsExpired() != 6 || res.FilesDeleted() != len(plan.Files) ||
		res.Deleted[KindData].Files != 2 || res.BytesDeleted() == 0 || len(res.DeleteFailures) != 0 {
		t.Fatalf("result %+v", res)
	}
	after := f.reload(t)
	if n := len(after.Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots left, want 1", n)
	}
	checkAfter(t, before, after, true)

	// Already clean: an empty plan, and Execute writes no metadata.
	again, err := PlanTable(ctx, after, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() || len(again.Files) != 0 {
		t.Fatalf("second plan not empty: %+v", again)
	}
	if _, err := Execute(ctx, f.cat, after, again, cfg, Options{Deleter: &localDeleter{}}); err != nil {
		t.Fatal(err)
	}
	if loc := f.reload(t).MetadataLocation(); loc != after.MetadataLocation() {
		t.Fatalf("an empty plan wrote metadata %s", loc)
	}
}

// A branch and a tag on old snapshots keep them, and their files, readable.
func TestBranchAndTagKeepTheirSnapshotsAndFiles(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 5, 30, 2, nil)
	f.deleteAppends(t, 3)
	ids := snapshotIDs(f.tbl)
	ident := f.opt.Identifier()
	setRef(t, f.cat, ident, "audit", ids[1], table.TagRef, 0, 0)
	setRef(t, f.cat, ident, "dev", ids[3], table.BranchRef, 0, 2) // keeps ids[3] and ids[2]
	f.tbl = f.reload(t)
	before := capture(t, f.tbl, true)

	plan, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plan.ExpiredIDs(), []int64{ids[0], ids[4]}; !slices.Equal(got, want) {
		t.Fatalf("expired %v, want %v", got, want)
	}
	if _, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}}); err != nil {
		t.Fatal(err)
	}
	after := f.reload(t)
	for _, name := range []string{"audit", "dev", table.MainBranch} {
		if after.SnapshotByName(name) == nil {
			t.Fatalf("ref %s gone", name)
		}
	}
	checkAfter(t, before, after, true)
}

func TestMaxRefAgeRemovesAnOldTagButNeverMain(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 4, 20, 1, nil)
	ids := snapshotIDs(f.tbl)
	setRef(t, f.cat, f.opt.Identifier(), "old", ids[0], table.TagRef, 0, 0)
	f.tbl = f.reload(t)
	before := capture(t, f.tbl, true)
	cfg := strictConfig()
	cfg.MaxRefAge = time.Minute
	// Every snapshot, main's included, is older than max_ref_age.
	plan, err := PlanTable(ctx, f.tbl, cfg, lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.RemovedRefs) != 1 || plan.RemovedRefs[0].Name != "old" || plan.RemovedRefs[0].Reason != ReasonRefTooOld {
		t.Fatalf("removed refs %+v", plan.RemovedRefs)
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{Deleter: &localDeleter{}})
	if err != nil {
		t.Fatal(err)
	}
	after := f.reload(t)
	if after.SnapshotByName("old") != nil || after.SnapshotByName(table.MainBranch) == nil {
		t.Fatal("want the tag gone and main kept")
	}
	if !slices.Equal(res.RefsRemoved, []string{"old"}) || len(res.RefsLost) != 0 || res.SnapshotsExpired() != 3 {
		t.Fatalf("result %+v", res)
	}
	checkAfter(t, before, after, true)
}

// gc.enabled=false: the planner refuses, and a plan made before the
// property changed is refused at commit; nothing changes either way.
func TestGCDisabledRefusesAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 4, 20, 1, map[string]string{PropGCEnabled: "false"})
	files := filesOnDisk(t, f.dir+"/wh")
	if _, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour)); !errors.Is(err, ErrGCDisabled) {
		t.Fatalf("want ErrGCDisabled, got %v", err)
	}

	g := newTable(t, 4, 20, 1, nil)
	plan, err := PlanTable(ctx, g.tbl, strictConfig(), lastTS(g.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	setProps(t, g.cat, g.opt.Identifier(), iceberg.Properties{PropGCEnabled: "FALSE"})
	loc := g.reload(t).MetadataLocation()
	gfiles := filesOnDisk(t, g.dir+"/wh")
	res, err := Execute(ctx, g.cat, g.reload(t), plan, strictConfig(), Options{Deleter: &localDeleter{}})
	if !errors.Is(err, ErrGCDisabled) || res.Committed {
		t.Fatalf("want ErrGCDisabled and no commit, got %v (%+v)", err, res)
	}
	if g.reload(t).MetadataLocation() != loc || !slices.Equal(filesOnDisk(t, g.dir+"/wh"), gfiles) {
		t.Fatal("a refused run changed the table")
	}
	if !slices.Equal(filesOnDisk(t, f.dir+"/wh"), files) {
		t.Fatal("planning changed files")
	}
}

func TestEmptyAndSingleSnapshotTablesAreNoOps(t *testing.T) {
	ctx := context.Background()
	for _, appends := range []int{0, 1} {
		f := newTable(t, appends, 10, 0, nil)
		plan, err := PlanTable(ctx, f.tbl, strictConfig(), time.Now().Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Empty() || len(plan.Files) != 0 {
			t.Fatalf("%d appends: plan %+v", appends, plan)
		}
		res, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}})
		if err != nil || res.Committed {
			t.Fatalf("%d appends: %v %+v", appends, err, res)
		}
		if f.reload(t).MetadataLocation() != f.tbl.MetadataLocation() {
			t.Fatalf("%d appends: metadata rewritten", appends)
		}
	}
}

// With manifest merging (Java's default) an old manifest is replaced by a
// merged one that carries its files as EXISTING: the old manifest goes with
// the expired snapshots, the data files it lists must stay.
func TestMergedManifestsKeepTheirLiveFiles(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 8, 20, 2, map[string]string{
		table.ManifestMergeEnabledKey: "true", table.ManifestMinMergeCountKey: "2",
	})
	before := capture(t, f.tbl, true)
	plan, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[FileKind]int{}
	for _, fl := range plan.Files {
		kinds[fl.Kind]++
	}
	if kinds[KindManifest] == 0 || kinds[KindData] != 0 {
		t.Fatalf("planned %v; want old manifests and no data file", kinds)
	}
	if _, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}}); err != nil {
		t.Fatal(err)
	}
	checkAfter(t, before, f.reload(t), true)
}

// A retained manifest cut to its header (a valid, empty Avro container)
// must not read as "no live files": the old manifests that leave would then
// take the data files it holds with them. Its size disagrees with the list's
// manifest_length, so planning fails naming it and nothing is deleted.
func TestTruncatedRetainedManifestDeletesNothing(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 8, 20, 2, map[string]string{
		table.ManifestMergeEnabledKey: "true", table.ManifestMinMergeCountKey: "2",
	})
	fs, err := f.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cut []string
	if _, err := manifestscan.ReadList(fs, f.tbl.CurrentSnapshot().ManifestList, manifestscan.ListOptions{}, func(e *manifestscan.ListEntry) error {
		cut = append(cut, string(e.Path))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range cut {
		b, err := os.ReadFile(localPath(p))
		if err != nil {
			t.Fatal(err)
		}
		// Every block ends with the file's sync marker, and so does the
		// header: the header ends at the marker's first occurrence.
		sync := b[len(b)-16:]
		if err := os.WriteFile(localPath(p), b[:bytes.Index(b, sync)+16], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
	if err == nil {
		kinds := map[FileKind]int{}
		for _, fl := range plan.Files {
			kinds[fl.Kind]++
		}
		t.Fatalf("planned %v with the retained manifests cut short; want an error", kinds)
	}
	if !strings.Contains(err.Error(), cut[0]) && (len(cut) < 2 || !strings.Contains(err.Error(), cut[1])) {
		t.Errorf("error %q names none of the cut manifests %v", err, cut)
	}
}

// Statistics and partition-statistics files go with their snapshot; those of
// a retained snapshot stay.
func TestStatisticsFilesFollowTheirSnapshots(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 3, 10, 0, nil)
	ids := snapshotIDs(f.tbl)
	var ups []table.Update
	paths := map[string]int64{}
	for _, id := range []int64{ids[0], ids[2]} {
		stats := f.tbl.Location() + "/metadata/stats-" + strconv.FormatInt(id, 10) + ".puffin"
		part := f.tbl.Location() + "/metadata/partition-stats-" + strconv.FormatInt(id, 10) + ".parquet"
		for _, p := range []string{stats, part} {
			if err := os.WriteFile(localPath(p), []byte("stats"), 0o644); err != nil {
				t.Fatal(err)
			}
			paths[p] = id
		}
		ups = append(ups,
			table.NewSetStatisticsUpdate(table.StatisticsFile{SnapshotID: id, StatisticsPath: stats, FileSizeInBytes: 5}),
			table.NewSetPartitionStatisticsUpdate(table.PartitionStatisticsFile{SnapshotID: id, StatisticsPath: part, FileSizeInBytes: 5}))
	}
	if _, _, err := f.cat.CommitTable(ctx, f.opt.Identifier(), nil, ups); err != nil {
		t.Fatal(err)
	}
	f.tbl = f.reload(t)
	plan, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted[KindStatistics].Files != 1 || res.Deleted[KindPartitionStatistics].Files != 1 {
		t.Fatalf("deleted %+v", res.Deleted)
	}
	for p, id := range paths {
		if exists(t, p) != (id == ids[2]) {
			t.Errorf("%s of snapshot %d: exists=%v", p, id, exists(t, p))
		}
	}
}

// retainedKey must agree with key, the normalisation it avoids allocating
// for: a disagreement would make a retained manifest look unreferenced.
func TestRetainedKeyAgreesWithKey(t *testing.T) {
	paths := []string{"s3://b/t/m.avro", "s3a://b/t/m.avro", "s3n://b/t/m.avro", "file:///w/t/m.avro",
		"file:/w/t/m.avro", "/w/t/m.avro", "gs://b/m.avro", "file:", "s3a://", "", "abfss://c@a/m.avro"}
	for _, stored := range paths {
		set := map[string]struct{}{key(stored): {}}
		for _, p := range paths {
			if got, want := retainedKey(set, []byte(p)), key(p) == key(stored); got != want {
				t.Errorf("stored %q, looked up %q: %v, want %v", stored, p, got, want)
			}
		}
	}
	if key("s3a://b/x") != key("s3://b/x") || key("file:///w/x") != key("/w/x") || key("s3://b/x") == key("gs://b/x") {
		t.Fatal("key does not identify aliases")
	}
}

// A table that asks for it (write.metadata.delete-after-commit.enabled)
// has the metadata files expiry's commit drops from its metadata log
// removed, as iceberg-go's own commits do; the rows stay.
func TestExpiryRemovesMetadataDroppedFromTheLog(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 20, 1, map[string]string{table.MetadataDeleteAfterCommitEnabledKey: "true", table.MetadataPreviousVersionsMaxKey: "3"})
	testenv.NoStrayMetadata(t, f.tbl) // the generator's commits removed theirs
	before := capture(t, f.tbl, true)
	plan, err := PlanTable(ctx, f.tbl, strictConfig(), lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Empty() {
		t.Fatal("nothing to expire")
	}
	if _, err := Execute(ctx, f.cat, f.tbl, plan, strictConfig(), Options{Deleter: &localDeleter{}}); err != nil {
		t.Fatal(err)
	}
	after := f.reload(t)
	testenv.NoStrayMetadata(t, after)
	checkAfter(t, before, after, true)
}

package compact

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// Every field of a task that compaction reads comes back from a list as it
// went in, for files with and without each optional field, and the delete
// files are shared, not copied, between the tasks that apply them.
func TestFileListKeepsEveryField(t *testing.T) {
	spec := iceberg.NewPartitionSpecID(3, iceberg.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "d", Transform: iceberg.IdentityTransform{}})
	part := map[int]any{1000: int32(19000)}
	deleteFile := func(content iceberg.ManifestEntryContent, path string) iceberg.DataFile {
		b, err := iceberg.NewDataFileBuilder(spec, content, path, iceberg.ParquetFile, part, nil, nil, 3, 100)
		if err != nil {
			t.Fatal(err)
		}
		return b.Build()
	}
	pos, eq1, eq2 := deleteFile(iceberg.EntryContentPosDeletes, "s3://b/t/data/pos.parquet"),
		deleteFile(iceberg.EntryContentEqDeletes, "s3://b/t/data/eq1.parquet"),
		deleteFile(iceberg.EntryContentEqDeletes, "s3://b/t/data/eq2.parquet")
	i64 := func(v int64) *int64 { return &v }
	// Deletion vectors of two data files in one Puffin file: one path,
	// two vectors.
	dv := func(offset int64, target string) iceberg.DataFile {
		b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentPosDeletes, "s3://b/t/data/dvs.puffin", iceberg.PuffinFile, part, nil, nil, 1, 900)
		if err != nil {
			t.Fatal(err)
		}
		return b.ContentOffset(offset).ContentSizeInBytes(40).ReferencedDataFile(target).Build()
	}

	var in []table.FileScanTask
	for i := range 40 {
		path := fmt.Sprintf("s3://b/t/data/d=2022-01-08/00000-%d-9a3f-%05d.parquet", i%3, i)
		if i == 7 {
			path = "gs://elsewhere/x.parquet" // shares no prefix with the path before it
		}
		if i == 8 {
			path = "gs://elsewhere/x.parquet.more" // the whole path before it is its prefix
		}
		format := iceberg.ParquetFile
		if i%5 == 4 {
			format = iceberg.AvroFile
		}
		b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, path, format, part, nil, nil, int64(i*1000), int64(i)<<20)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			b.SplitOffsets([]int64{4, int64(i) << 19})
		}
		if i%3 == 0 {
			b.SortOrderID(i % 4)
		}
		switch {
		case i%4 == 0:
			b.KeyMetadata([]byte{byte(i), 0, 9})
		case i%8 == 5:
			b.KeyMetadata([]byte{}) // empty, not absent
		}
		if i%6 == 0 {
			b.FirstRowID(int64(i) * 1e6)
		}
		tk := table.FileScanTask{File: b.Build(), Start: int64(i % 2), Length: int64(i) << 20}
		if i%2 == 1 {
			tk.DataSequenceNumber = i64(int64(i))
		}
		if i%7 == 0 {
			tk.FirstRowID = i64(-int64(i))
		}
		switch i % 4 {
		case 1:
			tk.EqualityDeleteFiles = []iceberg.DataFile{eq1, eq2}
		case 2:
			tk.DeleteFiles = []iceberg.DataFile{pos}
			tk.EqualityDeleteFiles = []iceberg.DataFile{eq2}
		case 3:
			tk.DeletionVectorFiles = []iceberg.DataFile{dv(int64(4+40*i), path)}
		}
		in = append(in, tk)
	}

	l := newFileList(int32(spec.ID()), part, nil)
	for _, tk := range in {
		l.add(tk)
	}
	l.seal()
	if l.len() != len(in) {
		t.Fatalf("len %d, want %d", l.len(), len(in))
	}
	i := 0
	for got := range l.all() {
		want := in[i]
		f, w := got.File, want.File
		for _, c := range []struct {
			name      string
			got, want any
		}{
			{"path", f.FilePath(), w.FilePath()}, {"format", f.FileFormat(), w.FileFormat()},
			{"size", f.FileSizeBytes(), w.FileSizeBytes()}, {"count", f.Count(), w.Count()},
			{"spec", f.SpecID(), w.SpecID()}, {"partition", f.Partition(), w.Partition()},
			{"content", f.ContentType(), w.ContentType()},
			{"sort order", f.SortOrderID(), w.SortOrderID()}, {"file first row id", f.FirstRowID(), w.FirstRowID()},
			{"key metadata", f.KeyMetadata(), w.KeyMetadata()}, {"splits", f.SplitOffsets(), w.SplitOffsets()},
			{"start", got.Start, want.Start}, {"length", got.Length, want.Length},
			{"task first row id", got.FirstRowID, want.FirstRowID}, {"data sequence number", got.DataSequenceNumber, want.DataSequenceNumber},
			{"position deletes", got.DeleteFiles, want.DeleteFiles}, {"equality deletes", got.EqualityDeleteFiles, want.EqualityDeleteFiles},
			{"deletion vectors", got.DeletionVectorFiles, want.DeletionVectorFiles},
		} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Fatalf("file %d: %s %v, want %v", i, c.name, c.got, c.want)
			}
		}
		i++
	}
	if i != len(in) {
		t.Fatalf("%d tasks read back, want %d", i, len(in))
	}
	// Tasks of one set of delete files share it: the plan holds each set
	// once, however many files apply it.
	a, b := l.tasks()[1], l.tasks()[5]
	if &a.EqualityDeleteFiles[0] != &b.EqualityDeleteFiles[0] {
		t.Error("two tasks of one set of delete files hold copies of it")
	}
	// 2 sets of position and equality deletes, and a vector for each of
	// 10 files (i%4 == 3), each its own though they share a Puffin file.
	if len(l.dels.sets) != 12 || len(l.dels.files) != 13 {
		t.Errorf("%d sets of %d delete files interned, want 12 of 13", len(l.dels.sets), len(l.dels.files))
	}
}

// A partition's files cost the plan their file name and a few bytes each:
// the folder they share is not repeated. 80,000 of them are a few MB.
func TestFileListIsSmall(t *testing.T) {
	l := newFileList(0, nil, nil)
	const n = 10000
	var nameBytes int
	for i := range n {
		// A writer's names: a UUID per commit, a counter per file.
		name := fmt.Sprintf("00000-%d-%08x-93b4-4d7e-a0f2-%012x-%05d.parquet", i%4, i*2654435761%(1<<32), i*40503, i)
		nameBytes += len(name)
		path := "s3://warehouse/db.db/events/data/event_time_day=2024-01-02/" + name
		b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, path, iceberg.ParquetFile, nil, nil, nil, 150, 21<<10)
		if err != nil {
			t.Fatal(err)
		}
		seq := int64(i)
		l.add(table.FileScanTask{File: b.Build(), Length: 21 << 10, DataSequenceNumber: &seq})
	}
	l.seal()
	// What a run keeps of every input until it commits: no room that
	// append left rides along.
	if cap(l.buf) != len(l.buf) || l.last != nil {
		t.Fatalf("sealed list of %d bytes holds %d, and its last path", len(l.buf), cap(l.buf))
	}
	if per, name := len(l.buf)/n, nameBytes/n; per > name+16 {
		t.Fatalf("%d bytes a file of names of %d bytes, want at most %d", per, name, name+16)
	}
}

// What a plan keeps of a partition of small files, which it holds until
// the run commits, is tens of bytes a file: no scan task, data file or path
// string each.
func TestPlanHoldsTensOfBytesPerFile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a table of 5,000 files")
	}
	const n = 5000
	dir := t.TempDir()
	if err := onePartitionTable(dir, n); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cat, err := gen.OpenSQLiteCatalog(ctx, "default", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{gen.DefaultNamespace, gen.DefaultTable})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanTable(ctx, tbl, DefaultConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.InputFiles() != n {
		t.Fatalf("plan rewrites %d files, want %d", plan.InputFiles(), n)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	with := ms.HeapAlloc
	runtime.KeepAlive(plan)
	plan = nil
	runtime.GC()
	runtime.ReadMemStats(&ms)
	per := (int64(with) - int64(ms.HeapAlloc)) / n
	t.Logf("%d bytes a file", per)
	if per > 150 {
		t.Fatalf("the plan holds %d bytes a file, want at most 150", per)
	}
}

// A plan's delete sets keep, once trimmed, only the sets its groups' lists
// use: the delete files of partitions it does not rewrite go.
func TestDeleteSetsTrimToTheGroups(t *testing.T) {
	build := func(path string, content iceberg.ManifestEntryContent) iceberg.DataFile {
		b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, content, path, iceberg.ParquetFile, nil, nil, nil, 10, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return b.Build()
	}
	dels := &deleteSets{}
	kept, dropped := newFileList(0, nil, dels), newFileList(0, nil, dels)
	eqKept, eqDropped := build("s3://b/eq-kept.parquet", iceberg.EntryContentEqDeletes), build("s3://b/eq-dropped.parquet", iceberg.EntryContentEqDeletes)
	for i := range 4 {
		kept.add(table.FileScanTask{File: build(fmt.Sprintf("s3://b/k%d.parquet", i), iceberg.EntryContentData), EqualityDeleteFiles: []iceberg.DataFile{eqKept}})
		dropped.add(table.FileScanTask{File: build(fmt.Sprintf("s3://b/d%d.parquet", i), iceberg.EntryContentData), EqualityDeleteFiles: []iceberg.DataFile{eqDropped}})
	}
	kept.add(table.FileScanTask{File: build("s3://b/k-none.parquet", iceberg.EntryContentData)})
	dels.trim([]*fileList{kept})
	if dels.index != nil || dels.files != nil || dels.ids != nil {
		t.Error("trimmed sets keep planning's index")
	}
	var held []string
	for _, s := range dels.sets {
		for _, d := range s.eq {
			held = append(held, d.FilePath())
		}
	}
	if !reflect.DeepEqual(held, []string{"s3://b/eq-kept.parquet"}) {
		t.Fatalf("trimmed sets hold %v, want the kept list's delete file only", held)
	}
	n := 0
	for tk := range kept.all() {
		if want := n < 4; want != (len(tk.EqualityDeleteFiles) == 1 && tk.EqualityDeleteFiles[0] == eqKept) {
			t.Fatalf("task %d of the kept list reads deletes %v after the trim", n, tk.EqualityDeleteFiles)
		}
		n++
	}
}

// The reader's signed numbers decode what binary.AppendVarint wrote, at
// both ends of the range and around zero.
func TestListReaderVarints(t *testing.T) {
	want := []int64{0, 1, -1, 63, -64, 64, 1 << 40, -(1 << 40), math.MaxInt64, math.MinInt64}
	var buf []byte
	for _, v := range want {
		buf = binary.AppendVarint(buf, v)
	}
	r := listReader{l: &fileList{buf: buf}}
	for _, v := range want {
		if got := r.varint(); got != v {
			t.Errorf("varint: got %d, want %d", got, v)
		}
	}
	if r.off != len(buf) {
		t.Errorf("read %d bytes of %d", r.off, len(buf))
	}
}

// While it decides, planning keeps of each partition only the files it may
// rewrite (all of them for a sort that rewrites partitions whole, none of a
// partition written too recently), and still counts every file: on a table
// of millions of files, most of them compacted, what it holds is its
// candidates.
func TestPlanningKeepsOnlyCandidates(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 24, 50, 3)
	live := liveDataFiles(t, f.tbl)
	sizes := make([]int64, len(live))
	for i, df := range live {
		sizes[i] = df.FileSizeBytes()
	}
	slices.Sort(sizes)
	median := sizes[len(sizes)/2]
	cfg := testConfig()
	cfg.TargetFileSize, cfg.MinFileSize, cfg.MaxFileSize = median, median, 4*median
	small, all := map[string]int{}, map[string]int{}
	var anyKey string
	for _, df := range live {
		key := partitionKey(df.SpecID(), df.Partition())
		all[key]++
		if df.FileSizeBytes() < median {
			small[key]++
		}
		anyKey = key
	}
	if n := len(live) - sumValues(small); n == 0 || n == len(live) {
		t.Fatalf("%d of %d files in the size range: want some of each", n, len(live))
	}

	for _, tc := range []struct {
		name   string
		whole  bool
		recent map[string]bool
		want   func(key string) int
	}{
		{"small files", false, nil, func(k string) int { return small[k] }},
		{"whole partitions", true, nil, func(k string) int { return all[k] }},
		{"a recent partition", false, map[string]bool{anyKey: true}, func(k string) int {
			if k == anyKey {
				return 0
			}
			return small[k]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plan{}
			p.TargetFileSize, p.MinFileSize, p.MaxFileSize, _ = Sizes(cfg, f.tbl.Properties())
			snap := f.tbl.CurrentSnapshot()
			buckets, err := p.scanPartitions(ctx, f.tbl, snap, nil, &deleteSets{}, planKeeps(cfg, p.fileSizes(), tc.whole, tc.recent))
			if err != nil {
				t.Fatal(err)
			}
			if len(buckets) != len(all) || p.DataFiles != len(live) {
				t.Fatalf("%d partitions and %d files counted, want %d and %d", len(buckets), p.DataFiles, len(all), len(live))
			}
			for _, b := range buckets {
				if b.Files != all[b.key] || b.files.len() != tc.want(b.key) {
					t.Errorf("partition %s: %d files counted, %d kept; want %d and %d", b.Partition, b.Files, b.files.len(), all[b.key], tc.want(b.key))
				}
			}
		})
	}
}

func sumValues(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// tasks returns every task of the list at once, for tests.
func (l *fileList) tasks() []table.FileScanTask {
	return slices.Collect(l.all())
}

// iceberg-go's scan reads a large group a chunk of tasks at a time, and
// every chunk's rows are written, its deletes applied: on a group with
// deletes the row count cannot tell a chunk left unread (the verifier
// reads what was read), so the rows and their checksum after must be those
// before.
func TestScanReadsAGroupInChunks(t *testing.T) {
	ctx := context.Background()
	for _, perScan := range []int{1, 5, 12} {
		t.Run(fmt.Sprintf("%d tasks a scan", perScan), func(t *testing.T) {
			f := newTable(t, 12, 50, 0)
			deleteEventIDs(t, f, gen.EventID(0, 0), gen.EventID(6, 3), gen.EventID(11, 49))
			f.tbl = f.reload(t)
			f.rows, f.sum = checksum(t, f.tbl)
			plan, err := PlanTable(ctx, f.tbl, testConfig(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Groups) != 1 || plan.Groups[0].Files != 12 || plan.Groups[0].DeleteFiles == 0 {
				t.Fatalf("plan: %d groups, want one of the 12 files and their deletes: %+v", len(plan.Groups), plan.Groups)
			}
			res, err := execute(ctx, f.cat, f.tbl, plan, testConfig(), Options{scanChunk: perScan}, []rewritePath{scanPath})
			if err != nil {
				t.Fatal(err)
			}
			if res.GroupsCommitted != 1 || res.RowsWritten != f.rows {
				t.Fatalf("%d groups committed, %d rows written; want 1 and %d", res.GroupsCommitted, res.RowsWritten, f.rows)
			}
			if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
				t.Fatalf("after: %d rows, sum %x; before: %d rows, sum %x", rows, sum, f.rows, f.sum)
			}
		})
	}
}

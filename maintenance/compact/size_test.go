package compact

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// Every number of output bytes from the min size up is written as files
// within [min, max]: nothing the maintainer writes is a candidate again.
func TestFileCountKeepsFilesInRange(t *testing.T) {
	_, lo, hi, _ := Sizes(Config{TargetFileSize: 128 << 20}, nil)
	s := fileSizes{target: 128 << 20, min: lo, max: hi}
	for bytes := lo; bytes < 40*s.target; bytes += 1 << 20 {
		n := s.files(bytes)
		if size := bytes / n; size < s.min || size > s.max {
			t.Fatalf("%d bytes as %d files of %d, outside [%d, %d]", bytes, n, size, s.min, s.max)
		}
		if want := (bytes + s.target - 1) / s.target; n < want-1 || n > want {
			t.Fatalf("%d bytes as %d files, want ceil(bytes/target)=%d within one", bytes, n, want)
		}
	}
}

// A partition of many small files compacts into files of the target size,
// through every path, and the next plan right after finds nothing to do.
// Before, groups were bins of a target's worth of input (4 of these files
// at a 1MiB target), each under min_input_files: nothing was compacted,
// for "fewer candidate files than min_input_files (40 candidate files ...)".
func TestCompactedPartitionHasFilesOfTheTarget(t *testing.T) {
	ctx := context.Background()
	for _, mode := range writeModes {
		t.Run(mode.path, func(t *testing.T) {
			t.Parallel()
			f := newTable(t, 40, 1000, 0) // about 110 KB each
			cfg := DefaultConfig()
			cfg.TargetFileSize = MinTargetFileSize
			plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if plan.InputFiles() != 40 {
				t.Fatalf("plan rewrites %d of 40 files: %+v", plan.InputFiles(), plan.Partitions)
			}
			var log pathLog
			res, err := execute(ctx, f.cat, f.tbl, plan, cfg, Options{}, log.watch(mode.paths))
			if err != nil {
				t.Fatal(err)
			}
			if got := log.all(); len(got) == 0 || got[0] != mode.path {
				t.Fatalf("paths %v, want %s", got, mode.path)
			}
			tbl := f.reload(t)
			if rows, sum := checksum(t, tbl); rows != f.rows || sum != f.sum {
				t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
			}
			files := liveDataFiles(t, tbl)
			var sizes []int64
			for _, df := range files {
				sizes = append(sizes, df.FileSizeBytes())
				if df.FileSizeBytes() < plan.MinFileSize || df.FileSizeBytes() > plan.MaxFileSize {
					t.Errorf("file of %d bytes, outside [%d, %d]", df.FileSizeBytes(), plan.MinFileSize, plan.MaxFileSize)
				}
			}
			t.Logf("%d files of %d bytes in, %d files out: %v", res.FilesRewritten, res.BytesRewritten, len(files), sizes)
			want := (res.BytesWritten + plan.TargetFileSize - 1) / plan.TargetFileSize
			if n := int64(len(files)); n < want-1 || n > want {
				t.Errorf("%d files of %v for %d bytes, want %d within one", n, sizes, res.BytesWritten, want)
			}
			again, err := PlanTable(ctx, tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if !again.Empty() || len(again.Partitions) != 1 || again.Partitions[0].Skipped != ReasonOptimal {
				t.Fatalf("second plan: %d groups, %+v", len(again.Groups), again.Partitions)
			}
			// The next compaction starts from this one's bytes per row.
			in := float64(res.BytesRewritten) / float64(res.RowsRead)
			out := float64(res.BytesWritten) / float64(res.RowsWritten)
			r := outputRatio(tbl.Metadata(), tbl.CurrentSnapshot())
			if r < out/in*0.999 || r > out/in*1.001 {
				t.Fatalf("output ratio %f, the compaction wrote %f", r, out/in)
			}
			bigger := cfg
			bigger.TargetFileSize = 8 << 20
			bigger.MinInputFiles = 2
			next, err := PlanTable(ctx, tbl, bigger, time.Now())
			if err != nil || len(next.Groups) != 1 {
				t.Fatalf("plan at 8MiB: %v groups, err %v", len(next.Groups), err)
			}
			g := next.Groups[0]
			if want := r * float64(g.Bytes) / float64(g.Records); g.rowBytes < want*0.999 || g.rowBytes > want*1.001 {
				t.Fatalf("group expects %f bytes per row, want %f (ratio %f)", g.rowBytes, want, r)
			}
		})
	}
}

func taskBytes(t table.FileScanTask) int64 { return t.File.FileSizeBytes() }

// task is a scan task of a data file of size bytes and rows records, with
// deletes delete files.
func task(t *testing.T, name string, size, rows int64, deletes int) table.FileScanTask {
	t.Helper()
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, "s3://b/t/data/"+name,
		iceberg.ParquetFile, nil, nil, nil, rows, size)
	if err != nil {
		t.Fatal(err)
	}
	tk := table.FileScanTask{File: b.Build()}
	for i := range deletes {
		d, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentEqDeletes,
			fmt.Sprintf("s3://b/t/data/%s-eq-%d", name, i), iceberg.ParquetFile, nil, nil, nil, 1, 100)
		if err != nil {
			t.Fatal(err)
		}
		tk.EqualityDeleteFiles = append(tk.EqualityDeleteFiles, d.Build())
	}
	return tk
}

// Each rule of the configuration reference (compact.min_input_files and
// the rules around it) decides, and says so in words that are true.
func TestPartitionRules(t *testing.T) {
	const mib = 1 << 20
	cfg := DefaultConfig() // min_input_files 5, delete_file_threshold 5
	target, maxSize := int64(128*mib), int64(230*mib)
	files := func(n int, size int64) []table.FileScanTask {
		var out []table.FileScanTask
		for i := range n {
			out = append(out, task(t, fmt.Sprintf("f%d", i), size, 1000, 0))
		}
		return out
	}
	// narrow: min_file_size 120MiB with max_file_size 230MiB, where 2 files
	// of 117 MiB fit neither one file nor two in range. Rewritten, they
	// would come out as 2 files of 117 MiB, small again, and every plan
	// after would rewrite them again; 3 such files merge into 2 of 175 MiB.
	cases := []struct {
		name          string
		narrow        bool
		cands         []table.FileScanTask
		reason, skipd string
	}{
		{name: "no candidates", skipd: "all files within the target size range"},
		{name: "one small file", cands: files(1, 10*mib), skipd: "one small file, nothing to merge it with"},
		{name: "fewer than min_input_files, at most a target's worth", cands: files(4, 30*mib),
			skipd: "fewer candidate files than min_input_files (4 candidate files, together at most the target size; min_input_files=5)"},
		{name: "min_input_files reached", cands: files(5, mib), reason: "5 small files"},
		// The contradiction: 7 candidates skipped for min_input_files=5.
		{name: "more than min_input_files", cands: files(7, 90*mib), reason: "7 small files"},
		// The 2 files holding 142 MiB.
		{name: "two files past a target's worth", cands: files(2, 71*mib), reason: "2 small files holding more than a target's worth"},
		{name: "an oversized file alone is split", cands: files(1, 300*mib), reason: "1 oversized file(s)"},
		{name: "a delete-laden file alone", cands: []table.FileScanTask{task(t, "d", 200*mib, 1000, 5)}, reason: "1 delete-laden file(s)"},
		{name: "no file count in range", narrow: true, cands: files(2, 117*mib),
			skipd: "rewriting would not reduce the file count (2 small files holding 234.0 MiB would be written as 2 files under min_file_size 120.0 MiB, or 1 over max_file_size 230.0 MiB)"},
		{name: "fewer files come out", narrow: true, cands: files(3, 117*mib), reason: "3 small files holding more than a target's worth"},
		{name: "one file in range", narrow: true, cands: files(2, 100*mib), reason: "2 small files holding more than a target's worth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sizes := fileSizes{target: target, min: target * 3 / 4, max: maxSize}
			if tc.narrow {
				sizes.min = 120 * mib
			}
			_, _, reason, skipped := selectPartition(cfg, sizes, slices.Values(tc.cands))
			if reason != tc.reason || skipped != tc.skipd {
				t.Fatalf("reason %q skipped %q, want %q %q", reason, skipped, tc.reason, tc.skipd)
			}
		})
	}
}

// A partition with many targets' worth is split into groups of equal bytes
// that can run at once, each of at least groupBytesPerTarget targets.
func TestSplitPartition(t *testing.T) {
	const mib = 1 << 20
	var cands []table.FileScanTask
	for i := range 100 {
		cands = append(cands, task(t, fmt.Sprintf("f%d", i), int64(1+i%7)*mib, 1000, 0))
	}
	if got := splitPartition(cands, taskBytes, 128*mib, Config{MaxConcurrentGroups: 2}); len(got) != 1 {
		t.Fatalf("%d groups of 400MiB at a 128MiB target, want 1", len(got))
	}
	groups := splitPartition(cands, taskBytes, 32*mib, Config{MaxConcurrentGroups: 4})
	if len(groups) != 3 { // 397MiB: 3 groups of at least 4 targets
		t.Fatalf("%d groups, want 3", len(groups))
	}
	seen := 0
	for _, g := range groups {
		var b int64
		for _, tk := range g {
			b += tk.File.FileSizeBytes()
		}
		if b < 4*32*mib || b > 140*mib {
			t.Fatalf("group of %d bytes", b)
		}
		seen += len(g)
	}
	if seen != len(cands) {
		t.Fatalf("groups hold %d files of %d", seen, len(cands))
	}
}

// max_bytes_per_run: the first group runs even when it alone is over the
// budget (else it would never be compacted); the budget stops the rest.
func TestBudgetRunsTheFirstGroup(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 12, 50, 3) // 4 files per day partition
	cfg := testConfig()
	cfg.MinInputFiles = 2
	cfg.MaxBytesPerRun = 1
	p, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Groups) != 1 || p.Groups[0].Files != 4 {
		t.Fatalf("%d groups, want the first one alone: %+v", len(p.Groups), p.Groups)
	}
	var skipped []string
	for _, d := range p.Partitions {
		if d.Skipped != "" {
			skipped = append(skipped, d.Skipped)
		}
	}
	want := "over max_bytes_per_run: 1 group(s) left for a later run"
	if len(skipped) != 2 || skipped[0] != want || skipped[1] != want {
		t.Fatalf("skipped %q, want two partitions %q", skipped, want)
	}
	// A budget of exactly the first group's bytes takes no second group.
	cfg.MaxBytesPerRun = p.Groups[0].Bytes
	if p, err = PlanTable(ctx, f.tbl, cfg, time.Now()); err != nil || len(p.Groups) != 1 {
		t.Fatalf("%v groups (err %v), want 1", len(p.Groups), err)
	}
}

// A manifest cut short fails the plan with an error that names it, not
// just the snapshot iceberg-go was planning.
func TestTruncatedManifestIsNamed(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 100, 0)
	fs, err := f.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := f.tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	m := manifests[len(manifests)/2].FilePath()
	path := strings.TrimPrefix(m, "file://")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = PlanTable(ctx, f.tbl, testConfig(), time.Now())
	if err == nil || !strings.Contains(err.Error(), m) {
		t.Fatalf("plan error %v, want it to name %s", err, m)
	}
}

// Files written with one codec and rewritten with a better one shrink by a
// ratio the plan cannot know (the table has no compaction to learn it
// from): the first file of each group, written before its bytes per row
// are known, still lands within [min, max], and so do the others.
func TestFilesLandInRangeWhenTheCodecChanges(t *testing.T) {
	for _, mode := range []writeMode{writeModes[0], writeModes[2]} {
		t.Run(mode.path, func(t *testing.T) {
			t.Parallel()
			opt := gen.Options{Appends: 40, RowsPerAppend: 1000, Seed: 7,
				Properties: map[string]string{table.ParquetCompressionKey: "snappy"}}
			cat, tbl, dir := testenv.GeneratedTable(t, opt)
			f := &fixture{cat: cat, tbl: tbl, opt: opt, dir: dir}
			f.rows, f.sum = checksum(t, tbl)
			setProps(t, f, map[string]string{table.ParquetCompressionKey: "zstd"})
			cfg := DefaultConfig()
			cfg.TargetFileSize = MinTargetFileSize
			res := compactAll(t, f, cfg, mode.paths)
			if r := float64(res.BytesWritten) / float64(res.BytesRewritten); r > 0.75 {
				t.Fatalf("output %.2f of the input: the test needs a ratio the first file would miss the min size by", r)
			}
			_, lo, hi, _ := Sizes(cfg, nil)
			for _, df := range liveDataFiles(t, f.reload(t)) {
				if df.FileSizeBytes() < lo || df.FileSizeBytes() > hi {
					t.Errorf("file of %d bytes, outside [%d, %d]", df.FileSizeBytes(), lo, hi)
				}
			}
		})
	}
}

// Rows larger than the size range (blobs against a 1 MiB target) still
// go one to a file: a file that ends before taking a row would end again
// and again, and the rewrite would spin without end.
func TestSplitterGivesEveryFileARow(t *testing.T) {
	_, lo, hi, _ := Sizes(Config{TargetFileSize: MinTargetFileSize}, nil)
	sizes := fileSizes{target: MinTargetFileSize, min: lo, max: hi}
	s := newSplitter(sizes, &Group{Bytes: 20 << 20, Records: 10})
	for written := int64(0); written < 10; written++ {
		room := s.room(0)
		if room < 1 {
			t.Fatalf("after %d rows, an empty file takes %d rows", written, room)
		}
		s.took(1)
	}
}

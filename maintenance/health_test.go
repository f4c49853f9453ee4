package maintenance

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
)

// Health counts as left to compact exactly the partitions a plan rewrites:
// two small files holding more than a target's worth are rewritten whatever
// min_input_files says, so they are not reported as done (the CDC tables'
// 2 files of 71 MiB under a 128 MiB target were).
func TestHealthCountsThePartitionsAPlanRewrites(t *testing.T) {
	// Two day partitions: one of 3 files, one of 2, each of about 0.65 MiB.
	_, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: 5, RowsPerAppend: 6000, Partitions: 2, Seed: 5})
	const mib = 1 << 20
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		// The cases below need every file under 3/4 MiB and any two over
		// 1 MiB together.
		if sz := task.File.FileSizeBytes(); sz >= 3*mib/4 || sz <= mib/2 {
			t.Fatalf("generated file of %d bytes; the cases need 0.5-0.75 MiB", sz)
		}
	}
	cases := []struct {
		name                    string
		set                     func(*compact.Config)
		toCompact, compactables int
	}{
		{"two small files over a target's worth", func(c *compact.Config) { c.TargetFileSize = mib }, 2, 5},
		{"under a target's worth, fewer than min_input_files", func(c *compact.Config) { c.TargetFileSize = 4 * mib }, 0, 0},
		{"min_input_files 3", func(c *compact.Config) { c.TargetFileSize, c.MinInputFiles = 4*mib, 3 }, 1, 3},
		{"rewrite_all", func(c *compact.Config) { c.TargetFileSize, c.RewriteAll = 4*mib, true }, 2, 5},
		// Two files of 0.5-0.75 MiB fit neither 1 file nor 2 within
		// [0.75, 1] MiB: the plan leaves them, so does health; the 3 files
		// of the other partition become 2.
		{"no file count in range", func(c *compact.Config) {
			c.TargetFileSize, c.MinFileSize, c.MaxFileSize = mib, 3*mib/4, mib
		}, 1, 3},
		{"files within range are not candidates", func(c *compact.Config) {
			c.TargetFileSize, c.MinFileSize, c.MaxFileSize = mib, mib/4, 2*mib
		}, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := compact.DefaultConfig()
			tc.set(&cfg)
			h, err := TableHealth(t.Context(), tbl, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if h.Partitions != 2 || h.PartitionsToCompact != tc.toCompact || h.CompactableFiles != tc.compactables {
				t.Errorf("health: %d partitions, %d to compact, %d compactable files; want 2, %d, %d",
					h.Partitions, h.PartitionsToCompact, h.CompactableFiles, tc.toCompact, tc.compactables)
			}
			p, err := compact.PlanTable(t.Context(), tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			planned := 0
			for _, d := range p.Partitions {
				if d.Groups > 0 {
					planned++
				}
			}
			if planned != h.PartitionsToCompact {
				t.Errorf("the plan rewrites %d partitions, health says %d are left to compact", planned, h.PartitionsToCompact)
			}
		})
	}
}

// Files compact.where keeps out of compaction are never work left: health
// counts as compactable only what a plan of the same config rewrites, and
// names the partitions outside the where; a where the table cannot take is
// an error naming compact.where.
func TestHealthLeavesOutWhatCompactWhereExcludes(t *testing.T) {
	// Two day partitions: one of 3 files, one of 2.
	_, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: 5, RowsPerAppend: 6000, Partitions: 2, Seed: 5})
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	perDay := map[int32]int{}
	for _, task := range tasks {
		for _, v := range task.File.Partition() {
			perDay[int32(v.(iceberg.Date))]++
		}
	}
	var three, two int32
	for d, n := range perDay {
		switch n {
		case 3:
			three = d
		case 2:
			two = d
		}
	}
	if len(perDay) != 2 || three == two {
		t.Fatalf("files per day partition %v; the case needs one of 3 and one of 2", perDay)
	}
	day := func(d int32) string {
		return time.Unix(int64(d)*86400, 0).UTC().Format("2006-01-02 15:04:05Z")
	}
	cfg := compact.DefaultConfig()
	cfg.MinInputFiles = 2
	// Only the day of 3 files is in scope.
	cfg.Where = fmt.Sprintf("event_time >= TIMESTAMP '%s' AND event_time < TIMESTAMP '%s'", day(three), day(three+1))
	h, err := TableHealth(t.Context(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h.Partitions != 2 || h.PartitionsToCompact != 1 || h.PartitionsOutOfScope != 1 || h.CompactableFiles != 3 || h.SmallFiles != 5 {
		t.Errorf("health with where: %d partitions, %d to compact, %d out of scope, %d compactable, %d small files; want 2, 1, 1, 3, 5",
			h.Partitions, h.PartitionsToCompact, h.PartitionsOutOfScope, h.CompactableFiles, h.SmallFiles)
	}
	p, err := compact.PlanTable(t.Context(), tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if p.InputFiles() != h.CompactableFiles {
		t.Errorf("the plan rewrites %d files, health says %d are compactable", p.InputFiles(), h.CompactableFiles)
	}
	// Without the where both partitions are work left.
	cfg.Where = ""
	if h, err = TableHealth(t.Context(), tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if h.PartitionsToCompact != 2 || h.PartitionsOutOfScope != 0 || h.CompactableFiles != 5 {
		t.Errorf("health without where: %d to compact, %d out of scope, %d compactable; want 2, 0, 5",
			h.PartitionsToCompact, h.PartitionsOutOfScope, h.CompactableFiles)
	}
	cfg.Where = "no_such_column = 1"
	if _, err = TableHealth(t.Context(), tbl, cfg); err == nil || !strings.Contains(err.Error(), "compact.where") || !strings.Contains(err.Error(), "no_such_column") {
		t.Errorf("health with a where naming a missing column: %v; want an error naming compact.where and the column", err)
	}
}

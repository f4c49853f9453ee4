package maintenance

import (
	"testing"
	"time"

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

package compact

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// The knobs of Spark's and Flink's rewrites shape the plan: each changes
// which files are rewritten, or in how many groups, and the skip reasons
// say what was left and why.
func TestPlannerKnobs(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 12, 50, 3) // 4 files per day partition
	cases := []struct {
		name       string
		mod        func(*Config)
		wantGroups int
		wantFiles  int
		wantSkip   string
	}{
		{name: "rewrite_all takes files within the size range", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.TargetFileSize = 1 << 20
			c.MinFileSize = 1
			c.RewriteAll = true
		}, wantGroups: 3, wantFiles: 12},
		{name: "rewrite_all takes partitions under min_input_files", mod: func(c *Config) {
			c.RewriteAll = true
		}, wantGroups: 3, wantFiles: 12},
		{name: "max_files_to_rewrite leaves groups for later", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.MaxFilesToRewrite = 5
		}, wantGroups: 1, wantFiles: 4, wantSkip: ReasonFileBudget + ": 1 group(s) left for a later run"},
		{name: "max_files_to_rewrite below the first group runs it anyway", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.MaxFilesToRewrite = 1
		}, wantGroups: 1, wantFiles: 4, wantSkip: ReasonFileBudget},
		{name: "max_file_group_input_files splits partitions", mod: func(c *Config) {
			c.MinInputFiles = 2
			c.MaxFileGroupInputFiles = 2
		}, wantGroups: 6, wantFiles: 12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			tc.mod(&cfg)
			p, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Groups) != tc.wantGroups || p.InputFiles() != tc.wantFiles {
				t.Fatalf("%d groups over %d files, want %d over %d: %+v", len(p.Groups), p.InputFiles(), tc.wantGroups, tc.wantFiles, p.Partitions)
			}
			for _, g := range p.Groups {
				if cfg.MaxFileGroupInputFiles > 0 && g.Files > cfg.MaxFileGroupInputFiles {
					t.Fatalf("group of %d files, max_file_group_input_files=%d", g.Files, cfg.MaxFileGroupInputFiles)
				}
				// Each of a partition's two groups says it is part of the
				// partition its reason counts, not that it holds 4 files.
				if cfg.MaxFileGroupInputFiles > 0 && !regexp.MustCompile(`^4 small files, part [12] of 2 of the partition$`).MatchString(g.Reason) {
					t.Fatalf("group of %d files: reason %q, want the partition's 4 small files and which part of it", g.Files, g.Reason)
				}
			}
			skips := 0
			for _, d := range p.Partitions {
				if d.Skipped != "" {
					skips++
					if tc.wantSkip == "" || !strings.Contains(d.Skipped, tc.wantSkip) {
						t.Fatalf("partition %s skipped for %q, want %q", d.Partition, d.Skipped, tc.wantSkip)
					}
				}
			}
			if (skips > 0) != (tc.wantSkip != "") {
				t.Fatalf("%d partitions skipped, want reason %q: %+v", skips, tc.wantSkip, p.Partitions)
			}
		})
	}
}

// A partition larger than max_file_group_size, or with more files than
// max_file_group_input_files, becomes groups within both, of about equal
// bytes, holding every file once.
func TestSplitPartitionBounds(t *testing.T) {
	const mib = 1 << 20
	var cands []table.FileScanTask
	for i := range 100 {
		cands = append(cands, task(t, fmt.Sprintf("f%d", i), int64(1+i%7)*mib, 1000, 0))
	}
	for _, tc := range []struct {
		name   string
		cfg    Config
		groups int
	}{
		{"default: one group of 397MiB", Config{MaxConcurrentGroups: 2}, 1},
		{"max_file_group_size 64MiB", Config{MaxConcurrentGroups: 2, MaxFileGroupSize: 64 * mib}, 7},
		{"max_file_group_input_files 30", Config{MaxConcurrentGroups: 2, MaxFileGroupInputFiles: 30}, 4},
		{"both", Config{MaxConcurrentGroups: 2, MaxFileGroupSize: 200 * mib, MaxFileGroupInputFiles: 40}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := splitPartition(cands, taskBytes, 128*mib, tc.cfg)
			if len(groups) != tc.groups {
				t.Fatalf("%d groups, want %d", len(groups), tc.groups)
			}
			seen := map[string]bool{}
			for _, g := range groups {
				var b int64
				for _, tk := range g {
					b += tk.File.FileSizeBytes()
					if seen[tk.File.FilePath()] {
						t.Fatalf("%s in two groups", tk.File.FilePath())
					}
					seen[tk.File.FilePath()] = true
				}
				// Within the bound, as documented (no file here exceeds it).
				if tc.cfg.MaxFileGroupSize > 0 && b > tc.cfg.MaxFileGroupSize {
					t.Fatalf("group of %d bytes, max_file_group_size %d", b, tc.cfg.MaxFileGroupSize)
				}
				if tc.cfg.MaxFileGroupInputFiles > 0 && len(g) > tc.cfg.MaxFileGroupInputFiles {
					t.Fatalf("group of %d files, max %d", len(g), tc.cfg.MaxFileGroupInputFiles)
				}
			}
			if len(seen) != len(cands) {
				t.Fatalf("groups hold %d files of %d", len(seen), len(cands))
			}
		})
	}
}

// Files of equal size that do not divide max_file_group_size evenly: ten
// files of 30MiB under 100MiB need four groups of at most three, not three
// groups of which one holds four (120MiB).
func TestSplitPartitionKeepsEachGroupWithinMaxFileGroupSize(t *testing.T) {
	const mib = 1 << 20
	var cands []table.FileScanTask
	for i := range 10 {
		cands = append(cands, task(t, fmt.Sprintf("f%d", i), 30*mib, 1000, 0))
	}
	groups := splitPartition(cands, taskBytes, 128*mib, Config{MaxConcurrentGroups: 1, MaxFileGroupSize: 100 * mib})
	files := 0
	for _, g := range groups {
		var b int64
		for _, tk := range g {
			b += tk.File.FileSizeBytes()
		}
		if b > 100*mib {
			t.Errorf("group of %d files, %d MiB: over max_file_group_size 100MiB", len(g), b/mib)
		}
		files += len(g)
	}
	if files != len(cands) || len(groups) != 4 {
		t.Fatalf("%d groups holding %d files, want 4 holding %d", len(groups), files, len(cands))
	}
}

// With partial progress and max_failed_commits, a run whose batch commits
// fail stops after that many: the groups after it are not committed, the
// files written for them are removed, and the run fails saying why.
func TestMaxFailedCommitsStopsTheRun(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		maxFailed    int
		wantAttempts int
	}{
		{0, 4}, // every batch is tried
		{1, 1},
		{2, 2},
	} {
		t.Run(fmt.Sprint("max_failed_commits=", tc.maxFailed), func(t *testing.T) {
			f := newTable(t, 20, 50, 4)
			cfg := testConfig()
			cfg.PartialProgress = true
			cfg.MaxCommits = 4
			cfg.MaxConcurrentGroups = 1 // one batch after another
			cfg.CommitRetries = 0
			cfg.MaxFailedCommits = tc.maxFailed
			plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Groups) != 4 {
				t.Fatalf("%d groups, want 4", len(plan.Groups))
			}
			before := parquetFiles(t, f.dir)
			hook := hookCommits(t, f, func(int) error { return fmt.Errorf("%w: injected", table.ErrCommitFailed) })
			res, err := Execute(ctx, hook, hook.table(f.tbl), plan, cfg, Options{})
			if err == nil || res.GroupsCommitted != 0 || len(res.GroupsFailed) != 4 {
				t.Fatalf("err %v, %d committed, %d failed; want every group failed", err, res.GroupsCommitted, len(res.GroupsFailed))
			}
			if hook.attempts != tc.wantAttempts {
				t.Fatalf("%d commits tried, want %d", hook.attempts, tc.wantAttempts)
			}
			stopped := 0
			for _, g := range res.GroupsFailed {
				if strings.Contains(g.Err.Error(), "batch commit(s) failed, max_failed_commits=") {
					stopped++
				}
			}
			if want := 4 - tc.wantAttempts; stopped != want {
				t.Fatalf("%d groups dropped for max_failed_commits, want %d: %v", stopped, want, err)
			}
			if after := parquetFiles(t, f.dir); len(after) != len(before) {
				t.Fatalf("%d data files before, %d after: written files left behind", len(before), len(after))
			}
			if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
				t.Fatalf("rows %d, want %d", rows, f.rows)
			}
		})
	}
}

// Each new knob is validated, the error naming its key.
func TestKnobValidation(t *testing.T) {
	for _, tc := range []struct {
		key string
		mod func(*Config)
	}{
		{"max_files_to_rewrite", func(c *Config) { c.MaxFilesToRewrite = -1 }},
		{"max_file_group_size", func(c *Config) { c.MaxFileGroupSize = -1 }},
		{"max_file_group_size", func(c *Config) { c.MaxFileGroupSize = 1000 }},
		{"max_file_group_input_files", func(c *Config) { c.MaxFileGroupInputFiles = -1 }},
		{"max_file_group_input_files", func(c *Config) { c.MaxFileGroupInputFiles = 1 }},
		{"max_failed_commits", func(c *Config) { c.MaxFailedCommits = -1 }},
		{"max_failed_commits", func(c *Config) { c.MaxFailedCommits = 2 }}, // without partial_progress
	} {
		c := DefaultConfig()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%+v: error %v, want one naming %s", c, err, tc.key)
		}
	}
	c := DefaultConfig()
	c.PartialProgress, c.MaxFailedCommits, c.MaxFileGroupSize, c.MaxFileGroupInputFiles, c.MaxFilesToRewrite, c.RewriteAll = true, 2, 1<<30, 100, 1000, true
	if err := c.Validate(); err != nil {
		t.Errorf("valid knobs refused: %v", err)
	}
}

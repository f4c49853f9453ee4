// Package compact plans and executes bin-pack compaction of an Iceberg
// table's data files, in the manner of Spark's rewrite_data_files: small and
// delete-laden files of one partition are read with their deletes applied and
// rewritten into files of a target size, one snapshot per commit, with the
// row counts checked before anything is committed.
package compact

import (
	"strings"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/rowfilter"
	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// DefaultTargetFileSize is used when neither the config nor the table's
// write.target-file-size-bytes property names a target (Iceberg's default).
const DefaultTargetFileSize int64 = 512 << 20

// MinTargetFileSize is the smallest target accepted, from the config or the
// table's write.target-file-size-bytes.
const MinTargetFileSize int64 = 1 << 20

// DefaultMaxFileGroupSize is the input bytes one group holds at most when
// max_file_group_size is not set (Spark's max-file-group-size-bytes).
const DefaultMaxFileGroupSize int64 = 100 << 30

// DefaultWriteBufferSize is the encoded bytes the concurrent writers of one
// run buffer together when write_buffer_size is not set: row groups of
// 32 MiB for the default two writers, 64 MiB for one, which keeps a run on
// a partition of any file count within 512 MiB.
const DefaultWriteBufferSize int64 = 64 << 20

// Config is the compaction policy for one table. Zero sizes mean "derive":
// the target comes from the table property, then DefaultTargetFileSize; the
// min and max sizes are 75% and 180% of the target, as in Spark.
//
// The yaml tags are the keys of the compact block of the maintainer's config
// and the fields Validate names; ",size" marks a byte count that the config
// may write with a unit (512MiB).
type Config struct {
	Enabled bool `yaml:"enabled"`
	// TargetFileSize is the size of the files written; 0 = table property,
	// else DefaultTargetFileSize.
	TargetFileSize int64 `yaml:"target_file_size,size"`
	// MinFileSize: files smaller than this are candidates; 0 = 75% of target.
	MinFileSize int64 `yaml:"min_file_size,size"`
	// MaxFileSize: files larger than this are candidates (split); 0 = 180%
	// of target. Oversized files are left alone unless delete-laden.
	MaxFileSize int64 `yaml:"max_file_size,size"`
	// MinInputFiles is the fewest candidate files a partition needs to be
	// rewritten, unless they hold more than the target together or one is
	// delete-laden or oversized (selectPartition).
	MinInputFiles int `yaml:"min_input_files"`
	// DeleteFileThreshold: a data file with at least this many delete files
	// is rewritten whatever its size.
	DeleteFileThreshold int `yaml:"delete_file_threshold"`
	// DeleteRatioThreshold: a data file whose file-scoped deletes shadow at
	// least this fraction of its rows is rewritten; 0 disables.
	DeleteRatioThreshold float64 `yaml:"delete_ratio_threshold"`
	// Where restricts compaction to files that may hold matching rows, in
	// the filter syntax of rowfilter.Parse; empty = all files.
	Where string `yaml:"where"`
	// SkipPartitionsWrittenWithin leaves alone partitions that received a
	// data or delete file more recently than this, so compaction does not
	// fight an active writer; 0 = off.
	SkipPartitionsWrittenWithin time.Duration `yaml:"skip_partitions_written_within"`
	// MaxBytesPerRun caps the input bytes rewritten by one run, past the
	// first group, which always runs; 0 = no cap.
	MaxBytesPerRun int64 `yaml:"max_bytes_per_run,size"`
	// MaxFilesToRewrite caps the input files rewritten by one run, past
	// the first group, which always runs; 0 = no cap.
	MaxFilesToRewrite int `yaml:"max_files_to_rewrite"`
	// RewriteAll makes every data file in scope a candidate, whatever its
	// size and deletes, and rewrites every partition that holds one
	// (Spark's rewrite-all).
	RewriteAll bool `yaml:"rewrite_all"`
	// MaxConcurrentGroups is how many groups are rewritten at once, and
	// how many a large partition is split into (splitPartition).
	MaxConcurrentGroups int `yaml:"max_concurrent_groups"`
	// MaxFileGroupSize bounds the input bytes of one group: a partition
	// holding more is split into groups that run in parallel and, with
	// partial progress, commit separately; 0 = DefaultMaxFileGroupSize.
	MaxFileGroupSize int64 `yaml:"max_file_group_size,size"`
	// MaxFileGroupInputFiles bounds the input files of one group, as
	// Flink's max-file-group-input-files; 0 = no bound.
	MaxFileGroupInputFiles int `yaml:"max_file_group_input_files"`
	// PartialProgress commits groups in up to MaxCommits batches instead of
	// one atomic snapshot, so a failure loses only the batch it hit.
	PartialProgress bool `yaml:"partial_progress"`
	MaxCommits      int  `yaml:"max_commits"`
	// MaxFailedCommits, with partial progress, stops the run once this
	// many batches failed to commit: the groups not committed yet are
	// dropped and the run fails; 0 = every batch is tried.
	MaxFailedCommits int `yaml:"max_failed_commits"`
	// CommitRetries bounds re-load and re-commit attempts after a conflict.
	CommitRetries int `yaml:"commit_retries"`
	// RemoveDeadDeletes drops delete files that provably apply to no live
	// data file any more (dangling position deletes, dead equality deletes)
	// in the same commit.
	RemoveDeadDeletes bool `yaml:"remove_dead_deletes"`
	// GroupLeases shares a table's compaction between replicas: each
	// partition is leased before its groups are rewritten, and the table's
	// lease is held only around commits (CommitLeaseWait), so several
	// replicas can compact one table at once (claim.go).
	GroupLeases bool `yaml:"group_leases"`
	// CommitLeaseWait is how long a commit of a shared compaction waits for
	// the table's lease (held by expiry, orphan removal or another
	// replica's commit) before its batch fails.
	CommitLeaseWait time.Duration `yaml:"commit_lease_wait"`
	// AssistMinPartitions: a shared compaction (GroupLeases) whose plan
	// has groups in at least this many partitions asks the other replicas
	// to help; 0 never asks.
	AssistMinPartitions int `yaml:"assist_min_partitions"`
	// Strategy is binpack (also when empty) or sort; SortOrder (Spark's
	// syntax) is the order sort writes tables without a sort order of
	// their own in; SortMemory bounds the decoded rows of one sort group,
	// 0 = DefaultSortMemory (sortorder.go).
	Strategy   string `yaml:"strategy"`
	SortOrder  string `yaml:"sort_order"`
	SortMemory int64  `yaml:"sort_memory,size"`
	// WriteBufferSize bounds the encoded row groups that the run's
	// concurrent writers hold in memory together: each closes its row
	// group at the table's row-group size or at its share of this,
	// whichever is smaller (rowGroupCap); 0 = DefaultWriteBufferSize.
	WriteBufferSize int64 `yaml:"write_buffer_size,size"`
}

// rowGroupCap is the encoded bytes at which each writer of a run that
// rewrites groups groups closes its row group at the latest: its share of
// the write buffer among the writers that run at once. A Parquet writer
// holds its open row group in memory until it closes it, so without the
// cap the run would hold a table's row-group size times its writers
// (parquet-mr's MemoryManager shrinks row groups for the same reason).
func (c Config) rowGroupCap(groups int) int64 {
	budget := c.WriteBufferSize
	if budget <= 0 {
		budget = DefaultWriteBufferSize
	}
	writers := max(1, min(groups, c.MaxConcurrentGroups))
	return max(1, budget/int64(writers))
}

// DefaultConfig returns the production defaults (Spark's where they exist).
func DefaultConfig() Config {
	return Config{
		Enabled:              true,
		MinInputFiles:        5,
		DeleteFileThreshold:  5,
		DeleteRatioThreshold: 0.3,
		MaxConcurrentGroups:  2,
		MaxCommits:           10,
		CommitRetries:        4,
		RemoveDeadDeletes:    true,
		CommitLeaseWait:      5 * time.Minute,
		AssistMinPartitions:  8,
	}
}

// Validate reports every problem at once; it never changes c.
func (c Config) Validate() error {
	var v validate.Collector
	bad := v.Add
	// A size of 0 is derived (or the default); one set is at least 1MiB.
	size := func(key string, n int64) {
		if n < 0 {
			bad(key, n, "must not be negative")
		} else if n > 0 && n < MinTargetFileSize {
			bad(key, n, "must be at least 1MiB")
		}
	}
	size("target_file_size", c.TargetFileSize)
	if c.MinFileSize < 0 {
		bad("min_file_size", c.MinFileSize, "must not be negative")
	}
	if c.MaxFileSize < 0 {
		bad("max_file_size", c.MaxFileSize, "must not be negative")
	}
	if c.MinFileSize > 0 && c.MaxFileSize > 0 && c.MinFileSize >= c.MaxFileSize {
		bad("min_file_size", c.MinFileSize, "must be less than max_file_size")
	}
	if c.TargetFileSize > 0 && c.MinFileSize > c.TargetFileSize {
		bad("min_file_size", c.MinFileSize, "must not exceed target_file_size")
	}
	if c.TargetFileSize > 0 && c.MaxFileSize > 0 && c.MaxFileSize < c.TargetFileSize {
		bad("max_file_size", c.MaxFileSize, "must not be below target_file_size")
	}
	if c.MinInputFiles < 1 {
		bad("min_input_files", c.MinInputFiles, "must be at least 1")
	}
	if c.DeleteFileThreshold < 1 {
		bad("delete_file_threshold", c.DeleteFileThreshold, "must be at least 1")
	}
	if c.DeleteRatioThreshold < 0 || c.DeleteRatioThreshold > 1 {
		bad("delete_ratio_threshold", c.DeleteRatioThreshold, "must be between 0 and 1")
	}
	if c.Where != "" {
		if _, err := rowfilter.Parse(c.Where); err != nil {
			bad("where", c.Where, strings.TrimPrefix(err.Error(), "where: "))
		}
	}
	if c.SkipPartitionsWrittenWithin < 0 {
		bad("skip_partitions_written_within", c.SkipPartitionsWrittenWithin, "must not be negative")
	}
	if c.MaxBytesPerRun < 0 {
		bad("max_bytes_per_run", c.MaxBytesPerRun, "must not be negative")
	}
	if c.MaxFilesToRewrite < 0 {
		bad("max_files_to_rewrite", c.MaxFilesToRewrite, "must not be negative")
	}
	size("max_file_group_size", c.MaxFileGroupSize)
	size("write_buffer_size", c.WriteBufferSize)
	if c.MaxFileGroupInputFiles < 0 {
		bad("max_file_group_input_files", c.MaxFileGroupInputFiles, "must not be negative")
	} else if c.MaxFileGroupInputFiles == 1 {
		bad("max_file_group_input_files", c.MaxFileGroupInputFiles, "must be at least 2 (a group of one file merges nothing)")
	}
	if c.MaxFailedCommits < 0 {
		bad("max_failed_commits", c.MaxFailedCommits, "must not be negative")
	} else if c.MaxFailedCommits > 0 && !c.PartialProgress {
		bad("max_failed_commits", c.MaxFailedCommits, "needs partial_progress: without it a run makes one commit")
	}
	if c.MaxConcurrentGroups < 1 || c.MaxConcurrentGroups > 64 {
		bad("max_concurrent_groups", c.MaxConcurrentGroups, "must be between 1 and 64")
	}
	if c.MaxCommits < 1 {
		bad("max_commits", c.MaxCommits, "must be at least 1")
	}
	if c.CommitRetries < 0 || c.CommitRetries > 100 {
		bad("commit_retries", c.CommitRetries, "must be between 0 and 100")
	}
	if c.CommitLeaseWait < 0 {
		bad("commit_lease_wait", c.CommitLeaseWait, "must not be negative")
	}
	if c.AssistMinPartitions < 0 {
		bad("assist_min_partitions", c.AssistMinPartitions, "must not be negative")
	}
	c.validateSort(&v)
	return v.Err()
}

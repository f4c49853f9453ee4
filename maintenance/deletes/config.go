// Package deletes keeps a table's delete files in shape, as Spark's
// rewrite_position_delete_files does, without rewriting data files:
//
//   - position-delete files (and deletion vectors) whose every target is a
//     data file no longer live (dangling: left behind by a rewrite or an
//     overwrite) are dropped;
//   - the small position-delete files of one partition are merged into
//     files of about TargetFileSize, each keeping exactly the (data file,
//     position) pairs its sources applied to: rows naming a data file that
//     is not live, or one newer than the delete (which it never applied to),
//     are left out, and the merged file takes the largest data sequence
//     number of its sources, which changes nothing else because a position
//     delete names its data file.
//
// Equality deletes are compaction's work: a compaction applies them and
// drops those that no longer apply. On format v3 tables, where new
// position deletes must be deletion vectors, small Parquet position deletes
// are not merged (only dangling ones and dead deletion vectors are
// dropped).
//
// Commits are a "replace" carrying the maintenance marker, made on the
// snapshot the plan read (the catalog refuses it when the table moved); on
// a conflict the task re-loads and plans again, up to CommitRetries times.
package deletes

import (
	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// Defaults.
const (
	// DefaultTargetFileSize is Iceberg's write.delete.target-file-size-bytes
	// default.
	DefaultTargetFileSize int64 = 64 << 20
	// PropTargetFileSize is the table property that sets the target when
	// the config does not.
	PropTargetFileSize = "write.delete.target-file-size-bytes"
)

// Config is the delete-file upkeep policy for one table. The yaml tags are
// the keys of the deletes block of the maintainer's config and the fields
// Validate names.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// TargetFileSize is the size of the merged position-delete files; files
	// under three quarters of it are merge candidates. 0: the table's
	// write.delete.target-file-size-bytes, else DefaultTargetFileSize.
	TargetFileSize int64 `yaml:"target_file_size,size"`
	// MinInputFiles is the fewest candidate files of one partition that are
	// merged (Spark's min-input-files).
	MinInputFiles int `yaml:"min_input_files"`
	// CommitRetries bounds the re-load, re-plan and re-commit attempts after
	// a conflict with a concurrent writer.
	CommitRetries int `yaml:"commit_retries"`
}

// DefaultConfig returns the production defaults (Spark's where they exist).
func DefaultConfig() Config {
	return Config{Enabled: true, MinInputFiles: 5, CommitRetries: 4}
}

// Validate reports every problem at once; it never changes c.
func (c Config) Validate() error {
	var v validate.Collector
	if c.TargetFileSize < 0 || c.TargetFileSize > 0 && c.TargetFileSize < 1<<20 {
		v.Add("target_file_size", c.TargetFileSize, "must be at least 1MiB (or 0 for the table's setting)")
	}
	if c.MinInputFiles < 2 {
		v.Add("min_input_files", c.MinInputFiles, "must be at least 2: one file merged alone comes out the same")
	}
	if c.CommitRetries < 0 || c.CommitRetries > 100 {
		v.Add("commit_retries", c.CommitRetries, "must be between 0 and 100")
	}
	return v.Err()
}

// Package trigger decides when a maintenance task is due on a table, with the
// semantics of Flink's TableMaintenance: counters of what writers did
// accumulate since the task last ran, any threshold met makes the task due,
// an interval makes it due on its own, and a rate limit spaces the runs.
//
// Counting is cheap: it walks main's ancestry back to the snapshot recorded
// when the task last ran and adds up snapshot summaries, reading manifests
// only for a figure a summary lacks and the Config needs. Decide is pure, so
// `plan`, the logs and the loop all show the same reason. The State between
// passes lives in a Store: memory, one local JSON file, or a shared KV
// (Redis) so that replicas agree.
package trigger

import (
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// Config says when one task is due on one table. Zero fields are off. The
// yaml tags are the keys of a task's trigger block in the maintainer's config
// and the fields Validate names; ",size" marks a byte count that the config
// may write with a unit (1GiB).
type Config struct {
	// CommitCount: due when writers made at least this many commits since
	// the task last ran.
	CommitCount int `yaml:"commit_count"`
	// DataFileCount: due when writers added at least this many data files.
	DataFileCount int `yaml:"data_file_count"`
	// DataFileBytes: due when writers added at least this many bytes. The
	// figure is the summaries' added-files-size, which also holds the bytes
	// of delete files committed with the data: both are work for compaction.
	DataFileBytes int64 `yaml:"data_file_bytes,size"`
	// DeleteFileCount: due when writers added at least this many delete
	// files (position, equality, deletion vectors).
	DeleteFileCount int `yaml:"delete_file_count"`
	// Interval: due when this long has passed since the last run; a task
	// never run is due.
	Interval time.Duration `yaml:"interval"`
	// RateLimit: never due sooner than this after the last attempt, whatever
	// the counters say, so a fast streaming writer cannot keep a task
	// running back to back (and a failing task is not retried every pass).
	RateLimit time.Duration `yaml:"rate_limit"`
	// Window limits when the task may run (ParseWindow: "Mon-Fri
	// 01:00-05:00 Europe/Berlin"); outside it the task is not due, and a
	// requested run waits for it to open. A forced run ignores it. Empty:
	// any time.
	Window string `yaml:"window"`
}

// Validate reports every problem at once; it never changes c.
func (c Config) Validate() error {
	var v validate.Collector
	const neg = "must not be negative"
	if c.CommitCount < 0 {
		v.Add("commit_count", c.CommitCount, neg)
	}
	if c.DataFileCount < 0 {
		v.Add("data_file_count", c.DataFileCount, neg)
	}
	if c.DataFileBytes < 0 {
		v.Add("data_file_bytes", c.DataFileBytes, neg)
	}
	if c.DeleteFileCount < 0 {
		v.Add("delete_file_count", c.DeleteFileCount, neg)
	}
	if c.Interval < 0 {
		v.Add("interval", c.Interval, neg)
	}
	if c.RateLimit < 0 {
		v.Add("rate_limit", c.RateLimit, neg)
	}
	if c.Window != "" {
		if _, err := ParseWindow(c.Window); err != nil {
			v.Add("window", c.Window, err.Error())
		}
	}
	return v.Err()
}

// Empty reports that no threshold and no interval is set: the task is then
// due on every pass (within the rate limit) and its plan decides whether
// there is work.
func (c Config) Empty() bool {
	return !c.hasThreshold() && c.Interval == 0
}

func (c Config) hasThreshold() bool {
	return c.CommitCount > 0 || c.DataFileCount > 0 || c.DataFileBytes > 0 || c.DeleteFileCount > 0
}

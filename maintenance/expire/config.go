// Package expire plans and executes snapshot expiration, in the manner of
// Spark's expire_snapshots and Flink's ExpireSnapshots: snapshots that no
// branch or tag retains any more are removed from the table metadata, and the
// files that no retained snapshot references are deleted.
//
// It builds on iceberg-go's expiry rules but not on its executor, which
// computes its plan once and deletes from the metadata its own commit
// produced: a tag created meanwhile on an expiring snapshot is dropped with
// the snapshot and its files are deleted. Here the commit carries a
// requirement that the refs are exactly those planned, the refs are checked
// again after the commit, and every file is re-checked against freshly
// loaded metadata just before it is deleted.
package expire

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// Iceberg's defaults, used when neither the config nor a table property
// says otherwise.
const (
	DefaultRetainLast     = 1
	DefaultMaxSnapshotAge = 5 * 24 * time.Hour
)

// Table properties read by the planner (iceberg-go exports the same names).
const (
	PropMinSnapshotsToKeep = table.MinSnapshotsToKeepKey // history.expire.min-snapshots-to-keep
	PropMaxSnapshotAgeMs   = table.MaxSnapshotAgeMsKey   // history.expire.max-snapshot-age-ms
	PropMaxRefAgeMs        = table.MaxRefAgeMsKey        // history.expire.max-ref-age-ms
	PropGCEnabled          = table.GCEnabledKey          // gc.enabled
)

// legacyKeys are the unprefixed names older iceberg-go versions wrote; they
// apply only when the standard name is absent, as in iceberg-go.
var legacyKeys = map[string]string{
	PropMinSnapshotsToKeep: "min-snapshots-to-keep",
	PropMaxSnapshotAgeMs:   "max-snapshot-age-ms",
	PropMaxRefAgeMs:        "max-ref-age-ms",
}

// Config is the expiration policy for one table. Zero values mean "derive
// from the table". Precedence, for each setting: a ref's own
// min-snapshots-to-keep / max-snapshot-age-ms / max-ref-age-ms (for that
// ref only) > this config > the table's history.expire.* property >
// Iceberg's default (retain 1, 5 days, refs kept forever).
//
// The yaml tags are the keys of the expire block of the maintainer's config
// and the fields Validate names.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// RetainLast is the floor: the newest RetainLast ancestors of every
	// branch are kept whatever their age. 0 = table property, else 1.
	RetainLast int `yaml:"retain_last"`
	// MaxSnapshotAge is the cut-off: beyond the floor, snapshots older than
	// this expire. 0 = table property, else DefaultMaxSnapshotAge.
	MaxSnapshotAge time.Duration `yaml:"max_snapshot_age"`
	// MaxRefAge removes branches and tags (never main) whose snapshot is
	// older than this. 0 = table property, else refs are kept forever.
	MaxRefAge time.Duration `yaml:"max_ref_age"`
	// DeleteConcurrency is how many delete calls run at once.
	DeleteConcurrency int `yaml:"delete_concurrency"`
	// CommitRetries bounds re-load, re-plan and re-commit after a conflict.
	CommitRetries int `yaml:"commit_retries"`
	// CleanExpiredMetadata also removes, in the commit that expires
	// snapshots, the schemas and partition specs that no retained snapshot
	// uses (Spark's and Flink's clean_expired_metadata): never the current
	// schema or the default spec, a schema a retained snapshot names, or a
	// spec a retained snapshot's manifest was written with.
	CleanExpiredMetadata bool `yaml:"clean_expired_metadata"`
	// DeleteBatchSize is how many files one delete request carries (one S3
	// DeleteObjects call); smaller for stores that take fewer keys or
	// throttle large requests. At most objstore.MaxDeleteBatch, S3's limit;
	// 0 = that limit.
	DeleteBatchSize int `yaml:"delete_batch_size"`
}

// DefaultConfig returns the production defaults: everything derived from the
// table, as Spark and Flink do.
func DefaultConfig() Config {
	return Config{Enabled: true, DeleteConcurrency: 8, CommitRetries: 4, DeleteBatchSize: objstore.MaxDeleteBatch}
}

// Validate reports every problem at once; it never changes c.
func (c Config) Validate() error {
	var v validate.Collector
	if c.RetainLast < 0 {
		v.Add("retain_last", c.RetainLast, "must be at least 1 (0 = table property, else 1)")
	}
	if c.MaxSnapshotAge < 0 {
		v.Add("max_snapshot_age", c.MaxSnapshotAge, "must not be negative (0 = table property, else 5d)")
	} else if c.MaxSnapshotAge > 0 && c.MaxSnapshotAge < time.Millisecond {
		v.Add("max_snapshot_age", c.MaxSnapshotAge, "must be at least 1ms (snapshot timestamps are milliseconds)")
	}
	if c.MaxRefAge < 0 {
		v.Add("max_ref_age", c.MaxRefAge, "must not be negative (0 = table property, else forever)")
	} else if c.MaxRefAge > 0 && c.MaxRefAge < time.Millisecond {
		v.Add("max_ref_age", c.MaxRefAge, "must be at least 1ms (snapshot timestamps are milliseconds)")
	}
	if c.DeleteConcurrency < 1 || c.DeleteConcurrency > 256 {
		v.Add("delete_concurrency", c.DeleteConcurrency, "must be between 1 and 256")
	}
	if c.CommitRetries < 0 || c.CommitRetries > 100 {
		v.Add("commit_retries", c.CommitRetries, "must be between 0 and 100")
	}
	if c.DeleteBatchSize < 0 || c.DeleteBatchSize > objstore.MaxDeleteBatch {
		v.Add("delete_batch_size", c.DeleteBatchSize, fmt.Sprintf("must be between 1 and %d (the most keys one S3 DeleteObjects request takes), or 0 for %d", objstore.MaxDeleteBatch, objstore.MaxDeleteBatch))
	}
	return v.Err()
}

// batchSize is DeleteBatchSize with 0 read as S3's limit.
func (c Config) batchSize() int {
	if c.DeleteBatchSize == 0 {
		return objstore.MaxDeleteBatch
	}
	return c.DeleteBatchSize
}

// Sources of an effective setting, as Policy reports them.
const (
	SourceConfig   = "config"
	SourceProperty = "table property"
	SourceDefault  = "default"
)

// Policy is the table-level retention in force for one plan, with where each
// value came from. Refs may override it for themselves.
type Policy struct {
	RetainLast           int           `json:"retain_last"`
	RetainLastSource     string        `json:"retain_last_source"`
	MaxSnapshotAge       time.Duration `json:"max_snapshot_age"`
	MaxSnapshotAgeSource string        `json:"max_snapshot_age_source"`
	// MaxRefAge is 0 when refs are kept forever.
	MaxRefAge       time.Duration `json:"max_ref_age"`
	MaxRefAgeSource string        `json:"max_ref_age_source"`
}

// ResolvePolicy applies the precedence config > table property > default.
// A malformed or negative property is an error naming it: guessing a
// retention could expire what the owner meant to keep.
func ResolvePolicy(cfg Config, props iceberg.Properties) (Policy, error) {
	p := Policy{
		RetainLast: DefaultRetainLast, RetainLastSource: SourceDefault,
		MaxSnapshotAge: DefaultMaxSnapshotAge, MaxSnapshotAgeSource: SourceDefault,
		MaxRefAgeSource: SourceDefault,
	}
	if cfg.RetainLast > 0 {
		p.RetainLast, p.RetainLastSource = cfg.RetainLast, SourceConfig
	} else if n, ok, err := intProp(props, PropMinSnapshotsToKeep); err != nil {
		return p, err
	} else if ok {
		// 0 keeps only the ref's own snapshot, which is always kept: 1.
		p.RetainLast, p.RetainLastSource = max(int(n), 1), SourceProperty
	}
	if cfg.MaxSnapshotAge > 0 {
		p.MaxSnapshotAge, p.MaxSnapshotAgeSource = cfg.MaxSnapshotAge, SourceConfig
	} else if ms, ok, err := intProp(props, PropMaxSnapshotAgeMs); err != nil {
		return p, err
	} else if ok {
		p.MaxSnapshotAge, p.MaxSnapshotAgeSource = msDuration(ms), SourceProperty
	}
	if cfg.MaxRefAge > 0 {
		p.MaxRefAge, p.MaxRefAgeSource = cfg.MaxRefAge, SourceConfig
	} else if ms, ok, err := intProp(props, PropMaxRefAgeMs); err != nil {
		return p, err
	} else if ok {
		p.MaxRefAge, p.MaxRefAgeSource = msDuration(ms), SourceProperty
		if p.MaxRefAge == 0 {
			// An explicit 0 ms means "refs expire at once", not forever.
			p.MaxRefAge = time.Nanosecond
		}
	}
	return p, nil
}

func intProp(props iceberg.Properties, key string) (int64, bool, error) {
	name := key
	v, ok := props[key]
	if !ok {
		name = legacyKeys[key]
		if v, ok = props[name]; !ok || name == "" {
			return 0, false, nil
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%w: table property %s=%q is not a non-negative integer", ErrInvalidProperty, name, v)
	}
	return n, true, nil
}

// msDuration converts milliseconds, saturating where time.Duration ends
// (about 292 years; Iceberg's "forever" is Long.MAX_VALUE ms).
func msDuration(ms int64) time.Duration {
	const maxMs = int64(1<<63-1) / int64(time.Millisecond)
	if ms >= maxMs {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(ms) * time.Millisecond
}

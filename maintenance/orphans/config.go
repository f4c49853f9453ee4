// Package orphans plans and executes the removal of orphan files: files
// under a table's location that no metadata of the table references, in the
// manner of Spark's remove_orphan_files and Flink's DeleteOrphanFiles.
//
// It builds on iceberg-go's table/orphan_cleanup.go (PlanOrphanFiles /
// ExecuteOrphanCleanup) but fixes what that lacks for unattended production
// use (DESIGN.md sections 5 and 6):
//
//   - Execute re-loads the table and re-checks every candidate against the
//     fresh metadata just before deleting, so a file a slow writer committed
//     after planning is kept;
//   - gc.enabled=false refuses; files younger than MinAge (at least 24h,
//     default 72h) are never candidates;
//   - hidden and staging folders (names starting with "_" or ".", except
//     partition folders of hidden partition fields) are not listed;
//   - s3a:// and s3n:// equal s3:// by default, and a scheme or authority
//     mismatch aborts unless configured otherwise;
//   - the location must lie inside the table and must not hold another table;
//   - any listing or metadata read error deletes nothing;
//   - the referenced set is built by streaming: each manifest list is decoded
//     for its manifest paths only, each manifest is read once however many
//     snapshots share it, and paths are kept as 128-bit hashes.
//
// On S3 it lists with paginated ListObjectsV2 (prefixes in parallel) and
// deletes with batched DeleteObjects through aws-sdk-go-v2 (objstore.S3Store);
// on other stores it uses iceberg-go's IO (objstore.IOStore).
package orphans

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// Prefix-mismatch modes: what to do with a listed file whose path equals a
// referenced path but whose scheme or authority differs after the
// equal_schemes and equal_authorities mappings.
const (
	// PrefixMismatchError aborts the run, listing the conflicting pairs;
	// nothing is deleted. The default.
	PrefixMismatchError = "error"
	// PrefixMismatchIgnore treats the two as the same file: not an orphan.
	PrefixMismatchIgnore = "ignore"
	// PrefixMismatchDelete treats the listed file as an orphan.
	PrefixMismatchDelete = "delete"
)

// Limits enforced by Validate.
const (
	// MinAgeFloor is the smallest MinAge accepted: a writer may take hours
	// between writing a file and committing it.
	MinAgeFloor = 24 * time.Hour
	// DefaultMinAge is Spark's and Flink's default older_than.
	DefaultMinAge = 72 * time.Hour
)

// Config is the orphan-removal policy for one table. The yaml tags are the
// keys of the orphans block of the maintainer's config and the fields
// Validate names.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// MinAge: files modified more recently than now-MinAge are never
	// deleted. At least MinAgeFloor.
	MinAge time.Duration `yaml:"min_age"`
	// EqualSchemes maps URI schemes to the scheme they are equal to, e.g.
	// {"s3a": "s3"}; a key may list several schemes separated by commas
	// ("s3a,s3n"), as in Spark. Keys and values are compared lower-cased.
	EqualSchemes map[string]string `yaml:"equal_schemes"`
	// EqualAuthorities maps URI authorities (bucket, host:port) to the one
	// they are equal to; comma-separated keys as for EqualSchemes.
	EqualAuthorities map[string]string `yaml:"equal_authorities"`
	// PrefixMismatch is PrefixMismatchError, PrefixMismatchIgnore or
	// PrefixMismatchDelete.
	PrefixMismatch string `yaml:"prefix_mismatch"`
	// Location restricts the listing to a folder inside the table location:
	// an absolute location (URI or path) or one relative to the table
	// location, e.g. "data". Empty = the table location.
	Location string `yaml:"location"`
	// ListConcurrency bounds the parallel prefix listings and the parallel
	// manifest-list and manifest reads.
	ListConcurrency int `yaml:"list_concurrency"`
	// DeleteConcurrency bounds the delete batches in flight.
	DeleteConcurrency int `yaml:"delete_concurrency"`
}

// DefaultConfig returns the production defaults (Spark's where they exist).
func DefaultConfig() Config {
	return Config{
		Enabled:           true,
		MinAge:            DefaultMinAge,
		EqualSchemes:      map[string]string{"s3a": "s3", "s3n": "s3"},
		PrefixMismatch:    PrefixMismatchError,
		ListConcurrency:   8,
		DeleteConcurrency: 4,
	}
}

// Validate reports every problem at once; it never changes c.
func (c Config) Validate() error {
	var v validate.Collector
	bad := v.Add
	switch {
	case c.MinAge < 0:
		bad("min_age", c.MinAge, "must not be negative")
	case c.MinAge < MinAgeFloor:
		bad("min_age", c.MinAge, fmt.Sprintf("must be at least %s: a writer may commit a file hours after writing it", MinAgeFloor))
	}
	if _, err := flattenEquivalences(c.EqualSchemes, true); err != nil {
		bad("equal_schemes", c.EqualSchemes, err.Error())
	}
	if _, err := flattenEquivalences(c.EqualAuthorities, false); err != nil {
		bad("equal_authorities", c.EqualAuthorities, err.Error())
	}
	switch c.PrefixMismatch {
	case PrefixMismatchError, PrefixMismatchIgnore, PrefixMismatchDelete:
	default:
		bad("prefix_mismatch", c.PrefixMismatch, `must be one of "error", "ignore", "delete"`)
	}
	if c.Location != "" {
		if strings.TrimSpace(c.Location) != c.Location {
			bad("location", c.Location, "must not have leading or trailing spaces")
		} else if slices.Contains(strings.Split(c.Location, "/"), "..") {
			bad("location", c.Location, `must not contain ".." segments`)
		}
	}
	if c.ListConcurrency < 1 || c.ListConcurrency > 256 {
		bad("list_concurrency", c.ListConcurrency, "must be between 1 and 256")
	}
	if c.DeleteConcurrency < 1 || c.DeleteConcurrency > 64 {
		bad("delete_concurrency", c.DeleteConcurrency, "must be between 1 and 64")
	}
	return v.Err()
}

// flattenEquivalences expands comma-separated keys ("s3a,s3n": "s3") into
// one entry per name and rejects empty names and names mapped to two
// different targets. Schemes are lower-cased.
func flattenEquivalences(m map[string]string, lower bool) (map[string]string, error) {
	out := make(map[string]string, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fold := func(s string) string {
		s = strings.TrimSpace(s)
		if lower {
			s = strings.ToLower(s)
		}
		return s
	}
	for _, k := range keys {
		target := fold(m[k])
		if target == "" || strings.ContainsAny(target, ",/") {
			return nil, fmt.Errorf("%q maps to %q: the target must be one non-empty name", k, m[k])
		}
		for _, name := range strings.Split(k, ",") {
			name = fold(name)
			if name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("key %q holds an empty or invalid name", k)
			}
			if prev, ok := out[name]; ok && prev != target {
				return nil, fmt.Errorf("%q is mapped to both %q and %q", name, prev, target)
			}
			out[name] = target
		}
	}
	return out, nil
}

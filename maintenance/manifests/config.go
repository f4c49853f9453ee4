// Package manifests rewrites the manifests of a table's current snapshot, in
// the manner of Spark's rewrite_manifests: many small manifests (a streaming
// writer leaves one per commit) become a few of about the target size,
// clustered by partition, so scan planning opens fewer files and prunes
// whole manifests. Only metadata is written: the data and delete files, their
// rows and every entry's snapshot id and sequence numbers are kept, and the
// replaced manifests stay for expiry (nothing is deleted).
package manifests

import (
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// DefaultTargetManifestSize is the target when neither the config nor the
// table's commit.manifest.target-size-bytes names one (Iceberg's default).
const DefaultTargetManifestSize int64 = table.ManifestTargetSizeBytesDefault

// MinTargetManifestSize is the smallest target accepted, from the config or
// the table property: below it every manifest counts as small.
const MinTargetManifestSize int64 = 64 << 10

// Config is the manifest-rewrite policy for one table. The yaml tags are the
// keys of the manifests block of the maintainer's config and the fields
// Validate names.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// TargetManifestSize is the size of the manifests written; 0 = the
	// table's commit.manifest.target-size-bytes, else
	// DefaultTargetManifestSize. A manifest below 75% of it is small.
	TargetManifestSize int64 `yaml:"target_manifest_size,size"`
	// MinManifests is the fewest small manifests the current snapshot must
	// hold for a rewrite (Iceberg's commit.manifest.min-count-to-merge).
	MinManifests int `yaml:"min_manifests"`
	// CommitRetries bounds the re-load and re-commit attempts after a
	// concurrent commit.
	CommitRetries int `yaml:"commit_retries"`
}

// DefaultConfig returns the production defaults (Iceberg's where they exist).
func DefaultConfig() Config {
	return Config{Enabled: true, MinManifests: 100, CommitRetries: 4}
}

// Validate reports every problem at once; it never changes c.
func (c Config) Validate() error {
	var v validate.Collector
	if c.TargetManifestSize < 0 {
		v.Add("target_manifest_size", c.TargetManifestSize, "must not be negative")
	} else if c.TargetManifestSize > 0 && c.TargetManifestSize < MinTargetManifestSize {
		v.Add("target_manifest_size", c.TargetManifestSize, "must be at least 64KiB")
	}
	if c.MinManifests < 2 {
		v.Add("min_manifests", c.MinManifests, "must be at least 2")
	}
	if c.CommitRetries < 0 || c.CommitRetries > 100 {
		v.Add("commit_retries", c.CommitRetries, "must be between 0 and 100")
	}
	return v.Err()
}

// TargetSize returns the manifest target of a table under cfg and where it
// came from: "config", "table property" or "default". A property below
// MinTargetManifestSize or not a number is ignored.
func TargetSize(cfg Config, props iceberg.Properties) (int64, string) {
	if cfg.TargetManifestSize > 0 {
		return cfg.TargetManifestSize, "config"
	}
	if v, ok := props[table.ManifestTargetSizeBytesKey]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= MinTargetManifestSize {
			return n, "table property"
		}
	}
	return DefaultTargetManifestSize, "default"
}

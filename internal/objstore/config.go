// Package objstore owns the maintainer's access to object stores: the one
// place that turns catalog and table properties into S3 client settings
// (S3Settings), shared by the maintainer's own S3 client and, through
// iceberg-go's ambient AWS config (S3.Context), by iceberg-go's S3 IO, so
// that both address a bucket the same way; the HTTP transport whose requests
// cannot hang (Transport); and the Store that lists and deletes the files of
// a table location (S3Store with batched DeleteObjects, IOStore over
// iceberg-go's IO elsewhere).
package objstore

import (
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// Defaults and limits of Config.
const (
	DefaultRequestTimeout = time.Minute
	DefaultMaxAttempts    = 4
	// MinRequestTimeout keeps a typo ("1ms") from failing every request.
	MinRequestTimeout = 100 * time.Millisecond
	// MaxAttemptsLimit bounds how long a stalled store can hold a run.
	MaxAttemptsLimit = 20
	// MaxBackoff caps the SDK's exponential backoff between attempts (its
	// own cap is 20s), so that a request gives up after about
	// RequestTimeout × MaxAttempts plus a few seconds.
	MaxBackoff = 5 * time.Second
)

// Config bounds every object-store request (the object_store block).
type Config struct {
	// RequestTimeout is how long a request may go without progress: to
	// connect, to receive response headers, or between two reads or writes
	// on its connection. It is not a deadline for the whole request: an
	// upload of 128 MiB that keeps moving may take longer.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// MaxAttempts is how many times the SDK tries a request (the first
	// attempt included) when it fails in a way worth retrying.
	MaxAttempts int `yaml:"max_attempts"`
}

// DefaultConfig returns the defaults: 1m without progress, 4 attempts.
func DefaultConfig() Config {
	return Config{RequestTimeout: DefaultRequestTimeout, MaxAttempts: DefaultMaxAttempts}
}

// Validate reports every bad field; it does not change c.
func (c Config) Validate() error {
	var v validate.Collector
	if c.RequestTimeout < MinRequestTimeout {
		v.Add("request_timeout", c.RequestTimeout, "must be at least "+MinRequestTimeout.String())
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > MaxAttemptsLimit {
		v.Add("max_attempts", c.MaxAttempts, "must be between 1 and 20")
	}
	return v.Err()
}

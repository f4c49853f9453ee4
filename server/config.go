package server

import (
	"net"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"

	"github.com/iceberg-maintainer/maintainer/metrics"
)

// Config of the HTTP server. Field names in Validate errors are the YAML keys
// under `server:`.
type Config struct {
	// Listen is the [host]:port to bind, e.g. ":8080"; ":0" picks a free
	// port (see Server.Addr).
	Listen string
	// TokenFile holds the bearer token that /v1/trigger, /v1/alertmanager
	// and /v1/status require. It is re-read when it changes, so a rotated
	// Kubernetes secret takes effect without a restart. Empty = no auth.
	TokenFile string
	// AlertTableLabel is the alert label that names the table.
	AlertTableLabel string
	// AlertNamespaceLabel, when set on an alert, is joined in front of the
	// table label ("ns" + "." + "tbl"). Configurable because "namespace" is
	// also the Kubernetes namespace label on many alerts. Empty = off.
	AlertNamespaceLabel string
	// AlertTaskLabel optionally restricts an alert to one task. Empty = off.
	AlertTaskLabel string
	// MaxBodyBytes caps request bodies; larger ones are answered 413.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful shutdown of Run.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults: listen on :8080, no auth, the
// table/namespace/task alert labels, 1 MiB bodies, 10s shutdown.
func DefaultConfig() Config {
	return Config{
		Listen:              ":8080",
		AlertTableLabel:     "table",
		AlertNamespaceLabel: "namespace",
		AlertTaskLabel:      "task",
		MaxBodyBytes:        1 << 20,
		ShutdownTimeout:     10 * time.Second,
	}
}

// Validate reports every problem at once; it never changes c. It does not
// read TokenFile: New does, so that a missing secret fails at start.
func (c Config) Validate() error {
	var v validate.Collector
	if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		v.Add("listen", c.Listen, "must be [host]:port, e.g. :8080 or 127.0.0.1:8080")
	}
	if !metrics.ValidLabelName(c.AlertTableLabel) {
		v.Add("alertmanager.table_label", c.AlertTableLabel, "must be a Prometheus label name")
	}
	if c.AlertNamespaceLabel != "" && !metrics.ValidLabelName(c.AlertNamespaceLabel) {
		v.Add("alertmanager.namespace_label", c.AlertNamespaceLabel, "must be a Prometheus label name or empty")
	}
	if c.AlertTaskLabel != "" && !metrics.ValidLabelName(c.AlertTaskLabel) {
		v.Add("alertmanager.task_label", c.AlertTaskLabel, "must be a Prometheus label name or empty")
	}
	if c.AlertTableLabel != "" && (c.AlertTableLabel == c.AlertNamespaceLabel || c.AlertTableLabel == c.AlertTaskLabel) {
		v.Add("alertmanager.table_label", c.AlertTableLabel, "must differ from namespace_label and task_label")
	}
	if c.MaxBodyBytes < 1<<10 {
		v.Add("max_body_bytes", c.MaxBodyBytes, "must be at least 1KiB")
	}
	if c.ShutdownTimeout <= 0 {
		v.Add("shutdown_timeout", c.ShutdownTimeout, "must be positive")
	}
	return v.Err()
}

// Package tableprops reads the Iceberg table properties that more than one
// maintenance task honours, one way for all of them.
package tableprops

import (
	"strings"

	"github.com/apache/iceberg-go"
)

// GCEnabled is the table property that allows deleting files.
const GCEnabled = "gc.enabled"

// GCAllowed follows Iceberg (Java's Boolean.parseBoolean, iceberg-go's
// isGCEnabled): garbage collection is on when gc.enabled is absent or a
// case-insensitive "true"; any other value ("false", "1", "yes", typos)
// turns it off, because when in doubt nothing is deleted.
func GCAllowed(props iceberg.Properties) bool {
	v, ok := props[GCEnabled]
	return !ok || strings.EqualFold(strings.TrimSpace(v), "true")
}

// Package tableprops names the Iceberg table and snapshot properties that
// more than one maintenance package reads or writes, and reads them one way
// for all of them.
package tableprops

import (
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
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

// Snapshot summary properties the maintainer writes on its own commits.
// Compaction writes them; the triggers skip commits tagged with
// SummaryOperation, so the maintainer's own work never makes a task due.
const (
	SummaryOperation = "maintainer.operation" // the maintenance operation, e.g. "compact"
	SummaryRunID     = "maintainer.run-id"    // the run that made the commit
	SummaryBatch     = "maintainer.batch"     // the batch of groups within the run
)

// RunSnapshot returns the snapshot of meta that the maintainer's run runID
// committed for batch ("" for a run that commits once), or nil: how a run
// whose commit got no answer learns whether it landed.
func RunSnapshot(meta table.Metadata, runID, batch string) *table.Snapshot {
	for _, s := range meta.Snapshots() {
		if s.Summary != nil && s.Summary.Properties[SummaryRunID] == runID && s.Summary.Properties[SummaryBatch] == batch {
			return &s
		}
	}
	return nil
}

// OverridePrefix starts the table properties that override the
// maintainer's config for the one table: maintainer.<task>.<key>, as
// maintainer.compact.enabled=false or maintainer.compact.trigger.interval=12h.
const OverridePrefix = "maintainer."

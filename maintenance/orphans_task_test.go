package maintenance

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iceberg-maintainer/maintainer/metrics"
)

// A run that deleted files a writer committed meanwhile counts them.
func TestOrphansDeletedReferencedIsCounted(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), metrics.NewTables(true, 10))
	rep := &OrphansReport{FilesFound: 3, FilesDeleted: 3, DeletedReferenced: []string{"file:/t/data/a.parquet", "file:/t/data/b.parquet"}}
	m.outcome(Outcome{Table: "db.t", Task: TaskOrphans, Status: StatusFailed, Orphans: rep}, time.Now())
	if got := counter(t, m.orphansLost.WithLabelValues("db.t")); got != 2 {
		t.Fatalf("orphan_files_deleted_referenced_total = %v, want 2", got)
	}
	m.outcome(Outcome{Table: "db.t", Task: TaskOrphans, Status: StatusSucceeded, Orphans: &OrphansReport{FilesDeleted: 1}}, time.Now())
	if got := counter(t, m.orphansLost.WithLabelValues("db.t")); got != 2 {
		t.Fatalf("a clean run changed the counter to %v", got)
	}
}

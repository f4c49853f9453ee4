package maintenance

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

// A run that deleted files a writer committed meanwhile counts them.
func TestOrphansDeletedReferencedIsCounted(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), metrics.NewTables(true, 10))
	rep := &OrphansReport{FilesFound: 3, FilesDeleted: 3, DeletedReferenced: []string{"file:/t/data/a.parquet", "file:/t/data/b.parquet"}}
	m.outcome(Outcome{Table: "db.t", Task: TaskOrphans, Status: StatusFailed, Orphans: rep}, time.Now())
	if got := counter(t, m.lost.WithLabelValues("db.t", TaskOrphans)); got != 2 {
		t.Fatalf("deleted_referenced_files_total{orphans} = %v, want 2", got)
	}
	m.outcome(Outcome{Table: "db.t", Task: TaskOrphans, Status: StatusSucceeded, Orphans: &OrphansReport{FilesDeleted: 1}}, time.Now())
	if got := counter(t, m.lost.WithLabelValues("db.t", TaskOrphans)); got != 2 {
		t.Fatalf("a clean run changed the counter to %v", got)
	}
}

// Expiry's retried deletes count the same way, under their task.
func TestExpireDeletedReferencedIsCounted(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), metrics.NewTables(true, 10))
	rep := &ExpireReport{Retry: &expire.RetryResult{DeletedReferenced: []string{"file:/t/data/a.parquet"}}}
	m.outcome(Outcome{Table: "db.t", Task: TaskExpire, Status: StatusFailed, Expire: rep}, time.Now())
	if got := counter(t, m.lost.WithLabelValues("db.t", TaskExpire)); got != 1 {
		t.Fatalf("deleted_referenced_files_total{expire} = %v, want 1", got)
	}
	if got := counter(t, m.lost.WithLabelValues("db.t", TaskOrphans)); got != 0 {
		t.Fatalf("deleted_referenced_files_total{orphans} = %v after an expiry, want 0", got)
	}
}

package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The table label is capped, and a table that leaves the selection leaves
// the metrics, freeing its slot.
func TestTablesCapAndForget(t *testing.T) {
	reg := prometheus.NewRegistry()
	runs := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "runs_total", Help: "h"}, []string{LabelTable})
	reg.MustRegister(runs)
	tables := NewTables(true, 2)
	tables.OnForget(func(table string) { DeleteTable(table, runs) })
	for _, name := range []string{"db.a", "db.b", "db.c", "db.a"} {
		l, _ := tables.Label(name)
		runs.WithLabelValues(l).Inc()
	}
	want := `
# HELP iceberg_maintainer_runs_total h
# TYPE iceberg_maintainer_runs_total counter
iceberg_maintainer_runs_total{table="_other"} 1
iceberg_maintainer_runs_total{table="db.a"} 2
iceberg_maintainer_runs_total{table="db.b"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	tables.Retain(map[string]bool{"db.b": true, "db.c": true})
	if l, own := tables.Label("db.c"); l != "db.c" || !own {
		t.Errorf("db.c after db.a left: %q %v; want its own label", l, own)
	}
	want = `
# HELP iceberg_maintainer_runs_total h
# TYPE iceberg_maintainer_runs_total counter
iceberg_maintainer_runs_total{table="_other"} 1
iceberg_maintainer_runs_total{table="db.b"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if l, own := NewTables(false, 10).Label("db.a"); l != OtherTables || own {
		t.Errorf("label off: %q %v", l, own)
	}
}

// Two components asking for the trigger family get the same collector.
func TestTriggerRequestsShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := TriggerRequests(reg), TriggerRequests(reg)
	a.WithLabelValues("poll", "queued").Inc()
	b.WithLabelValues("poll", "queued").Inc()
	if got := testutil.ToFloat64(a.WithLabelValues("poll", "queued")); got != 2 {
		t.Errorf("shared counter = %v; want 2", got)
	}
}

func TestValidLabelName(t *testing.T) {
	for name, want := range map[string]bool{"table": true, "_x1": true, "iceberg_table": true,
		"": false, "1table": false, "a-b": false, "a.b": false} {
		if got := ValidLabelName(name); got != want {
			t.Errorf("ValidLabelName(%q) = %v; want %v", name, got, want)
		}
	}
}

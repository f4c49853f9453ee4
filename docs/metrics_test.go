package docs

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iceberg-maintainer/maintainer/fleet"
	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/metrics"
	"github.com/iceberg-maintainer/maintainer/server"
)

// The convention metrics.md follows, and this file checks: every metric is
// one row of a table whose header starts with | metric | type | labels |.
// The metric cell is one code span with the full name
// (`iceberg_maintainer_runs_total`; histograms without _bucket/_sum/_count),
// the type cell is counter, gauge or histogram, and the labels cell lists the
// label names as code spans (histograms' `le` is not listed), or says "none".
// Any iceberg_maintainer_* name anywhere in docs/ must be a real metric.

// recordingRegisterer passes registrations to a registry and remembers the
// collectors, so that vectors without series can be found and touched.
type recordingRegisterer struct {
	reg *prometheus.Registry
	mu  sync.Mutex
	cs  []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.cs = append(r.cs, c)
	r.mu.Unlock()
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recordingRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// fakeQueue accepts every dotted table name.
type fakeQueue struct{}

func (fakeQueue) Enqueue(_ context.Context, r server.Request) (server.Enqueued, error) {
	tasks := r.Tasks
	if len(tasks) == 0 {
		tasks = maintenance.TaskNames()
	}
	return server.Enqueued{Table: r.Table, Tasks: tasks}, nil
}
func (fakeQueue) Known(table string) bool { return strings.Contains(table, ".") }
func (fakeQueue) Status() any             { return maintenance.Status{} }

// metricInfo is one metric family as exported.
type metricInfo struct {
	typ    string
	labels []string
}

// exportedMetrics builds the metrics `maintainer serve` registers (the
// reconciler's and the server's), gives every vector one series, and
// gathers them.
func exportedMetrics(t *testing.T) map[string]metricInfo {
	t.Helper()
	rec := &recordingRegisterer{reg: prometheus.NewRegistry()}
	m := maintenance.NewMetrics(rec, metrics.NewTables(true, 10))
	fleet.NewMetrics(rec)
	// The running-task gauges have series only while a task runs.
	m.WatchRunning(func() []maintenance.RunningTask {
		return []maintenance.RunningTask{{Table: "x.y", Task: maintenance.TaskCompact, Started: time.Now()}}
	})
	if _, err := server.New(server.DefaultConfig(), server.Deps{Queue: fakeQueue{}, Tasks: maintenance.TaskNames(), Registerer: rec, Gatherer: rec.reg}); err != nil {
		t.Fatal(err)
	}
	for _, c := range rec.cs {
		var get func(...string) error
		switch v := c.(type) {
		case *prometheus.CounterVec:
			get = func(l ...string) error { _, err := v.GetMetricWithLabelValues(l...); return err }
		case *prometheus.GaugeVec:
			get = func(l ...string) error { _, err := v.GetMetricWithLabelValues(l...); return err }
		case *prometheus.HistogramVec:
			get = func(l ...string) error { _, err := v.GetMetricWithLabelValues(l...); return err }
		default:
			continue // a plain metric is always exported
		}
		ok := false
		for n := 0; n <= 8 && !ok; n++ {
			vals := make([]string, n)
			for i := range vals {
				vals[i] = "x"
			}
			ok = get(vals...) == nil
		}
		if !ok {
			t.Fatalf("could not create a series of %T", c)
		}
	}
	fams, err := rec.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metricInfo{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), metrics.Namespace+"_") {
			continue
		}
		info := metricInfo{typ: strings.ToLower(f.GetType().String())}
		if len(f.Metric) > 0 {
			for _, l := range f.Metric[0].Label {
				info.labels = append(info.labels, l.GetName())
			}
		}
		slices.Sort(info.labels)
		out[f.GetName()] = info
	}
	if len(out) < 30 {
		t.Fatalf("only %d iceberg_maintainer_ metrics gathered", len(out))
	}
	return out
}

// The metrics metrics.md documents are exactly those exported, with the
// same types and label names.
func TestMetricsReference(t *testing.T) {
	real := exportedMetrics(t)
	f := docFile(t, "metrics.md")
	documented := map[string]int{}
	for _, tb := range f.tables() {
		if !tb.hasHeader("metric", "type", "labels") {
			continue
		}
		for i, row := range tb.rows {
			at := fmt.Sprintf("%s:%d", f.path, tb.rowLine[i])
			name, ok := onlyCodeSpan(row[0])
			if !ok {
				t.Errorf("%s: the metric cell %q must be exactly one code span", at, row[0])
				continue
			}
			if prev, dup := documented[name]; dup {
				t.Errorf("%s: %s documented twice (also line %d)", at, name, prev)
			}
			documented[name] = tb.rowLine[i]
			info, ok := real[name]
			if !ok {
				t.Errorf("%s: %s is not exported by maintainer serve", at, name)
				continue
			}
			if typ := strings.TrimSpace(row[1]); typ != info.typ {
				t.Errorf("%s: %s is a %s, documented as %q", at, name, info.typ, typ)
			}
			labels := codeSpans(row[2])
			slices.Sort(labels)
			if len(labels) == 0 && strings.TrimSpace(row[2]) != "none" {
				t.Errorf("%s: %s: the labels cell %q must list code spans or say none", at, name, row[2])
			}
			if !slices.Equal(labels, info.labels) {
				t.Errorf("%s: %s has labels %v, documented %v", at, name, info.labels, labels)
			}
		}
	}
	var missing []string
	for name := range real {
		if _, ok := documented[name]; !ok {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	for _, name := range missing {
		t.Errorf("metrics.md does not document %s (%s, labels %v)", name, real[name].typ, real[name].labels)
	}
}

var metricName = regexp.MustCompile(`iceberg_maintainer_[a-z0-9_]+`)

// Metric names used anywhere in docs/ (queries, prose) exist.
func TestDocsMentionOnlyRealMetrics(t *testing.T) {
	real := exportedMetrics(t)
	n := 0
	for _, f := range docFiles(t) {
		for i, l := range f.lines {
			for _, m := range metricName.FindAllString(l, -1) {
				n++
				if _, ok := real[m]; ok {
					continue
				}
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					base = strings.TrimSuffix(base, suf)
				}
				if info, ok := real[base]; ok && info.typ == "histogram" {
					continue
				}
				t.Errorf("%s:%d: %s is not an exported metric", f.path, i+1, m)
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d metric names found in docs/", n)
	}
}

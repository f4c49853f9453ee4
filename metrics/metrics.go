// Package metrics holds what every component's metrics share: the
// namespace, the label names, the registry constructor and the bounded table
// label. Components declare their own unexported metric structs with
// promauto.With(reg); nothing here registers on the default registry.
package metrics

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
)

// Namespace prefixes every metric the maintainer exports.
const Namespace = "iceberg_maintainer"

// Label names shared by the components' metrics.
const (
	LabelTable  = "table"
	LabelTask   = "task"
	LabelResult = "result"
	LabelSource = "source"
)

// OtherTables is the table label value of tables beyond the cap (or of every
// table when the label is off), so counters still add up.
const OtherTables = "_other"

// NewRegistry returns a registry with the Go runtime and process collectors,
// which is what /metrics serves.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Tables bounds the cardinality of the table label: the first Max tables
// seen get their own label value, the rest share OtherTables. Per-table
// gauges are only set for tables that got a label of their own. A table that
// leaves the selection is forgotten, freeing its slot, and each Forget hook
// deletes its series.
type Tables struct {
	enabled bool
	max     int
	mu      sync.Mutex
	known   map[string]bool
	hooks   []func(table string)
}

// NewTables returns a table label limiter; max <= 0 means no limit.
func NewTables(enabled bool, max int) *Tables {
	return &Tables{enabled: enabled, max: max, known: map[string]bool{}}
}

// Label returns the label value to use for table and whether the table has
// a label of its own.
func (t *Tables) Label(table string) (string, bool) {
	if t == nil || !t.enabled {
		return OtherTables, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known[table] {
		return table, true
	}
	if t.max > 0 && len(t.known) >= t.max {
		return OtherTables, false
	}
	t.known[table] = true
	return table, true
}

// OnForget registers a hook that deletes a forgotten table's series.
func (t *Tables) OnForget(f func(table string)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.hooks = append(t.hooks, f)
	t.mu.Unlock()
}

// Retain forgets every labelled table that is not in keep (the current
// selection) and deletes its series.
func (t *Tables) Retain(keep map[string]bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	var gone []string
	for name := range t.known {
		if !keep[name] {
			gone = append(gone, name)
			delete(t.known, name)
		}
	}
	hooks := append([]func(string){}, t.hooks...)
	t.mu.Unlock()
	sort.Strings(gone)
	for _, name := range gone {
		for _, h := range hooks {
			h(name)
		}
	}
}

// DeleteTable removes every series of vec whose table label is table.
func DeleteTable(table string, vecs ...interface {
	DeletePartialMatch(prometheus.Labels) int
}) {
	for _, v := range vecs {
		v.DeletePartialMatch(prometheus.Labels{LabelTable: table})
	}
}

// CounterVec registers a counter vector on reg, or returns the one already
// registered under the same name and labels, so that two components (the
// HTTP server and the scheduler) can count into one family.
func CounterVec(reg prometheus.Registerer, opts prometheus.CounterOpts, labels []string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(opts, labels)
	if err := reg.Register(v); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("metrics: register %s: %v", opts.Name, err))
	}
	return v
}

// TriggerRequests is the family of trigger requests by source (poll, http,
// alertmanager) and result; the server and the scheduler both count
// into it.
func TriggerRequests(reg prometheus.Registerer) *prometheus.CounterVec {
	return CounterVec(reg, prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "trigger_requests_total",
		Help:      "Requests to run maintenance, by source (poll, http, alertmanager) and result (queued, duplicate, held, ignored, rejected, unauthorized, error).",
	}, []string{LabelSource, LabelResult})
}

// ValidLabelName is Prometheus' (legacy, portable) rule for a label name.
func ValidLabelName(s string) bool { return model.LabelName(s).IsValidLegacy() }

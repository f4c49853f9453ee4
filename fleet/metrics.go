package fleet

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/iceberg-maintainer/maintainer/metrics"
)

// Metrics are the membership's metrics. A nil *Metrics records nothing.
type Metrics struct {
	seen      prometheus.Gauge
	errors    prometheus.Counter
	conflicts prometheus.Counter
}

// NewMetrics registers the membership's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		seen: f.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "fleet_members",
			Help: "Live serve replicas this replica sees, itself included; 0 while its view of the fleet is not valid."}),
		errors: f.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "fleet_membership_errors_total",
			Help: "Heartbeat-and-list rounds of the fleet membership that failed (lock backend unreachable)."}),
		conflicts: f.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "fleet_replica_id_conflicts_total",
			Help: "Heartbeats that found this replica's id heartbeated by another process since its own last one (scheduler.replica_id shared by several replicas)."}),
	}
}

func (m *Metrics) members(ids []string) {
	if m != nil {
		m.seen.Set(float64(len(ids)))
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.errors.Inc()
	}
}

func (m *Metrics) conflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}

package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iceberg-maintainer/maintainer/metrics"
)

// Results of the trigger_requests_total counter.
const (
	resultQueued       = "queued"       // a new request entered the queue
	resultDuplicate    = "duplicate"    // merged into one already queued
	resultHeld         = "held"         // every task asked for waits for its rate limit
	resultIgnored      = "ignored"      // a resolved alert
	resultRejected     = "rejected"     // the client's fault: 400, 405, 413
	resultUnauthorized = "unauthorized" // 401
	resultError        = "error"        // ours: 5xx, stopping
)

// serverMetrics are the server's own series. Registered on the injected
// registerer only, so tests and several servers in one process never clash.
type serverMetrics struct {
	triggers *prometheus.CounterVec
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	f := promauto.With(reg)
	m := &serverMetrics{
		// Shared with the scheduler (source "poll"): one family, one help.
		triggers: metrics.TriggerRequests(reg),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace,
			Name:      "http_requests_total",
			Help:      "HTTP requests served, by handler and status code.",
		}, []string{"handler", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace,
			Name:      "http_request_duration_seconds",
			Help:      "Time to serve an HTTP request, by handler.",
			Buckets:   []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5},
		}, []string{"handler"}),
	}
	// Zero series from the start, so rate() and alerts see the first event.
	for _, src := range []string{SourceHTTP, SourceAlertmanager} {
		for _, res := range []string{resultQueued, resultDuplicate, resultHeld, resultIgnored, resultRejected, resultUnauthorized, resultError} {
			if src == SourceHTTP && res == resultIgnored {
				continue // the trigger API has nothing to ignore
			}
			m.triggers.WithLabelValues(src, res)
		}
	}
	return m
}

// enqueueResult is the trigger result of an accepted request: what its
// answer's state says happens.
func enqueueResult(enq Enqueued) string {
	switch {
	case enq.State == StateHeld:
		return resultHeld
	case enq.Duplicate:
		return resultDuplicate
	}
	return resultQueued
}

func (m *serverMetrics) trigger(source, result string, n int) {
	if n > 0 {
		m.triggers.WithLabelValues(source, result).Add(float64(n))
	}
}

// instrument wraps h with the request counter and duration histogram.
func (m *serverMetrics) instrument(name string, h http.Handler) http.Handler {
	l := prometheus.Labels{"handler": name}
	return promhttp.InstrumentHandlerDuration(m.duration.MustCurryWith(l),
		promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(l), h))
}

package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// amNotification is shaped as Alertmanager v0.2x posts it to a webhook_config
// receiver (template.Data plus version, groupKey, truncatedAlerts), grouped
// by alertname with three firing alerts and one resolved.
const amNotification = `{
  "receiver": "iceberg-maintainer",
  "status": "firing",
  "alerts": [
    {
      "status": "firing",
      "labels": {
        "alertname": "IcebergTooManySmallFiles",
        "namespace": "sales",
        "table": "orders",
        "task": "compact",
        "severity": "warning",
        "job": "iceberg-exporter"
      },
      "annotations": {
        "summary": "sales.orders has 48210 files under 32MiB",
        "description": "Average file size 4.1MiB over the last hour."
      },
      "startsAt": "2025-03-04T09:12:26.739266876Z",
      "endsAt": "0001-01-01T00:00:00Z",
      "generatorURL": "http://prometheus:9090/graph?g0.expr=iceberg_small_files+%3E+10000\u0026g0.tab=1",
      "fingerprint": "3f2a9c7d1be04e51"
    },
    {
      "status": "firing",
      "labels": {
        "alertname": "IcebergSnapshotsPiling",
        "namespace": "sales",
        "table": "sales.orders",
        "task": "expire",
        "severity": "warning"
      },
      "annotations": {},
      "startsAt": "2025-03-04T09:10:00Z",
      "endsAt": "0001-01-01T00:00:00Z",
      "generatorURL": "http://prometheus:9090/graph?g0.expr=iceberg_snapshots+%3E+500\u0026g0.tab=1",
      "fingerprint": "9d1e0c55aa7b3f20"
    },
    {
      "status": "firing",
      "labels": {
        "alertname": "IcebergTooManySmallFiles",
        "table": "web.events",
        "severity": "warning"
      },
      "annotations": {
        "summary": "web.events has 9120 files under 32MiB"
      },
      "startsAt": "2025-03-04T09:11:02.1Z",
      "endsAt": "0001-01-01T00:00:00Z",
      "generatorURL": "http://prometheus:9090/graph?g0.expr=iceberg_small_files+%3E+10000\u0026g0.tab=1",
      "fingerprint": "c6eadffa33fcdf37"
    },
    {
      "status": "resolved",
      "labels": {
        "alertname": "IcebergTooManySmallFiles",
        "namespace": "gone",
        "table": "dropped_table",
        "severity": "warning"
      },
      "annotations": {
        "summary": "gone.dropped_table has 12000 files under 32MiB"
      },
      "startsAt": "2025-03-04T07:00:00Z",
      "endsAt": "2025-03-04T09:05:00Z",
      "generatorURL": "http://prometheus:9090/graph?g0.expr=iceberg_small_files+%3E+10000\u0026g0.tab=1",
      "fingerprint": "0b7f3e2d9a1c4e68"
    }
  ],
  "groupLabels": {
    "alertname": "IcebergTooManySmallFiles"
  },
  "commonLabels": {
    "severity": "warning"
  },
  "commonAnnotations": {},
  "externalURL": "http://alertmanager:9093",
  "version": "4",
  "groupKey": "{}/{job=\"iceberg-exporter\"}:{alertname=\"IcebergTooManySmallFiles\"}",
  "truncatedAlerts": 0
}`

func TestAlertmanagerNotification(t *testing.T) {
	q := newFakeQueue("sales.orders", "web.events")
	e := newEnv(t, DefaultConfig(), q, nil)
	w := e.do(http.MethodPost, "/v1/alertmanager", amNotification, "Content-Type", "application/json")
	if w.Code != http.StatusAccepted {
		t.Fatalf("code %d: %s", w.Code, w.Body)
	}
	want := []Request{
		{
			Table:  "sales.orders",
			Tasks:  []string{"compact", "expire"}, // two alerts merged, in run order
			Reason: "alert IcebergTooManySmallFiles: sales.orders has 48210 files under 32MiB; alert IcebergSnapshotsPiling",
			Source: SourceAlertmanager,
		},
		{
			Table:  "web.events",
			Tasks:  nil, // no task label: every task
			Reason: "alert IcebergTooManySmallFiles: web.events has 9120 files under 32MiB",
			Source: SourceAlertmanager,
		},
	}
	got := q.requests()
	if len(got) != len(want) {
		t.Fatalf("enqueued %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reqEqual(got[i], want[i]) {
			t.Errorf("request %d = %+v\nwant %+v", i, got[i], want[i])
		}
		if got[i].Force {
			t.Errorf("request %d forced: alerts must respect thresholds and the rate limit", i)
		}
	}
	resp := decode[triggerResponse](t, w)
	if len(resp.Queued) != 2 || resp.Queued[0].Table != "sales.orders" || !slices.Equal(resp.Queued[1].Tasks, testTasks) {
		t.Errorf("response = %+v", resp)
	}
	if !strings.Contains(resp.Note, "1 resolved") {
		t.Errorf("note = %q", resp.Note)
	}
	if n := e.triggerCount(SourceAlertmanager, resultQueued); n != 2 {
		t.Errorf("alertmanager queued = %v, want 2 (one per table)", n)
	}
	if n := e.triggerCount(SourceAlertmanager, resultIgnored); n != 1 {
		t.Errorf("alertmanager ignored = %v, want 1", n)
	}

	// Alertmanager re-sends the group every group_interval: merged, not doubled.
	w = e.do(http.MethodPost, "/v1/alertmanager", amNotification)
	if w.Code != http.StatusAccepted {
		t.Fatalf("repeat: %d %s", w.Code, w.Body)
	}
	for _, enq := range decode[triggerResponse](t, w).Queued {
		if !enq.Duplicate {
			t.Errorf("repeat of %s not a duplicate", enq.Table)
		}
	}
	if n := e.triggerCount(SourceAlertmanager, resultDuplicate); n != 2 {
		t.Errorf("alertmanager duplicate = %v, want 2", n)
	}
}

func TestAlertmanagerRejectsWholeNotification(t *testing.T) {
	q := newFakeQueue("sales.orders")
	e := newEnv(t, DefaultConfig(), q, nil)
	body := `{"version":"4","status":"firing","receiver":"r","groupKey":"{}:{}","truncatedAlerts":0,
	  "groupLabels":{},"commonLabels":{},"commonAnnotations":{},"externalURL":"http://am:9093",
	  "alerts":[
	    {"status":"firing","labels":{"alertname":"Good","table":"sales.orders"},"annotations":{},"fingerprint":"f0"},
	    {"status":"firing","labels":{"alertname":"NoTable","namespace":"sales"},"annotations":{},"fingerprint":"f1"},
	    {"status":"firing","labels":{"alertname":"Unknown","namespace":"sales","table":"refunds"},"annotations":{},"fingerprint":"f2"},
	    {"status":"firing","labels":{"alertname":"BadTask","table":"sales.orders","task":"vacuum"},"annotations":{},"fingerprint":"f3"},
	    {"status":"resolved","labels":{"alertname":"Old","table":"nowhere"},"annotations":{},"fingerprint":"f4"}
	  ]}`
	w := e.do(http.MethodPost, "/v1/alertmanager", body)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("code %d: %s", w.Code, w.Body)
	}
	if got := q.requests(); len(got) != 0 {
		t.Fatalf("enqueued %+v; a bad alert must stop the whole notification", got)
	}
	rej := decode[amRejection](t, w)
	wantBad := map[string]string{
		"f1": `missing label "table"`,
		"f2": `unknown table "sales.refunds"`,
		"f3": `task="vacuum" is not a task`,
	}
	if len(rej.Alerts) != len(wantBad) {
		t.Fatalf("bad alerts = %+v, want %d", rej.Alerts, len(wantBad))
	}
	for _, b := range rej.Alerts {
		if !strings.Contains(b.Error, wantBad[b.Fingerprint]) || b.Alertname == "" {
			t.Errorf("bad alert %+v, want error containing %q", b, wantBad[b.Fingerprint])
		}
	}
	for _, s := range []string{`"NoTable" (fingerprint f1)`, `"Unknown" (fingerprint f2)`, `"BadTask" (fingerprint f3)`, "nothing was queued"} {
		if !strings.Contains(rej.Error, s) {
			t.Errorf("error %q lacks %q", rej.Error, s)
		}
	}
	if strings.Contains(rej.Error, "Good") || strings.Contains(rej.Error, "Old") {
		t.Errorf("error names a valid alert: %q", rej.Error)
	}
	if n := e.triggerCount(SourceAlertmanager, resultRejected); n != 4 {
		t.Errorf("alertmanager rejected = %v, want 4 (every firing alert)", n)
	}
	if n := e.triggerCount(SourceAlertmanager, resultIgnored); n != 1 {
		t.Errorf("alertmanager ignored = %v, want 1", n)
	}
}

func TestAlertmanagerEdgeCases(t *testing.T) {
	tests := []struct {
		name     string
		cfg      func(*Config)
		body     string
		wantCode int
		wantIn   string
		wantReqs []Request
	}{
		{
			name:     "all resolved",
			body:     `{"version":"4","status":"resolved","alerts":[{"status":"resolved","labels":{"alertname":"A","table":"sales.orders"},"fingerprint":"f"}]}`,
			wantCode: http.StatusAccepted,
			wantIn:   `"note": "no firing alerts (1 resolved ignored); nothing queued"`,
		},
		{
			name:     "empty alert list",
			body:     `{"version":"4","status":"firing","alerts":[]}`,
			wantCode: http.StatusAccepted,
			wantIn:   `"queued": []`,
		},
		{
			name:     "unsupported version",
			body:     `{"version":"3","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"A","table":"sales.orders"}}]}`,
			wantCode: http.StatusBadRequest,
			wantIn:   `unsupported Alertmanager webhook version \"3\"`,
		},
		{
			name:     "missing version",
			body:     `{"status":"firing","alerts":[]}`,
			wantCode: http.StatusBadRequest,
			wantIn:   "unsupported Alertmanager webhook version",
		},
		{
			name:     "bad JSON",
			body:     `{"version":"4","alerts":[{]}`,
			wantCode: http.StatusBadRequest,
			wantIn:   "malformed JSON at byte 27",
		},
		{
			name:     "unknown fields from newer senders are accepted",
			body:     `{"version":"4","orgId":1,"alerts":[{"status":"firing","labels":{"alertname":"A","table":"sales.orders"},"silenceURL":"x","fingerprint":"f"}]}`,
			wantCode: http.StatusAccepted,
			wantReqs: []Request{{Table: "sales.orders", Reason: "alert A", Source: SourceAlertmanager}},
		},
		{
			name:     "odd alert status",
			body:     `{"version":"4","alerts":[{"status":"pending","labels":{"alertname":"A","table":"sales.orders"},"fingerprint":"f9"}]}`,
			wantCode: http.StatusBadRequest,
			wantIn:   `status \"pending\"`,
		},
		{
			name:     "truncated notification is noted",
			body:     `{"version":"4","truncatedAlerts":7,"alerts":[{"status":"firing","labels":{"alertname":"A","table":"sales.orders"}}]}`,
			wantCode: http.StatusAccepted,
			wantIn:   "7 alert(s) were truncated",
			wantReqs: []Request{{Table: "sales.orders", Reason: "alert A", Source: SourceAlertmanager}},
		},
		{
			name:     "task label on one alert and not on another of the same table means all tasks",
			body:     `{"version":"4","alerts":[{"status":"firing","labels":{"alertname":"A","table":"sales.orders","task":"orphans"}},{"status":"firing","labels":{"alertname":"B","table":"sales.orders"}},{"status":"firing","labels":{"alertname":"A","table":"sales.orders"}}]}`,
			wantCode: http.StatusAccepted,
			wantReqs: []Request{{Table: "sales.orders", Reason: "alert A; alert B", Source: SourceAlertmanager}},
		},
		{
			name:     "a Kubernetes namespace label beside a qualified table label: the table label alone names the table",
			body:     `{"version":"4","alerts":[{"status":"firing","labels":{"alertname":"A","namespace":"data-platform","table":"sales.orders"}}]}`,
			wantCode: http.StatusAccepted,
			wantReqs: []Request{{Table: "sales.orders", Reason: "alert A", Source: SourceAlertmanager}},
		},
		{
			name: "custom labels; namespace label off ignores the Kubernetes namespace",
			cfg: func(c *Config) {
				c.AlertTableLabel = "iceberg_table"
				c.AlertNamespaceLabel = ""
				c.AlertTaskLabel = "maintenance"
			},
			body:     `{"version":"4","alerts":[{"status":"firing","labels":{"alertname":"A","namespace":"monitoring","iceberg_table":"sales.orders","maintenance":"expire","task":"bogus"}}]}`,
			wantCode: http.StatusAccepted,
			wantReqs: []Request{{Table: "sales.orders", Tasks: []string{"expire"}, Reason: "alert A", Source: SourceAlertmanager}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			q := newFakeQueue("sales.orders")
			e := newEnv(t, cfg, q, nil)
			w := e.do(http.MethodPost, "/v1/alertmanager", tt.body)
			if w.Code != tt.wantCode {
				t.Fatalf("code %d, want %d: %s", w.Code, tt.wantCode, w.Body)
			}
			if tt.wantIn != "" && !strings.Contains(w.Body.String(), tt.wantIn) {
				t.Errorf("body lacks %s:\n%s", tt.wantIn, w.Body)
			}
			got := q.requests()
			if len(got) != len(tt.wantReqs) {
				t.Fatalf("enqueued %+v, want %+v", got, tt.wantReqs)
			}
			for i := range got {
				if !reqEqual(got[i], tt.wantReqs[i]) {
					t.Errorf("request %d = %+v, want %+v", i, got[i], tt.wantReqs[i])
				}
			}
		})
	}
}

func TestAlertmanagerStopping(t *testing.T) {
	q := newFakeQueue("sales.orders", "web.events")
	e := newEnv(t, DefaultConfig(), q, nil)
	q.err = ErrStopping
	w := e.do(http.MethodPost, "/v1/alertmanager", amNotification)
	// 5xx makes Alertmanager retry, against the replica that replaces us.
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("code %d Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if n := testutil.ToFloat64(e.srv.m.triggers.WithLabelValues(SourceAlertmanager, resultError)); n != 2 {
		t.Errorf("alertmanager error = %v, want 2 (both tables)", n)
	}
}

// The queue may read a table's rate limits for each request: one budget
// bounds them all, so a notification naming many tables is answered before
// Alertmanager's webhook timeout; a trigger request has the same bound.
func TestEnqueueCallsShareOneBudget(t *testing.T) {
	q := newFakeQueue("sales.orders", "web.events")
	e := newEnv(t, DefaultConfig(), q, nil)
	if w := e.do(http.MethodPost, "/v1/alertmanager", amNotification, "Content-Type", "application/json"); w.Code != http.StatusAccepted {
		t.Fatalf("code %d: %s", w.Code, w.Body)
	}
	if w := e.do(http.MethodPost, "/v1/trigger", `{"table":"web.events"}`, "Content-Type", "application/json"); w.Code != http.StatusAccepted {
		t.Fatalf("code %d: %s", w.Code, w.Body)
	}
	q.mu.Lock()
	dls := slices.Clone(q.deadlines)
	q.mu.Unlock()
	if len(dls) != 3 {
		t.Fatalf("%d enqueues, want 3", len(dls))
	}
	for i, dl := range dls {
		if dl.IsZero() || time.Until(dl) > enqueueBudget {
			t.Errorf("enqueue %d: deadline %v; want one within %s", i, dl, enqueueBudget)
		}
	}
	if !dls[0].Equal(dls[1]) {
		t.Errorf("the notification's two enqueues have deadlines %v and %v; want one shared budget", dls[0], dls[1])
	}
}

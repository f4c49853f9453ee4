package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/outputcheck"
	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/server"
)

// The answers of POST /v1/trigger and /v1/alertmanager say when the run
// happens (queued at a position, merged, or held by the rate limit until an
// RFC 3339 time), and they, GET /v1/status, version and config validate
// follow the output conventions. run, plan and status documents are checked
// in package maintenance.
func TestJSONOutputsFollowTheConventions(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	runner := heldRunner{release: make(chan struct{}), started: make(chan struct{}, 1),
		holds: map[string]time.Time{maintenance.TaskOrphans: until}}
	_, h, _, _ := startSchedulerOver(t, runner)
	answer := func(path, body string, want server.Enqueued) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		if rec.Code != http.StatusAccepted {
			t.Fatalf("%s %s: %d %s", path, body, rec.Code, rec.Body)
		}
		outputcheck.Expect(t, path+" answer", rec.Body.Bytes(), "queued")
		var resp struct{ Queued []server.Enqueued }
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Queued) != 1 {
			t.Fatalf("%s answer %s: %v", path, rec.Body, err)
		}
		got := resp.Queued[0]
		if got.State != want.State || got.Position != want.Position || len(got.Held) != len(want.Held) ||
			(len(want.Held) == 1 && (got.Held[0].Task != want.Held[0].Task || !got.Held[0].Until.Equal(want.Held[0].Until))) {
			t.Errorf("%s %s answered %+v; want %+v", path, body, got, want)
		}
		for _, k := range []string{`"state"`, `"position"`, `"held"`, `"tasks"`} {
			if !bytes.Contains(rec.Body.Bytes(), []byte(k)) {
				t.Errorf("%s answer lacks %s: %s", path, k, rec.Body)
			}
		}
	}
	orphansHeld := []server.Held{{Task: maintenance.TaskOrphans, Until: until}}
	answer("/v1/trigger", `{"table": "demo.events", "tasks": ["orphans"]}`, server.Enqueued{State: server.StateHeld, Held: orphansHeld})
	answer("/v1/trigger", `{"table": "demo.events", "tasks": ["compact"]}`, server.Enqueued{State: server.StateQueued, Position: 1})
	select { // running now; the next request queues behind it
	case <-runner.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the queued table never started")
	}
	answer("/v1/trigger", `{"table": "demo.events"}`, server.Enqueued{State: server.StateQueued, Position: 1, Held: orphansHeld})
	answer("/v1/trigger", `{"table": "demo.events", "tasks": ["orphans"], "force": true}`, server.Enqueued{State: server.StateMerged, Position: 1})
	answer("/v1/alertmanager", `{"version": "4", "status": "firing", "alerts": [{"status": "firing", "labels": {"alertname": "SmallFiles", "table": "demo.events"}}]}`,
		server.Enqueued{State: server.StateMerged, Position: 1, Held: orphansHeld})

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/status", nil))
	outputcheck.Expect(t, "GET /v1/status", rec.Body.Bytes(), "queue", "running", "recent")

	var out bytes.Buffer
	if err := run(t.Context(), []string{"version", "--output", "json"}, &out, &out, nil); err != nil {
		t.Fatal(err)
	}
	outputcheck.Expect(t, "version", out.Bytes(), "version", "commit", "go", "iceberg_go")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("catalog:\n  type: nope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"config", "validate", "--config", bad, "--output", "json"}, &out, &bytes.Buffer{}, nil); err == nil {
		t.Fatal("config validate of a bad config succeeded")
	}
	outputcheck.Expect(t, "config validate", out.Bytes(), "config", "valid", "problems")
}

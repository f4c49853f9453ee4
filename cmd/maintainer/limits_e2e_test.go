package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A request limit or max_run_time that could never let anything run is a
// configuration error naming the key: exit 2, nothing run.
func TestRequestAndRunLimitsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ name, yaml, key string }{
		{"request_timeout", "catalog:\n  type: hadoop\n  warehouse: /tmp/wh\n  request_timeout: 0s\n", "catalog.request_timeout"},
		{"max_attempts", "catalog:\n  type: hadoop\n  warehouse: /tmp/wh\n  max_attempts: 0\n", "catalog.max_attempts"},
		{"max_run_time", "catalog:\n  type: hadoop\n  warehouse: /tmp/wh\ndefaults:\n  expire: {max_run_time: 0s}\n", "defaults.expire.max_run_time"},
	} {
		cfg := writeFile(t, filepath.Join(dir, c.name+".yaml"), c.yaml)
		r := runMaintainer(t, dir, "run", "--config", cfg)
		expectCode(t, r, 2, c.name)
		if !strings.Contains(r.stderr, c.key) {
			t.Errorf("%s: stderr does not name %s:\n%s", c.name, c.key, r.stderr)
		}
	}
}

// A catalog that accepts connections and never answers fails the command
// within catalog.request_timeout (exit 3, before any work), whether it
// stalls while the catalog is opened or on the first listing.
func TestStalledCatalogExit3(t *testing.T) {
	t.Parallel()
	stalled := func(answerConfig bool) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if answerConfig && r.URL.Path == "/v1/config" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"defaults": {}, "overrides": {}}`))
				return
			}
			<-r.Context().Done() // the client gave up
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		srv    *httptest.Server
		stderr []string
	}{
		{"stalls when opened", stalled(false), []string{"no answer within 1s (catalog.request_timeout)"}},
		{"stalls when listing", stalled(true), []string{"list namespaces", "no answer from the catalog within 1s (catalog.request_timeout)", "gave up after 2 attempts"}},
	} {
		cfg := writeFile(t, filepath.Join(dir, c.name+".yaml"),
			"catalog:\n  type: rest\n  uri: "+c.srv.URL+"\n  request_timeout: 1s\n  max_attempts: 2\n")
		// The retry's warning comes first, so the error is the last line.
		r := runMaintainer(t, dir, "run", "--config", cfg, "--output", "json")
		expectCode(t, r, 3, c.name)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "error: ") {
			t.Errorf("%s: the last stderr line is not the error:\n%s", c.name, r.stderr)
		}
		for _, w := range c.stderr {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, r.stderr)
			}
		}
		if !strings.Contains(r.stderr, c.srv.URL) {
			t.Errorf("%s: stderr does not name the catalog's endpoint %s:\n%s", c.name, c.srv.URL, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("%s: stdout should be empty (no table was worked on):\n%s", c.name, r.stdout)
		}
	}
}

// A task past its max_run_time is cancelled like a lost lease: `run` reports
// it failed naming the limit and exits 1; the table is as it was.
func TestMaxRunTimeFailsTheRun(t *testing.T) {
	t.Parallel()
	const name = "events"
	w := newGenWarehouse(t, name)
	base, err := os.ReadFile(w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, filepath.Join(w.dir, "limited.yaml"), string(base)+"tables:\n  - match: \"**\"\n    compact: {max_run_time: 1ms}\n")
	before := w.state(t, name)
	r := runMaintainer(t, w.dir, "run", "--config", cfg, "--task", "compact", "--force", "--output", "json")
	expectCode(t, r, 1, "run past max_run_time")
	outs := jsonLines[outcome](t, r.stdout)
	if len(outs) != 1 || outs[0].Status != "failed" || !strings.Contains(outs[0].Reason, "compact.max_run_time") {
		t.Fatalf("outcomes %+v; want compact failed naming compact.max_run_time\n%s", outs, r)
	}
	after := w.state(t, name)
	if after.snapshotID != before.snapshotID || after.rows != before.rows || after.sum != before.sum {
		t.Errorf("table changed: %+v -> %+v", before, after)
	}
	if v := verifyMetadataURI(t, after.metadata); v.LiveRows != before.rows {
		t.Errorf("verifier reads %d rows; want %d", v.LiveRows, before.rows)
	}
}

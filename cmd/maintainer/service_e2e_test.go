package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/goccy/go-yaml"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/redistest"
	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/maintenance"
)

// redisConfig returns the warehouse's config with a Redis lock (a key
// prefix of its own, so parallel tests do not meet) and extra YAML.
func (w *genWarehouse) redisConfig(t *testing.T, addr, extra string) (path, prefix string) {
	t.Helper()
	prefix = fmt.Sprintf("e2e-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	base, err := os.ReadFile(w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The state lives in Redis; drop the demo's state_file block so that
	// extra may bring its own scheduler block.
	if i := strings.Index(string(base), "\nscheduler:\n"); i >= 0 {
		base = base[:i+1]
	}
	text := strings.Replace(string(base), "lock:\n  backend: local\n", "lock:\n  backend: redis\n  redis:\n    addrs: [\""+addr+"\"]\n    key_prefix: "+prefix+"\n", 1)
	if text == string(base) {
		t.Fatalf("the default config has no local lock block to replace:\n%s", base)
	}
	return writeFile(t, filepath.Join(w.dir, "redis.yaml"), text+extra), prefix
}

// Two maintainers against one Redis and one table: while one compacts, the
// other finds every task busy, changes nothing and exits 0; the first
// finishes the work.
func TestTwoMaintainersOneRedis(t *testing.T) {
	t.Parallel()
	testTwoMaintainersOneRedis(t, sqliteCatalog)
}

// testTwoMaintainersOneRedis is TestTwoMaintainersOneRedis on the catalog
// that setup makes.
func testTwoMaintainersOneRedis(t *testing.T, setup catalogSetup) {
	addr := redistest.Need(t)
	const name = "events"
	w := newGenWarehouseOn(t, setup, name)
	cfg, _ := w.redisConfig(t, addr, "")
	before := w.state(t, name)

	first := startWatched(t, t.Context(), w.dir, "run", "--config", cfg, "--force", "--output", "json")
	first.atFirstGroup(t)
	second := runMaintainer(t, w.dir, "run", "--config", cfg, "--force", "--output", "json")
	expectCode(t, second, 0, "the second maintainer (busy)")
	outs := jsonLines[map[string]any](t, second.stdout)
	if len(outs) != len(maintenance.TaskNames()) {
		t.Fatalf("second maintainer printed %d outcomes; want one per task:\n%s", len(outs), second)
	}
	for _, o := range outs {
		if o["status"] != "busy" {
			t.Errorf("second maintainer, task %v: status %v; want busy\n%s", o["task"], o["status"], second)
		}
	}
	if st := first.wait(t); st.ExitCode() != 0 {
		t.Fatalf("first maintainer: %v\nstdout:\n%s\nstderr:\n%s", st, first.stdout.String(), first.stderrText())
	}
	byTask := map[string]string{}
	for _, o := range jsonLines[map[string]any](t, first.stdout.String()) {
		byTask[o["task"].(string)] = o["status"].(string)
	}
	if byTask["compact"] != "succeeded" {
		t.Errorf("first maintainer outcomes %v; want compact succeeded", byTask)
	}
	after := w.state(t, name)
	if !after.compacted() || after.rows != before.rows || after.sum != before.sum {
		t.Errorf("table after: %+v; before: %+v", after, before)
	}

	// The trigger state lives in Redis: a third process (a later CronJob
	// run, another replica) knows that every task just ran.
	third := runMaintainer(t, w.dir, "run", "--config", cfg, "--output", "json")
	expectCode(t, third, 0, "a later run")
	for _, o := range jsonLines[map[string]any](t, third.stdout) {
		if r := fmt.Sprint(o["reason"]); o["status"] != "not_due" || !strings.Contains(r, "rate limited") && !strings.Contains(r, "interval") {
			t.Errorf("later run, task %v: %v %q; want not_due by its trigger", o["task"], o["status"], o["reason"])
		}
	}
}

// A lease that is lost while compaction runs (here its key vanishes from
// Redis, as after a failover) stops the compaction before it commits: the
// table is unchanged and the run fails saying why.
func TestLostLeaseStopsCompaction(t *testing.T) {
	t.Parallel()
	addr := redistest.Need(t)
	const name = "events"
	w := newGenWarehouse(t, name)
	// A 3s lease is extended every second; one group at a time leaves
	// seconds between the first group and the commit.
	cfg, prefix := w.redisConfig(t, addr, "")
	text, _ := os.ReadFile(cfg)
	text = bytes.Replace(text, []byte("  ttl: 60s\n"), []byte("  ttl: 3s\n"), 1)
	text = bytes.Replace(text, []byte("  compact:\n    enabled: true\n"), []byte("  compact:\n    enabled: true\n    max_concurrent_groups: 1\n"), 1)
	if err := os.WriteFile(cfg, text, 0o644); err != nil {
		t.Fatal(err)
	}
	before := w.state(t, name)

	run := startWatched(t, t.Context(), w.dir, "run", "--config", cfg, "--force", "--task", "compact", "--output", "json")
	run.atFirstGroup(t)
	key := lock.Key(prefix, genCatalog, genNamespace+"."+name)
	if n, err := redistest.Client(t, addr).Del(t.Context(), key).Result(); err != nil || n != 1 {
		t.Fatalf("delete lock key %q: %d, %v", key, n, err)
	}
	st := run.wait(t)
	if st.ExitCode() != 1 {
		t.Fatalf("run after losing its lease: %v; want exit 1\nstdout:\n%s\nstderr:\n%s", st, run.stdout.String(), run.stderrText())
	}
	outs := jsonLines[map[string]any](t, run.stdout.String())
	if len(outs) != 1 || outs[0]["status"] != "failed" || !strings.Contains(fmt.Sprint(outs[0]["error"]), "lease lost") {
		t.Errorf("outcome: %v; want compact failed with \"lease lost\"", outs)
	}
	after := w.state(t, name)
	if after.snapshotID != before.snapshotID || after.rows != before.rows || after.sum != before.sum {
		t.Errorf("the table changed after the lease was lost: before %+v, after %+v", before, after)
	}
}

// Redis down: run starts no maintenance, says why, exits 3; plan (which
// takes no lock) still shows the work.
func TestRedisDownExit3(t *testing.T) {
	t.Parallel()
	const name = "events"
	w := newGenWarehouse(t, name)
	down := redistest.ClosedAddr(t)
	cfg, _ := w.redisConfig(t, down, "")
	before := treeHash(t, w.dir)

	r := runMaintainer(t, w.dir, "run", "--config", cfg, "--force")
	expectCode(t, r, 3, "run with Redis down")
	if !strings.Contains(r.stderr, "lock backend redis") || !strings.Contains(r.stderr, down) {
		t.Errorf("stderr does not name the lock backend and its address:\n%s", r.stderr)
	}
	if d := diffTrees(before, treeHash(t, w.dir)); d != "" {
		t.Errorf("run with Redis down touched files (not even the catalog should be opened):\n%s", d)
	}
	r = runMaintainer(t, w.dir, "plan", "--config", cfg, "--task", "compact", "--output", "json")
	expectCode(t, r, 0, "plan with Redis down")
	outs := jsonLines[map[string]any](t, r.stdout)
	if len(outs) != 1 || outs[0]["status"] != "planned" || !strings.Contains(fmt.Sprint(outs[0]["trigger"]), "trigger state unavailable") {
		t.Errorf("plan with Redis down: %v", outs)
	}
}

// serve end to end: a writer's appends reach commit_count and compaction
// runs on its own; an Alertmanager notification makes expiry run; the API
// wants its token; /metrics shows the runs; SIGTERM exits 0.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	addr := redistest.Need(t)
	const name = "events"
	w := newGenWarehouse(t, name)
	token := writeFile(t, filepath.Join(w.dir, "token"), serveToken+"\n")
	cfg, _ := w.redisConfig(t, addr, `server:
  listen: 127.0.0.1:0
  token_file: `+token+`
scheduler:
  poll_interval: 1s
metrics:
  health_interval: 1s
tables:
  - match: "demo.*"
    compact:
      trigger: {commit_count: 210, interval: 0s, rate_limit: 0s}
    expire:
      retain_last: 1
      max_snapshot_age: 1s
      trigger: {commit_count: 100000, interval: 0s}
    orphans:
      enabled: false
`)
	srv := startServe(t, w, cfg)
	api, getStatus, waitFor := srv.api, srv.status, srv.waitFor
	ctx := t.Context()
	if getStatus().Tables != 1 {
		t.Fatalf("serve sees %d tables; want 1", getStatus().Tables)
	}

	// 200 commits, commit_count 210: not due yet.
	if code, _ := api("GET", "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := api("GET", "/readyz", "", ""); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	if s := w.state(t, name); s.compacted() {
		t.Fatal("compacted before the trigger was reached")
	}

	// A writer appends 10 more: commit_count reached.
	cat, err := gen.OpenSQLiteCatalog(ctx, genCatalog, filepath.Join(w.dir, "catalog.db"), filepath.Join(w.dir, "warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	opt := gen.Options{Namespace: genNamespace, Table: name, Appends: genAppends, RowsPerAppend: genRows, Partitions: genPartitions, Seed: 42}
	tbl, err := cat.LoadTable(ctx, table.Identifier{genNamespace, name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Append(ctx, tbl, opt, 10, gen.NextAppendIndex(tbl)); err != nil {
		t.Fatal(err)
	}
	cat.Close()
	want := w.state(t, name)
	waitFor("compaction after the 210th commit", func() bool { return w.state(t, name).compacted() })
	if s := w.state(t, name); s.rows != want.rows || s.sum != want.sum {
		t.Errorf("rows after compaction by serve: %d/%x; want %d/%x", s.rows, s.sum, want.rows, want.sum)
	}

	// The API wants the token.
	alert := `{"version":"4","groupKey":"{}:{alertname=\"IcebergSnapshotsPilingUp\"}","truncatedAlerts":0,"status":"firing",
"receiver":"iceberg-maintainer","groupLabels":{"alertname":"IcebergSnapshotsPilingUp"},
"commonLabels":{"alertname":"IcebergSnapshotsPilingUp","namespace":"demo","table":"events","task":"expire","severity":"warning"},
"commonAnnotations":{"summary":"demo.events has 211 snapshots"},"externalURL":"http://alertmanager:9093",
"alerts":[{"status":"firing","labels":{"alertname":"IcebergSnapshotsPilingUp","namespace":"demo","table":"events","task":"expire","severity":"warning"},
"annotations":{"summary":"demo.events has 211 snapshots"},"startsAt":"2026-11-30T10:00:00Z","endsAt":"0001-01-01T00:00:00Z",
"generatorURL":"http://prometheus:9090/graph","fingerprint":"a1b2c3d4e5f60718"}]}`
	if code, _ := api("POST", "/v1/alertmanager", "", alert); code != http.StatusUnauthorized {
		t.Errorf("alert without the token: %d; want 401", code)
	}
	if code, _ := api("POST", "/v1/trigger", "wrong", `{"table":"demo.events"}`); code != http.StatusUnauthorized {
		t.Errorf("trigger with a wrong token: %d; want 401", code)
	}
	if code, body := api("POST", "/v1/trigger", "e2e-token", `{"table":"demo.nope"}`); code != http.StatusBadRequest || !strings.Contains(body, "demo.nope") {
		t.Errorf("trigger of an unknown table: %d %s; want 400 naming it", code, body)
	}
	snapsBefore := w.state(t, name).snapshots
	code, body := api("POST", "/v1/alertmanager", "e2e-token", alert)
	if code != http.StatusAccepted || !strings.Contains(body, `"demo.events"`) || !strings.Contains(body, `"expire"`) {
		t.Fatalf("alert: %d %s; want 202 queueing expire of demo.events", code, body)
	}
	waitFor("expiry requested by the alert", func() bool {
		for _, r := range getStatus().Recent {
			if r.Task == "expire" && r.Status != "not_due" {
				return true
			}
		}
		return false
	})
	var ran bool
	for _, r := range getStatus().Recent {
		if r.Task == "expire" && r.Status == "succeeded" && strings.Contains(r.Trigger, "IcebergSnapshotsPilingUp") {
			ran = true
		}
	}
	if s := w.state(t, name); !ran || s.snapshots >= snapsBefore || s.rows != want.rows || s.sum != want.sum {
		t.Errorf("after the alert: ran=%v, snapshots %d (before %d), rows %d/%x; status %+v", ran, s.snapshots, snapsBefore, s.rows, s.sum, getStatus())
	}

	// The metrics show it all.
	code, metricsText := api("GET", "/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`iceberg_maintainer_runs_total{result="success",table="demo.events",task="compact"} 1`,
		`iceberg_maintainer_runs_total{result="success",table="demo.events",task="expire"} 1`,
		`iceberg_maintainer_trigger_requests_total{result="queued",source="alertmanager"} 1`,
		`iceberg_maintainer_trigger_requests_total{result="unauthorized",source="alertmanager"} 1`,
		`iceberg_maintainer_lock_acquisitions_total{result="acquired"}`,
		`iceberg_maintainer_table_data_files{table="demo.events"} 10`,
		`iceberg_maintainer_managed_tables 1`,
	} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepLines(metricsText, "iceberg_maintainer_"))
	}

	srv.stop()
}

// serveProc is `maintainer serve` running in the background, with its API.
type serveProc struct {
	t    *testing.T
	proc *watchedRun
	base string
}

type serveStatus struct {
	Tables   int       `json:"tables"`
	LastPoll time.Time `json:"last_poll"`
	Recent   []struct {
		Table, Task, Status, Trigger, Error string
	} `json:"recent"`
}

// serveToken is the bearer token of the test configs' server.token_file.
const serveToken = "e2e-token"

// startServe starts serve on cfg and waits until it listens and has polled.
func startServe(t *testing.T, w *genWarehouse, cfg string) *serveProc {
	t.Helper()
	// A bound on a hung serve, not on the test: the fleet tests' replicas
	// live about 4 minutes on a loaded 2-core machine.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	t.Cleanup(cancel)
	p := &serveProc{t: t, proc: startWatched(t, ctx, w.dir, "serve", "--config", cfg, "--log-level", "debug")}
	p.base = "http://" + p.proc.waitLine(t, regexp.MustCompile(`msg=listening addr=(\S+)`))[1]
	p.waitFor("the first poll", func() bool { return !p.status().LastPoll.IsZero() })
	return p
}

func (p *serveProc) api(method, path, tok, body string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequestWithContext(p.t.Context(), method, p.base+path, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (p *serveProc) status() serveStatus {
	p.t.Helper()
	code, body := p.api("GET", "/v1/status", serveToken, "")
	if code != http.StatusOK {
		p.t.Fatalf("GET /v1/status: %d %s", code, body)
	}
	var s serveStatus
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		p.t.Fatalf("status JSON: %v\n%s", err, body)
	}
	return s
}

// waitFor polls ok until it holds; it fails the test after two minutes.
func (p *serveProc) waitFor(what string, ok func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			p.t.Fatalf("gave up waiting for %s; status %+v\nstderr:\n%s", what, p.status(), p.proc.stderrText())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop sends SIGTERM and expects a clean exit with every lease released.
func (p *serveProc) stop() {
	p.t.Helper()
	if err := p.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	if st := p.proc.wait(p.t); st.ExitCode() != 0 {
		p.t.Errorf("serve after SIGTERM: %v\nstderr:\n%s", st, p.proc.stderrText())
	}
	if !strings.Contains(p.proc.stderrText(), "every lease released") {
		p.t.Errorf("serve did not say it released its leases:\n%s", p.proc.stderrText())
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// alertRuleLabels reads the labels of one alert of deploy/prometheus/rules.yaml.
func alertRuleLabels(t *testing.T, alert string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert  string            `yaml:"alert"`
				Labels map[string]string `yaml:"labels"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("rules.yaml: %v", err)
	}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Alert == alert {
				return r.Labels
			}
		}
	}
	t.Fatalf("rules.yaml has no alert %s", alert)
	return nil
}

// The notification Alertmanager sends when the shipped small-files alert
// fires on a table, posted to a running serve, compacts that table: the
// alert's labels are the rule's plus the series' (the table gauge and what
// a Kubernetes scrape adds).
func TestSmallFilesAlertCompacts(t *testing.T) {
	t.Parallel()
	const name = "events"
	w := newGenWarehouse(t, name)
	token := writeFile(t, filepath.Join(w.dir, "token"), serveToken+"\n")
	base, err := os.ReadFile(w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is due by its trigger: only the alert can start compaction.
	cfg := writeFile(t, filepath.Join(w.dir, "alert.yaml"), string(base)+`server:
  listen: 127.0.0.1:0
  token_file: `+token+`
tables:
  - match: "demo.*"
    compact:
      trigger: {commit_count: 100000, interval: 0s, rate_limit: 1h}
    expire: {enabled: false}
    orphans: {enabled: false}
`)
	before := w.state(t, name)
	srv := startServe(t, w, cfg)
	if s := w.state(t, name); s.compacted() {
		t.Fatal("compacted without the alert")
	}

	labels := map[string]string{
		"alertname": "IcebergTableSmallFiles", "table": genNamespace + "." + name,
		"namespace": "data-platform", "job": "iceberg-maintainer", "pod": "iceberg-maintainer-7d9f-x2x", "instance": "10.1.2.3:8080",
	}
	for k, v := range alertRuleLabels(t, "IcebergTableSmallFiles") {
		labels[k] = v
	}
	if labels["task"] != "compact" {
		t.Fatalf("IcebergTableSmallFiles labels %v: want task=compact", labels)
	}
	alert := map[string]any{
		"status": "firing", "labels": labels,
		"annotations": map[string]string{"summary": "demo.events has 200 small files"},
		"startsAt":    "2026-11-30T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
		"generatorURL": "http://prometheus:9090/graph?g0.expr=...", "fingerprint": "5c1e2b7a9d3f4e60",
	}
	payload, _ := json.Marshal(map[string]any{
		"version": "4", "groupKey": `{}/{maintainer_trigger="true"}:{alertname="IcebergTableSmallFiles", table="demo.events"}`,
		"truncatedAlerts": 0, "status": "firing", "receiver": "iceberg-maintainer",
		"groupLabels":       map[string]string{"alertname": "IcebergTableSmallFiles", "table": "demo.events"},
		"commonLabels":      labels,
		"commonAnnotations": map[string]string{"summary": "demo.events has 200 small files"},
		"externalURL":       "http://alertmanager:9093",
		"alerts":            []any{alert},
	})
	code, body := srv.api("POST", "/v1/alertmanager", serveToken, string(payload))
	if code != http.StatusAccepted || !strings.Contains(body, `"compact"`) {
		t.Fatalf("alert: %d %s; want 202 queueing compaction", code, body)
	}
	srv.waitFor("compaction requested by the alert", func() bool { return w.state(t, name).compacted() })
	after := w.state(t, name)
	if after.rows != before.rows || after.sum != before.sum {
		t.Errorf("rows %d/%x after compaction; want %d/%x", after.rows, after.sum, before.rows, before.sum)
	}
	if h := tableHealth(t, w, name); h.DataFiles != genPartitions {
		t.Errorf("data files after compaction: %d; want %d (one per partition)", h.DataFiles, genPartitions)
	}
	srv.stop()
}

// A Redis that only speaks TLS, with an ACL-less default user: the config's
// tls block reaches it (run proceeds), and without it run exits 3.
func TestRedisTLSConfig(t *testing.T) {
	t.Parallel()
	srv, caPEM := redistest.StartTLS(t)
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	if err := os.MkdirAll(wh, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ca.pem"), string(caPEM))
	base := "catalog:\n  type: hadoop\n  warehouse: " + wh + "\nlock:\n  backend: redis\n  redis:\n    addrs: [\"" + srv.Addr + "\"]\n"
	withTLS := writeFile(t, filepath.Join(dir, "tls.yaml"), base+"    tls: {enabled: true, ca_file: ca.pem}\n")
	plain := writeFile(t, filepath.Join(dir, "plain.yaml"), base)

	r := runMaintainer(t, dir, "run", "--config", withTLS)
	expectCode(t, r, 0, "run with the Redis TLS settings")
	r = runMaintainer(t, dir, "run", "--config", plain)
	expectCode(t, r, 3, "run without TLS against a TLS-only Redis")
	if !strings.Contains(r.stderr, "lock backend redis") {
		t.Errorf("stderr does not name the lock backend:\n%s", r.stderr)
	}
}

// run --parallel maintains several tables at once, each under its lease,
// and prints their outcomes in table order.
func TestRunParallelTables(t *testing.T) {
	t.Parallel()
	w := newGenWarehouse(t, "clicks", "views")
	before := map[string]tableState{"clicks": w.state(t, "clicks"), "views": w.state(t, "views")}
	r := runMaintainer(t, w.dir, "run", "--config", w.cfg, "--force", "--task", "compact", "--parallel", "2", "--output", "json")
	expectCode(t, r, 0, "run --parallel 2")
	outs := jsonLines[map[string]any](t, r.stdout)
	if len(outs) != 2 || outs[0]["table"] != "demo.clicks" || outs[1]["table"] != "demo.views" {
		t.Fatalf("outcomes %v; want demo.clicks then demo.views", outs)
	}
	for _, o := range outs {
		if o["status"] != "succeeded" {
			t.Errorf("%v: %v %v", o["table"], o["status"], o["error"])
		}
	}
	for name, b := range before {
		if a := w.state(t, name); !a.compacted() || a.rows != b.rows || a.sum != b.sum {
			t.Errorf("%s after: %+v; before %+v", name, a, b)
		}
	}
	// Both tables were being rewritten at once: each had a group rewritten
	// before the first commit (one table after the other could not).
	rewrote := map[string]bool{}
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, `msg="compaction committed"`) {
			break
		}
		if strings.Contains(line, `msg="group rewritten"`) {
			for _, tbl := range []string{"demo.clicks", "demo.views"} {
				if strings.Contains(line, "table="+tbl) {
					rewrote[tbl] = true
				}
			}
		}
	}
	if len(rewrote) != 2 {
		t.Errorf("before the first commit only %v had groups rewritten; want both tables at once\n%s", rewrote, r.stderr)
	}
	r = runMaintainer(t, w.dir, "run", "--config", w.cfg, "--parallel", "0")
	expectCode(t, r, 2, "run --parallel 0")
}

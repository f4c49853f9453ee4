package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/redistest"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

func TestServiceDefaults(t *testing.T) {
	c := mustParse(t, minimal, nil)
	if c.Server.Listen != ":8080" || c.Server.TokenFile != "" ||
		c.Server.Alertmanager != (AlertmanagerConfig{TableLabel: "table", NamespaceLabel: "namespace", TaskLabel: "task"}) {
		t.Errorf("server defaults: %+v", c.Server)
	}
	if c.Scheduler != (SchedulerConfig{PollInterval: 30 * time.Second, MaxConcurrentTables: 2, ShutdownGrace: time.Minute}) {
		t.Errorf("scheduler defaults: %+v", c.Scheduler)
	}
	if !c.Metrics.TableLabelOn() || c.Metrics.MaxTables != 200 || c.Metrics.HealthInterval != 5*time.Minute {
		t.Errorf("metrics defaults: %+v", c.Metrics)
	}
	r, err := c.ForTable("db.t", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]trigger.Config{
		"compact":   {CommitCount: 10, Interval: 24 * time.Hour, RateLimit: 10 * time.Minute},
		"deletes":   {PositionDeleteFileCount: 20, Interval: 24 * time.Hour, RateLimit: 10 * time.Minute},
		"manifests": {CommitCount: 20, Interval: 24 * time.Hour, RateLimit: 10 * time.Minute},
		"expire":    {CommitCount: 50, Interval: 6 * time.Hour, RateLimit: 10 * time.Minute},
		"orphans":   {Interval: 24 * time.Hour, RateLimit: time.Hour},
	}
	if !reflect.DeepEqual(r.Triggers, want) {
		t.Errorf("default triggers = %+v; want %+v", r.Triggers, want)
	}
}

func TestServiceKeys(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "token", "s3cret\n")
	src := minimal + `server:
  listen: 127.0.0.1:9090
  token_file: token
  alertmanager: {table_label: iceberg_table, namespace_label: db, task_label: maintenance_task}
scheduler:
  poll_interval: 2m
  max_concurrent_tables: 4
  state_file: state/triggers.json
  shutdown_grace: 5m
  lock_wait: 10s
  replica_id: maintainer-0
metrics:
  table_label: false
  max_tables: 50
  health_interval: 1m
`
	c, err := Parse(filepath.Join(dir, "maintainer.yaml"), []byte(src), mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:9090" || c.Server.TokenFile != filepath.Join(dir, "token") ||
		c.Server.Alertmanager.TableLabel != "iceberg_table" || c.Server.Alertmanager.NamespaceLabel != "db" ||
		c.Server.Alertmanager.TaskLabel != "maintenance_task" {
		t.Errorf("server: %+v", c.Server)
	}
	want := SchedulerConfig{PollInterval: 2 * time.Minute, MaxConcurrentTables: 4,
		StateFile: filepath.Join(dir, "state/triggers.json"), ShutdownGrace: 5 * time.Minute, LockWait: 10 * time.Second, ReplicaID: "maintainer-0"}
	if c.Scheduler != want {
		t.Errorf("scheduler = %+v; want %+v", c.Scheduler, want)
	}
	if c.Metrics.TableLabelOn() || c.Metrics.MaxTables != 50 || c.Metrics.HealthInterval != time.Minute {
		t.Errorf("metrics: %+v", c.Metrics)
	}
}

func TestServiceProblems(t *testing.T) {
	got := problemsOf(t, minimal+`server:
  listen: "8080"
  token_file: /nonexistent/token
  alertmanager: {table_label: "1table"}
scheduler:
  poll_interval: 100ms
  max_concurrent_tables: 0
  shutdown_grace: -1s
  state_file: ""
  replica_id: " "
metrics:
  max_tables: 0
  health_interval: 10ms
  tabel_label: true
`, nil)
	want := []string{
		`maintainer.yaml:6:3: server.listen: must be [host]:port, e.g. :8080 or 127.0.0.1:8080 (got "8080")`,
		`maintainer.yaml:7:3: server.token_file: cannot read "/nonexistent/token": no such file or directory`,
		`maintainer.yaml:8:18: server.alertmanager.table_label: must be a Prometheus label name (got "1table")`,
		`maintainer.yaml:10:3: scheduler.poll_interval: must be at least 1s (got 100ms)`,
		`maintainer.yaml:11:3: scheduler.max_concurrent_tables: must be at least 1 (got 0)`,
		`maintainer.yaml:12:3: scheduler.shutdown_grace: must not be negative (got -1s)`,
		`maintainer.yaml:13:3: scheduler.state_file: must not be empty (leave it out to keep state in memory)`,
		`maintainer.yaml:14:3: scheduler.replica_id: must not be empty (leave it out for the host name plus a random suffix)`,
		`maintainer.yaml:16:3: metrics.max_tables: must be at least 1 (got 0); set table_label: false to drop the label`,
		`maintainer.yaml:17:3: metrics.health_interval: must be at least 1s (got 10ms)`,
		`maintainer.yaml:18:3: metrics.tabel_label: unknown key (did you mean "table_label"?)`,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", join(got), join(want))
	}
}

func TestServiceCrossFieldProblems(t *testing.T) {
	got := problemsOf(t, minimal+`lock:
  backend: redis
  redis: {addrs: ["redis:6379"]}
server:
  alertmanager: {table_label: name, namespace_label: name, task_label: ""}
scheduler:
  state_file: /var/lib/state.json
`, nil)
	want := []string{
		`maintainer.yaml:9:37: server.alertmanager.namespace_label: must differ from table_label (both "name")`,
		`maintainer.yaml:11:3: scheduler.state_file: not used with lock.backend redis: trigger state lives in Redis, shared by every replica; remove it`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", join(got), join(want))
	}
	// An empty namespace or task label turns it off.
	c := mustParse(t, minimal+"server:\n  alertmanager: {namespace_label: \"\", task_label: \"\"}\n", nil)
	if c.Server.Alertmanager.NamespaceLabel != "" || c.Server.Alertmanager.TaskLabel != "" || c.Server.Alertmanager.TableLabel != "table" {
		t.Errorf("alertmanager labels: %+v", c.Server.Alertmanager)
	}
}

func TestTriggerSettings(t *testing.T) {
	src := minimal + `defaults:
  compact:
    trigger: {commit_count: 20, data_file_bytes: 1GiB}
  orphans:
    trigger: {interval: 7d}
tables:
  - match: "db.hot_*"
    compact:
      trigger: {commit_count: 5, rate_limit: 30m}
  - match: "db.cold"
    expire:
      trigger: {commit_count: 0, interval: 1d}
`
	c := mustParse(t, src, nil)
	hot, err := c.ForTable("db.hot_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Fields merge one by one: the override's commit_count and rate_limit,
	// the defaults' data_file_bytes, the built-in interval.
	if want := (trigger.Config{CommitCount: 5, DataFileBytes: 1 << 30, Interval: 24 * time.Hour, RateLimit: 30 * time.Minute}); hot.Triggers["compact"] != want {
		t.Errorf("db.hot_1 compact trigger = %+v; want %+v", hot.Triggers["compact"], want)
	}
	if want := (trigger.Config{Interval: 7 * 24 * time.Hour, RateLimit: time.Hour}); hot.Triggers["orphans"] != want {
		t.Errorf("orphans trigger = %+v; want %+v", hot.Triggers["orphans"], want)
	}
	cold, _ := c.ForTable("db.cold", nil)
	if want := (trigger.Config{Interval: 24 * time.Hour, RateLimit: 10 * time.Minute}); cold.Triggers["expire"] != want {
		t.Errorf("db.cold expire trigger = %+v; want %+v", cold.Triggers["expire"], want)
	}
	// The trigger block does not leak into the task's own settings.
	if !reflect.DeepEqual(hot.Compact, compact.DefaultConfig()) || !reflect.DeepEqual(cold.Expire, expire.DefaultConfig()) {
		t.Errorf("task settings changed: %+v %+v", hot.Compact, cold.Expire)
	}

	got := problemsOf(t, minimal+`defaults:
  compact:
    trigger: {commit_count: -1}
tables:
  - match: db.x
    orphans:
      trigger:
        rate_limit: -5m
        comit_count: 3
`, nil)
	want := []string{
		`maintainer.yaml:7:15: defaults.compact.trigger.commit_count: must not be negative (got -1)`,
		`maintainer.yaml:12:9: tables[0].orphans.trigger.rate_limit: must not be negative (got -5m0s)`,
		`maintainer.yaml:13:9: tables[0].orphans.trigger.comit_count: unknown key (did you mean "commit_count"?)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", join(got), join(want))
	}
}

func join(s []string) string {
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}

func TestRedisTLSAndUser(t *testing.T) {
	dir := t.TempDir()
	caPEM, _, _, err := redistest.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "ca.pem", string(caPEM))
	writeFile(t, dir, "not-a-cert.pem", "hello\n")
	writeFile(t, dir, "redis-password", "s3cret\n")
	c, err := Parse(filepath.Join(dir, "maintainer.yaml"), []byte(minimal+`lock:
  backend: redis
  redis:
    addrs: ["redis:6380"]
    username: maintainer
    password_file: redis-password
    tls: {enabled: true, ca_file: ca.pem, server_name: redis.internal}
`), mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Lock.Redis
	if r.Username != "maintainer" || r.Password != "s3cret" || !r.TLS.Enabled || r.TLS.ServerName != "redis.internal" || r.TLS.RootCAs == nil {
		t.Errorf("redis: %+v", r)
	}
	dirPath := filepath.Join(dir, "maintainer.yaml")
	_, err = Parse(dirPath, []byte(minimal+`lock:
  backend: redis
  redis:
    addrs: ["redis:6380"]
    username: maintainer
    tls: {ca_file: not-a-cert.pem, insecure_skip_verify: true}
`), mapEnv(nil))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want problems, got %v", err)
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, p.Path+": "+p.Msg)
	}
	want := []string{
		"lock.redis.tls.enabled: must be true when other tls settings are given",
		`lock.redis.tls.ca_file: "not-a-cert.pem" holds no PEM certificate`,
		"lock.redis.username: needs lock.redis.password_file: Redis ACL users authenticate with a password",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", join(got), join(want))
	}
}

// The Redis lock's own rules (a node listed twice would fake a quorum; port
// range) are reported by config validate, at their line, not when serve
// starts.
func TestRedisAddrsRules(t *testing.T) {
	got := problemsOf(t, minimal+`lock:
  backend: redis
  redis:
    addrs: ["redis-0:6379", "REDIS-0:6379", "redis-1:0"]
`, nil)
	want := []string{
		`maintainer.yaml:8:29: lock.redis.addrs[1]: listed twice; each node must be independent (got "REDIS-0:6379")`,
		`maintainer.yaml:8:45: lock.redis.addrs[2]: port must be 1-65535 (got "redis-1:0")`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", join(got), join(want))
	}
}

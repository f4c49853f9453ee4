package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/catalogcall"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// minimal is the smallest valid config; tests append to it.
const minimal = `catalog:
  type: sql
  uri: file:/tmp/catalog.db
  properties: {sql.driver: sqliteshim, sql.dialect: sqlite}
`

func mustParse(t *testing.T, src string, env map[string]string) *Config {
	t.Helper()
	c, err := Parse("maintainer.yaml", []byte(src), mapEnv(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// problemsOf parses src and returns its problems, one string each.
func problemsOf(t *testing.T, src string, env map[string]string) []string {
	t.Helper()
	_, err := Parse("maintainer.yaml", []byte(src), mapEnv(env))
	if err == nil {
		t.Fatalf("Parse succeeded; want problems")
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error is %T, not *ValidationError: %v", err, err)
	}
	out := make([]string, len(ve.Problems))
	for i, p := range ve.Problems {
		out[i] = p.String()
	}
	if got := strings.Join(out, "\n"); got != err.Error() {
		t.Errorf("Error() = %q; want the problems one per line: %q", err.Error(), got)
	}
	return out
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFullConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "secrets/credential", "  client:s3cret \n")
	redisPW := writeFile(t, dir, "redis-password", "hunter2\n")
	tokenPath := writeFile(t, t.TempDir(), "token", "tok-123")
	path := writeFile(t, dir, "maintainer.yaml", `# every key
catalog:
  name: prod
  type: rest
  uri: ${CATALOG_URI}
  warehouse: s3://bucket/warehouse
  properties:
    s3.endpoint: http://minio:9000
    s3.region: "${REGION:-eu-west-1}"
    rest.sigv4-enabled: "true"
  credential_file: secrets/credential
  token_file: ${TOKEN_FILE}
lock:
  backend: redis
  redis:
    addrs: [redis-0:6379, "redis-1:6379"]
    password_file: `+redisPW+`
    db: 2
    key_prefix: maint
  ttl: 90s
defaults:
  compact:
    enabled: true
    target_file_size: 256MiB
    min_file_size: 100MB
    max_file_size: 1.5GiB
    min_input_files: 4
    delete_file_threshold: 3
    delete_ratio_threshold: 0.25
    where: "day >= '2024-01-01'"
    skip_partitions_written_within: 1d12h
    max_bytes_per_run: 100GiB
    max_concurrent_groups: 8
    partial_progress: true
    max_commits: 20
    commit_retries: 6
    remove_dead_deletes: false
    trigger:
      commit_count: 12
      data_file_count: 100
      data_file_bytes: 1GiB
      delete_file_count: 8
      interval: 12h
      rate_limit: 15m
tables:
  - match: "db.events_*"
    compact:
      min_input_files: 10
  - match: lake.**
  - match: db.events_raw
    compact: {enabled: false, target_file_size: 134217728}
`)
	t.Setenv("CATALOG_URI", "https://catalog.example.com/api")
	t.Setenv("TOKEN_FILE", tokenPath)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Path: path,
		Catalog: CatalogConfig{
			Name: "prod", Type: "rest", URI: "https://catalog.example.com/api", Warehouse: "s3://bucket/warehouse",
			Props: map[string]string{
				"s3.endpoint": "http://minio:9000", "s3.region": "eu-west-1", "rest.sigv4-enabled": "true",
			},
			CredentialFile: "secrets/credential", TokenFile: tokenPath,
			Credential: "client:s3cret", Token: "tok-123",
			Requests: catalogcall.DefaultConfig(),
		},
		Lock: LockConfig{
			Backend: "redis",
			Redis: RedisConfig{
				Addrs: []string{"redis-0:6379", "redis-1:6379"}, PasswordFile: redisPW, Password: "hunter2",
				DB: 2, KeyPrefix: "maint",
			},
			TTL: 90 * time.Second,
		},
		Server: ServerConfig{Listen: ":8080",
			Alertmanager: AlertmanagerConfig{TableLabel: "table", NamespaceLabel: "namespace", TaskLabel: "task"}},
		Scheduler:   SchedulerConfig{PollInterval: 30 * time.Second, MaxConcurrentTables: 2, ShutdownGrace: time.Minute},
		Metrics:     MetricsConfig{MaxTables: 200, HealthInterval: 5 * time.Minute},
		ObjectStore: objstore.Config{RequestTimeout: time.Minute, MaxAttempts: 4},
		// A block holds the values of the keys it writes; ForTable below
		// shows that only those keys override.
		Defaults: TaskSet{"compact": &Block[compact.Config]{
			Config: compact.Config{
				Enabled:                     true,
				TargetFileSize:              256 << 20,
				MinFileSize:                 100_000_000,
				MaxFileSize:                 1536 << 20,
				MinInputFiles:               4,
				DeleteFileThreshold:         3,
				DeleteRatioThreshold:        0.25,
				Where:                       "day >= '2024-01-01'",
				SkipPartitionsWrittenWithin: 36 * time.Hour,
				MaxBytesPerRun:              100 << 30,
				MaxConcurrentGroups:         8,
				PartialProgress:             true,
				MaxCommits:                  20,
				CommitRetries:               6,
				RemoveDeadDeletes:           false,
			},
			Trigger: &trigger.Config{
				CommitCount: 12, DataFileCount: 100, DataFileBytes: 1 << 30,
				DeleteFileCount: 8, Interval: 12 * time.Hour, RateLimit: 15 * time.Minute,
			},
		}},
		Tables: []TableOverride{
			{Match: "db.events_*", TaskSet: TaskSet{"compact": &Block[compact.Config]{Config: compact.Config{MinInputFiles: 10}}}},
			{Match: "lake.**"},
			{Match: "db.events_raw", TaskSet: TaskSet{"compact": &Block[compact.Config]{Config: compact.Config{Enabled: false, TargetFileSize: 128 << 20}}}},
		},
	}
	got := *c
	got.pos, got.specs = nil, nil
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, *want)
		t.Errorf("defaults.compact: got %+v", got.Defaults["compact"])
	}
	if !c.isSet("tables[2].compact.enabled") || c.isSet("tables[0].compact.enabled") {
		t.Errorf("set keys: tables[2].compact.enabled %v, tables[0].compact.enabled %v; want true, false",
			c.isSet("tables[2].compact.enabled"), c.isSet("tables[0].compact.enabled"))
	}

	wantProps := map[string]string{
		"type": "rest", "uri": "https://catalog.example.com/api", "warehouse": "s3://bucket/warehouse",
		"credential": "client:s3cret", "token": "tok-123",
		"s3.endpoint": "http://minio:9000", "s3.region": "eu-west-1", "rest.sigv4-enabled": "true",
	}
	if p := c.Catalog.Properties(); !reflect.DeepEqual(p, wantProps) {
		t.Errorf("Properties() = %v; want %v", p, wantProps)
	}

	all := compact.Config{
		Enabled: true, TargetFileSize: 256 << 20, MinFileSize: 100_000_000, MaxFileSize: 1536 << 20,
		MinInputFiles: 4, DeleteFileThreshold: 3, DeleteRatioThreshold: 0.25, Where: "day >= '2024-01-01'",
		SkipPartitionsWrittenWithin: 36 * time.Hour, MaxBytesPerRun: 100 << 30, MaxConcurrentGroups: 8,
		PartialProgress: true, MaxCommits: 20, CommitRetries: 6, RemoveDeadDeletes: false,
		CommitLeaseWait: 5 * time.Minute, AssistMinPartitions: 8,
	}
	events, raw := all, all
	events.MinInputFiles = 10
	raw.MinInputFiles = 10
	raw.Enabled = false
	raw.TargetFileSize = 128 << 20
	for ident, want := range map[string]compact.Config{
		"db.events_2024": events, "db.events_raw": raw, "lake.a.b": all, "db.other": all,
	} {
		r, err := c.ForTable(ident, nil)
		if err != nil || !reflect.DeepEqual(r.Compact, want) || len(r.Warnings) > 0 {
			t.Errorf("ForTable(%q) = %+v, %v;\nwant %+v", ident, r, err, want)
		}
	}
	for ident, want := range map[string]bool{"db.events_1": true, "lake.x.y": true, "db.events_raw": true, "db.other": false, "lake": true} {
		if got := c.Managed(ident); got != want {
			t.Errorf("Managed(%q) = %v; want %v", ident, got, want)
		}
	}

	// Secrets do not leak through fmt.
	if s := fmt.Sprintf("%v %+v", c.Catalog, c.Lock); strings.Contains(s, "s3cret") || strings.Contains(s, "hunter2") || strings.Contains(s, "tok-123") {
		t.Errorf("secret printed: %s", s)
	}
}

func TestDefaultsApplied(t *testing.T) {
	c := mustParse(t, minimal, nil)
	if c.Catalog.Name != "default" || c.Lock.Backend != "local" || c.Lock.TTL != 60*time.Second || c.Lock.Redis.KeyPrefix != "iceberg-maintainer" {
		t.Errorf("defaults not applied: %+v %+v", c.Catalog, c.Lock)
	}
	r, err := c.ForTable("any.table", nil)
	if err != nil || !reflect.DeepEqual(r.Compact, compact.DefaultConfig()) {
		t.Errorf("ForTable = %+v, %v; want compact.DefaultConfig()", r.Compact, err)
	}
	if !c.Managed("any.table") || !c.Managed("a.b.c") {
		t.Error("with no tables every table is managed")
	}
}

func TestDefault(t *testing.T) {
	dir := t.TempDir()
	c := Default(dir)
	p := c.Catalog.Properties()
	want := map[string]string{
		"type": "sql", "uri": "file:" + filepath.ToSlash(dir) + "/catalog.db", "warehouse": "file://" + filepath.ToSlash(dir) + "/warehouse",
		"sql.driver": "sqliteshim", "sql.dialect": "sqlite",
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Default(%q) properties = %v; want %v", dir, p, want)
	}
	if c.Lock.Backend != LockLocal || !c.Managed("demo.events") {
		t.Errorf("Default: lock %+v, managed %v", c.Lock, c.Managed("demo.events"))
	}
	if r, err := c.ForTable("demo.events", nil); err != nil || !r.Compact.Enabled {
		t.Errorf("Default ForTable = %+v, %v", r, err)
	}
}

// Each bad input gives its message at the right place.
func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		env  map[string]string
		want []string
	}{{
		name: "override below minimum",
		src: minimal + `tables:
- match: db.a
  compact:
    max_commits: 2
- match: db.b
  compact:
    max_commits: 5
    min_input_files: 0
`,
		want: []string{"maintainer.yaml:12:5: tables[1].compact.min_input_files: must be at least 1 (got 0)"},
	}, {
		name: "defaults below minimum, reported once",
		src: minimal + `defaults:
  compact:
    min_input_files: 0
tables:
  - match: db.*
    compact: {max_commits: 2}
  - match: db.c
`,
		want: []string{"maintainer.yaml:7:5: defaults.compact.min_input_files: must be at least 1 (got 0)"},
	}, {
		name: "unknown keys",
		src: `catalog:
  typ: sql
  type: sql
  uri: x
  properties: {sql.driver: d, sql.dialect: sqlite}
lock:
  ttl: 5s
  backnd: redis
expire:
  enabled: true
defaults:
  compact:
    min_input_file: 3
`,
		want: []string{
			`maintainer.yaml:2:3: catalog.typ: unknown key (did you mean "type"?)`,
			`maintainer.yaml:8:3: lock.backnd: unknown key (did you mean "backend"?)`,
			`maintainer.yaml:9:1: expire: unknown key (allowed: catalog, lock, server, scheduler, metrics, object_store, defaults, tables)`,
			`maintainer.yaml:13:5: defaults.compact.min_input_file: unknown key (did you mean "min_input_files"?)`,
		},
	}, {
		name: "wrong types",
		src: minimal + `lock:
  ttl: soon
  redis:
    addrs: redis:6379
    db: zero
defaults:
  compact:
    enabled: yes
    min_input_files: five
    delete_ratio_threshold: lots
    target_file_size: [1]
    max_commits:
tables: {match: x}
`,
		want: []string{
			`maintainer.yaml:6:3: lock.ttl: invalid duration "soon": expected a number at "soon"`,
			`maintainer.yaml:8:5: lock.redis.addrs: must be a list (got "redis:6379")`,
			`maintainer.yaml:9:5: lock.redis.db: must be an integer (got "zero")`,
			`maintainer.yaml:12:5: defaults.compact.enabled: must be true or false (got "yes")`,
			`maintainer.yaml:13:5: defaults.compact.min_input_files: must be an integer (got "five")`,
			`maintainer.yaml:14:5: defaults.compact.delete_ratio_threshold: must be a number (got "lots")`,
			`maintainer.yaml:15:5: defaults.compact.target_file_size: must be a size such as 512MiB (got a list)`,
			`maintainer.yaml:16:5: defaults.compact.max_commits: missing value (expected an integer)`,
			`maintainer.yaml:17:1: tables: must be a list (got a mapping)`,
		},
	}, {
		name: "bad sizes, durations and globs",
		src: minimal + `defaults:
  compact:
    target_file_size: 12XB
    skip_partitions_written_within: 60
tables:
  - match: db..t
  - match: "db.ev**"
  - compact: {min_input_files: 2}
  - match: db.t
    compact:
      max_bytes_per_run: -1GiB
`,
		want: []string{
			`maintainer.yaml:7:5: defaults.compact.target_file_size: invalid size "12XB": unknown unit "XB" (use B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)`,
			`maintainer.yaml:8:5: defaults.compact.skip_partitions_written_within: invalid duration "60": missing unit (use ns, us, ms, s, m, h, d or w)`,
			`maintainer.yaml:10:5: tables[0].match: invalid glob "db..t": empty level (two dots in a row, or a leading or trailing dot)`,
			`maintainer.yaml:11:5: tables[1].match: invalid glob "db.ev**": ** must be a whole level, as in db.** or **.events (use * within a level)`,
			`maintainer.yaml:12:3: tables[2].match: required (a glob over ns.table, e.g. db.events_*)`,
			`maintainer.yaml:15:7: tables[3].compact.max_bytes_per_run: invalid size "-1GiB": must not be negative`,
		},
	}, {
		name: "catalog: unknown type",
		src:  "catalog:\n  type: mysql\n",
		want: []string{`maintainer.yaml:2:3: catalog.type: unknown catalog type "mysql" (want one of sql, rest, glue, hive, hadoop)`},
	}, {
		name: "catalog: missing",
		src:  "lock:\n  backend: local\n",
		want: []string{`maintainer.yaml:1:1: catalog.type: required (one of sql, rest, glue, hive, hadoop)`},
	}, {
		name: "empty file",
		src:  "# nothing yet\n",
		want: []string{`maintainer.yaml:1:1: catalog.type: required (one of sql, rest, glue, hive, hadoop)`},
	}, {
		name: "catalog: required per type",
		src:  "catalog:\n  type: sql\n  name: \"\"\n",
		want: []string{
			`maintainer.yaml:1:1: catalog.uri: required for a sql catalog`,
			`maintainer.yaml:1:1: catalog.properties: a sql catalog needs "sql.driver" (for SQLite: sqliteshim)`,
			`maintainer.yaml:1:1: catalog.properties: a sql catalog needs "sql.dialect" (for SQLite: sqlite)`,
			`maintainer.yaml:3:3: catalog.name: must not be empty`,
		},
	}, {
		name: "catalog: hadoop needs a warehouse, rest a uri",
		src:  "catalog:\n  type: hadoop\n  uri: x\n",
		want: []string{`maintainer.yaml:1:1: catalog.warehouse: required for a hadoop catalog`},
	}, {
		name: "catalog: property given twice",
		src:  "catalog:\n  type: rest\n  uri: http://a\n  properties:\n    uri: http://b\n",
		want: []string{`maintainer.yaml:5:5: catalog.properties["uri"]: conflicts with catalog.uri; set it in one place`},
	}, {
		name: "lock",
		src: minimal + `lock:
  backend: zookeeper
  ttl: 2s
  redis:
    addrs: ["a:1", "nohost", ":6379"]
    db: -1
    key_prefix: ""
`,
		want: []string{
			`maintainer.yaml:6:3: lock.backend: must be local or redis (got "zookeeper")`,
			`maintainer.yaml:7:3: lock.ttl: must be at least 3s (got 2s)`,
			`maintainer.yaml:9:20: lock.redis.addrs[1]: must be host:port (got "nohost")`,
			`maintainer.yaml:9:30: lock.redis.addrs[2]: must be host:port (got ":6379")`,
			`maintainer.yaml:10:5: lock.redis.db: must not be negative (got -1)`,
			`maintainer.yaml:11:5: lock.redis.key_prefix: must not be empty`,
		},
	}, {
		name: "lock: redis needs addrs",
		src:  minimal + "lock:\n  backend: redis\n",
		want: []string{`maintainer.yaml:5:1: lock.redis.addrs: required when lock.backend is redis`},
	}, {
		name: "compact rules across fields",
		src: minimal + `defaults:
  compact:
    target_file_size: 1000
    delete_ratio_threshold: 1.5
    where: "x ="
tables:
  - match: db.t
    compact:
      min_file_size: 200MiB
      max_file_size: 100MiB
`,
		want: []string{
			`maintainer.yaml:7:5: defaults.compact.target_file_size: must be at least 1MiB (got 1000)`,
			`maintainer.yaml:8:5: defaults.compact.delete_ratio_threshold: must be between 0 and 1 (got 1.5)`,
			`maintainer.yaml:9:5: defaults.compact.where: `, // the message is rowfilter.Parse's
			`maintainer.yaml:13:7: tables[0].compact.min_file_size: must be less than max_file_size (got 200MiB)`,
			// target_file_size comes from defaults; the problem is the override's min_file_size.
			`maintainer.yaml:13:7: tables[0].compact.min_file_size: must not exceed target_file_size (got 200MiB)`,
		},
	}, {
		name: "a defaults value that breaks only with an override",
		src: minimal + `defaults:
  compact:
    min_file_size: 64MiB
tables:
  - match: db.t
    compact:
      max_file_size: 32MiB
`,
		want: []string{
			`maintainer.yaml:7:5: tables[0].compact.min_file_size: must be less than max_file_size (got 64MiB) (set in defaults.compact)`,
		},
	}, {
		name: "environment",
		src: `catalog:
  type: ${CATALOG_TYPE}
  uri: "${CATALOG_URI}"
  warehouse: ${WH:-s3://default}${SUFFIX}
  properties:
    token: ${
defaults:
  compact:
    min_input_files: ${MIN_FILES}
`,
		env: map[string]string{"CATALOG_TYPE": "rest", "MIN_FILES": "many"},
		want: []string{
			`maintainer.yaml:3:3: catalog.uri: environment variable CATALOG_URI is not set (use ${CATALOG_URI:-default} for a default)`,
			`maintainer.yaml:4:3: catalog.warehouse: environment variable SUFFIX is not set (use ${SUFFIX:-default} for a default)`,
			`maintainer.yaml:6:5: catalog.properties["token"]: unterminated ${ in "${"`,
			`maintainer.yaml:9:5: defaults.compact.min_input_files: must be an integer (got "many")`,
		},
	}, {
		name: "secret files",
		src: minimal + `  credential_file: /nonexistent/credential
  token_file: ""
lock:
  backend: redis
  redis:
    addrs: [r:6379]
    password_file: /nonexistent/redis
`,
		want: []string{
			`maintainer.yaml:5:3: catalog.credential_file: cannot read "/nonexistent/credential": no such file or directory`,
			`maintainer.yaml:6:3: catalog.token_file: must not be empty`,
			`maintainer.yaml:11:5: lock.redis.password_file: cannot read "/nonexistent/redis": no such file or directory`,
		},
	}, {
		name: "object store",
		src:  minimal + "object_store:\n  request_timeout: 10ms\n  max_attempts: 0\n",
		want: []string{
			`maintainer.yaml:6:3: object_store.request_timeout: must be at least 100ms (got 10ms)`,
			`maintainer.yaml:7:3: object_store.max_attempts: must be between 1 and 20 (got 0)`,
		},
	}, {
		name: "object store types",
		src:  minimal + "object_store:\n  request_timeout: soon\n  max_attempts: many\n",
		want: []string{
			`maintainer.yaml:6:3: object_store.request_timeout: `,
			`maintainer.yaml:7:3: object_store.max_attempts: must be an integer (got "many")`,
		},
	}, {
		name: "syntax error",
		src:  "catalog:\n  type: sql\n  uri: [1,\n",
		want: []string{`maintainer.yaml:3:8: sequence end token ']' not found`},
	}, {
		name: "duplicate key",
		src:  "catalog:\n  type: sql\n  type: rest\n",
		want: []string{`maintainer.yaml:3:3: mapping key "type" already defined at [2:3]`},
	}, {
		name: "not a mapping",
		src:  "- catalog\n",
		want: []string{`maintainer.yaml:1:1: must be a mapping (got a list)`},
	}, {
		name: "two documents",
		src:  minimal + "---\ncatalog: {}\n",
		want: []string{`maintainer.yaml:6:1: only one YAML document is allowed`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOf(t, tc.src, tc.env)
			ok := len(got) == len(tc.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.HasPrefix(got[i], tc.want[i]) && (strings.HasSuffix(tc.want[i], ": ") || got[i] == tc.want[i])
			}
			if !ok {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// Many problems of different kinds come back together, in file order.
func TestProblemsReportedTogether(t *testing.T) {
	src := `catalog:
  type: sql
  uri: file:/x.db
  colour: blue
  properties: {sql.driver: sqliteshim, sql.dialect: sqlite}
lock:
  ttl: 1s
defaults:
  compact:
    max_concurrent_groups: 0
    commit_retries: lots
tables:
  - match: "db.*"
    compact:
      min_input_files: 0
      target_file_size: 12XB
  - match: a..b
`
	_, err := Parse("conf/maintainer.yaml", []byte(src), mapEnv(nil))
	want := `conf/maintainer.yaml:4:3: catalog.colour: unknown key (allowed: name, type, uri, warehouse, properties, credential_file, token_file, request_timeout, max_attempts)
conf/maintainer.yaml:7:3: lock.ttl: must be at least 3s (got 1s)
conf/maintainer.yaml:10:5: defaults.compact.max_concurrent_groups: must be between 1 and 64 (got 0)
conf/maintainer.yaml:11:5: defaults.compact.commit_retries: must be an integer (got "lots")
conf/maintainer.yaml:15:7: tables[0].compact.min_input_files: must be at least 1 (got 0)
conf/maintainer.yaml:16:7: tables[0].compact.target_file_size: invalid size "12XB": unknown unit "XB" (use B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)
conf/maintainer.yaml:17:5: tables[1].match: invalid glob "a..b": empty level (two dots in a row, or a leading or trailing dot)`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 7 {
		t.Fatalf("want a *ValidationError with 7 problems, got %T", err)
	}
	if p := ve.Problems[4]; p != (Problem{File: "conf/maintainer.yaml", Line: 15, Col: 7, Path: "tables[0].compact.min_input_files", Msg: "must be at least 1 (got 0)"}) {
		t.Errorf("problem fields: %+v", p)
	}
}

func TestLoadUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := Load(path)
	var ve *ValidationError
	if !errors.As(err, &ve) || err.Error() != path+": cannot read config file: no such file or directory" {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestOverridesOrderAndPartial(t *testing.T) {
	base := minimal + `defaults:
  compact:
    min_input_files: 4
    target_file_size: 256MiB
    max_commits: 3
tables:
`
	broad := `  - match: "db.*"
    compact: {min_input_files: 6, commit_retries: 9}
`
	narrow := `  - match: "db.events_*"
    compact: {min_input_files: 8, partial_progress: true}
`
	only := "  - match: other.t\n"
	def := compact.DefaultConfig()
	with := func(f func(*compact.Config)) compact.Config {
		c := def
		c.MinInputFiles, c.TargetFileSize, c.MaxCommits = 4, 256<<20, 3
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name  string
		src   string
		ident string
		want  compact.Config
	}{
		{"narrow after broad wins", base + broad + narrow + only, "db.events_1", with(func(c *compact.Config) {
			c.MinInputFiles, c.CommitRetries, c.PartialProgress = 8, 9, true
		})},
		{"broad after narrow wins where both set", base + narrow + broad + only, "db.events_1", with(func(c *compact.Config) {
			c.MinInputFiles, c.CommitRetries, c.PartialProgress = 6, 9, true
		})},
		{"only the broad one matches", base + broad + narrow + only, "db.users", with(func(c *compact.Config) {
			c.MinInputFiles, c.CommitRetries = 6, 9
		})},
		{"override without settings keeps defaults", base + broad + narrow + only, "other.t", with(func(*compact.Config) {})},
		{"unmatched table gets defaults", base + broad + narrow + only, "x.y", with(func(*compact.Config) {})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.src, nil)
			r, err := c.ForTable(tc.ident, nil)
			if err != nil || !reflect.DeepEqual(r.Compact, tc.want) {
				t.Errorf("ForTable(%q) = %+v, %v\nwant %+v", tc.ident, r.Compact, err, tc.want)
			}
		})
	}
	c := mustParse(t, base+broad+narrow+only, nil)
	for ident, want := range map[string]bool{"db.events_1": true, "db.x": true, "other.t": true, "x.y": false, "db.a.b": false} {
		if got := c.Managed(ident); got != want {
			t.Errorf("Managed(%q) = %v; want %v", ident, got, want)
		}
	}
}

// Two overrides that are each valid with the defaults can combine into
// invalid settings for a table both match; ForTable reports it there.
func TestForTableCombinedOverrides(t *testing.T) {
	c := mustParse(t, minimal+`tables:
  - match: db.*
    compact: {min_file_size: 100MiB}
  - match: db.x
    compact:
      max_file_size: 50MiB
`, nil)
	if _, err := c.ForTable("db.y", nil); err != nil {
		t.Errorf("db.y: %v", err)
	}
	r, err := c.ForTable("db.x", nil)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("ForTable(db.x) error = %v (%T); want a *ValidationError", err, err)
	}
	if got := err.Error(); got != `maintainer.yaml:7:15: tables[0].compact.min_file_size: must be less than max_file_size (got 100MiB) (resolving table db.x)` {
		t.Errorf("ForTable(db.x) error:\n%s", got)
	}
	if r.Compact.MinFileSize != 100<<20 || r.Compact.MaxFileSize != 50<<20 {
		t.Errorf("resolved anyway: %+v", r.Compact)
	}
}

func TestTablePropertyFallback(t *testing.T) {
	const prop = "write.target-file-size-bytes"
	for _, tc := range []struct {
		name, src  string
		props      map[string]string
		wantTarget int64
		wantWarn   string
	}{
		{"used when the config is silent", minimal, map[string]string{prop: "134217728"}, 128 << 20, ""},
		{"no property", minimal, nil, 0, ""},
		{"defaults win", minimal + "defaults:\n  compact: {target_file_size: 256MiB}\n", map[string]string{prop: "134217728"}, 256 << 20, ""},
		{"matching override wins", minimal + "tables:\n  - match: db.*\n    compact: {target_file_size: 64MiB}\n", map[string]string{prop: "134217728"}, 64 << 20, ""},
		{"non-matching override does not count", minimal + "tables:\n  - match: db.*\n  - match: x.*\n    compact: {target_file_size: 64MiB}\n", map[string]string{prop: "134217728"}, 128 << 20, ""},
		{"unparsable ignored", minimal, map[string]string{prop: "big"}, 0, `table property write.target-file-size-bytes="big" ignored: not an integer`},
		{"not positive ignored", minimal, map[string]string{prop: "-1"}, 0, `table property write.target-file-size-bytes="-1" ignored: not positive`},
		{"too small for compaction ignored", minimal, map[string]string{prop: "1000"}, 0, `table property write.target-file-size-bytes="1000" ignored: target_file_size must be at least 1MiB (got 1000)`},
		{"inconsistent with the config ignored", minimal + "defaults:\n  compact: {min_file_size: 100MiB}\n", map[string]string{prop: "67108864"}, 0,
			`table property write.target-file-size-bytes="67108864" ignored: min_file_size must not exceed target_file_size (got 100MiB)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.src, nil)
			r, err := c.ForTable("db.t", tc.props)
			if err != nil {
				t.Fatal(err)
			}
			if r.Compact.TargetFileSize != tc.wantTarget {
				t.Errorf("TargetFileSize = %d; want %d", r.Compact.TargetFileSize, tc.wantTarget)
			}
			if got := strings.Join(r.Warnings, "\n"); got != tc.wantWarn {
				t.Errorf("warnings = %q; want %q", got, tc.wantWarn)
			}
		})
	}
}

func TestEnvExpansion(t *testing.T) {
	c := mustParse(t, `catalog:
  type: ${TYPE}
  uri: "jdbc:${DB_HOST:-localhost}:${DB_PORT:-5432}/x"
  properties:
    sql.driver: ${DRIVER}
    sql.dialect: '${DIALECT:-postgres}'
    literal: $${NOT_EXPANDED}
defaults:
  compact:
    min_input_files: ${MIN_FILES}
    target_file_size: ${SIZE:-256MiB}
    partial_progress: ${PARTIAL}
`, map[string]string{"TYPE": "sql", "DB_HOST": "db", "DRIVER": "pgx", "MIN_FILES": "7", "PARTIAL": "true"})
	if c.Catalog.URI != "jdbc:db:5432/x" || c.Catalog.Props["sql.driver"] != "pgx" || c.Catalog.Props["sql.dialect"] != "postgres" || c.Catalog.Props["literal"] != "${NOT_EXPANDED}" {
		t.Errorf("catalog = %+v", c.Catalog)
	}
	cs := c.Defaults["compact"].(*Block[compact.Config]).Config
	if cs.MinInputFiles != 7 || cs.TargetFileSize != 256<<20 || !cs.PartialProgress {
		t.Errorf("compact = %+v", cs)
	}
	got := problemsOf(t, minimal+"defaults:\n  compact:\n    where: ${WHERE}\n", nil)
	if want := "maintainer.yaml:7:5: defaults.compact.where: environment variable WHERE is not set (use ${WHERE:-default} for a default)"; len(got) != 1 || got[0] != want {
		t.Errorf("missing var: %q", got)
	}
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "cred", "\n  id:secret  \n\n")
	writeFile(t, dir, "sub/token", "tkn")
	writeFile(t, dir, "redis", "pw\n")
	writeFile(t, dir, "empty", " \n")
	path := writeFile(t, dir, "m.yaml", `catalog:
  type: rest
  uri: http://x
  credential_file: cred
  token_file: ./sub/token
lock:
  backend: redis
  redis: {addrs: ["r:1"], password_file: redis}
`)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Catalog.Credential != "id:secret" || c.Catalog.Token != "tkn" || c.Lock.Redis.Password != "pw" {
		t.Errorf("secrets: %q %q %q", string(c.Catalog.Credential), string(c.Catalog.Token), string(c.Lock.Redis.Password))
	}
	if p := c.Catalog.Properties(); p["credential"] != "id:secret" || p["token"] != "tkn" {
		t.Errorf("Properties() = %v", p)
	}

	// A local lock does not read the redis password.
	mustParse(t, minimal+"lock:\n  redis: {password_file: /nonexistent}\n", nil)

	// An empty secret file, relative to the config file's directory.
	path = writeFile(t, dir, "m2.yaml", "catalog:\n  type: rest\n  uri: http://x\n  token_file: empty\n")
	_, err = Load(path)
	want := path + `:4:3: catalog.token_file: file "` + filepath.Join(dir, "empty") + `" is empty`
	if err == nil || err.Error() != want {
		t.Errorf("empty secret: %v\nwant %s", err, want)
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	c := mustParse(t, minimal+`defaults:
  compact: &base
    min_input_files: 3
    max_commits: 4
tables:
  - match: db.a
    compact:
      <<: *base
      min_input_files: 9
  - match: db.b
    compact: *base
`, nil)
	a, _ := c.ForTable("db.a", nil)
	b, _ := c.ForTable("db.b", nil)
	if a.Compact.MinInputFiles != 9 || a.Compact.MaxCommits != 4 || b.Compact.MinInputFiles != 3 || b.Compact.MaxCommits != 4 {
		t.Errorf("a = %+v\nb = %+v", a.Compact, b.Compact)
	}
	// A bad value reached through an alias is reported once, where it is written.
	got := problemsOf(t, minimal+`defaults:
  compact: &base
    min_input_files: x
tables:
  - match: db.a
    compact: *base
`, nil)
	if want := `maintainer.yaml:7:5: defaults.compact.min_input_files: must be an integer (got "x")`; len(got) != 1 || got[0] != want {
		t.Errorf("alias problems = %q", got)
	}
}

// Every field of a component's Config is a key of its block, named by the
// snake_case name validate.FieldError uses (the trigger block's too).
func TestConfigKeysAreFieldNames(t *testing.T) {
	types := map[reflect.Type]bool{}
	for _, s := range specsOf(tasks) {
		types[s.typ] = true
	}
	for _, want := range []reflect.Type{
		reflect.TypeFor[compact.Config](), reflect.TypeFor[expire.Config](),
		reflect.TypeFor[orphans.Config](), reflect.TypeFor[trigger.Config](),
	} {
		if !types[want] {
			t.Errorf("%s is not in the task registry", want)
		}
	}
	for ct := range types {
		keys := map[string]bool{}
		for _, f := range Fields(ct) {
			keys[f.Name] = true
		}
		if len(keys) != ct.NumField() {
			t.Errorf("%s has %d fields, %d keys", ct, ct.NumField(), len(keys))
		}
		for i := range ct.NumField() {
			if cf := ct.Field(i); !keys[snake(cf.Name)] {
				t.Errorf("%s.%s has no key %q", ct, cf.Name, snake(cf.Name))
			}
		}
	}
}

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

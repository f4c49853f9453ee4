// Package config loads the maintainer's YAML configuration: it reads the
// file, expands ${VAR} and ${VAR:-default} in every scalar, reads the
// *_file secrets, applies defaults, validates everything in one pass (each
// problem with file, line, column, field path and value), and resolves the
// effective per-table settings (see Config.ForTable for the precedence).
//
// The file looks like this (unknown keys are errors):
//
//	catalog:
//	  name: default            # default "default"
//	  type: sql                # sql|rest|glue|hive|hadoop (required)
//	  uri: file:/data/catalog.db  # required for sql, rest and hive (thrift://host:port)
//	  warehouse: file:///data/warehouse  # required for hadoop (an object store needs allow-unsafe-commits)
//	  properties:              # passed to iceberg-go as they are
//	    sql.driver: sqliteshim
//	    sql.dialect: sqlite
//	  credential_file: /run/secrets/credential  # -> property "credential"
//	  token_file: /run/secrets/token            # -> property "token"
//	  request_timeout: 30s     # bounds each catalog request (default 30s)
//	  max_attempts: 3          # of a load or list that failed transiently; a commit is sent once
//	lock:
//	  backend: redis           # local|redis (default local)
//	  redis:
//	    addrs: [redis:6379]    # required for redis
//	    username: maintainer   # Redis 6 ACL user
//	    password_file: /run/secrets/redis
//	    tls: {enabled: true, ca_file: /run/secrets/redis-ca.pem}
//	    db: 0
//	    key_prefix: iceberg-maintainer
//	  ttl: 60s                 # default 60s, at least 3s
//	server:                    # maintainer serve
//	  listen: ":8080"
//	  token_file: /run/secrets/maintainer-token  # bearer token of /v1/*
//	  alertmanager: {table_label: table, namespace_label: namespace, task_label: task}
//	scheduler:
//	  poll_interval: 30s       # jittered by up to 10%
//	  max_concurrent_tables: 2
//	  state_file: /var/lib/maintainer/state.json  # trigger state with a local lock
//	  shutdown_grace: 60s
//	  lock_wait: 0s
//	  replica_id: ${POD_NAME}  # default: host name + random suffix
//	metrics:
//	  table_label: true
//	  max_tables: 200
//	  health_interval: 5m
//	object_store:              # every S3 request
//	  request_timeout: 1m      # without progress (connect, headers, each read or write)
//	  max_attempts: 4
//	defaults:                  # task settings for every table
//	  compact:
//	    target_file_size: 512MiB
//	    max_run_time: 3h       # every task block; past it the run is cancelled and fails
//	    trigger: {commit_count: 10, interval: 24h, rate_limit: 10m}
//	tables:                    # overrides, applied in order on matching tables
//	  - match: "db.events_*"
//	    compact:
//	      min_input_files: 10
//
// Sizes are bytes or numbers with a unit (ParseSize); durations are Go
// durations that may use d and w (ParseDuration). Relative *_file paths are
// relative to the config file's directory.
package config

import (
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/iceberg-maintainer/maintainer/internal/catalogcall"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
)

// Catalog types accepted in catalog.type; iceberg-go registers these names.
const (
	CatalogSQL    = "sql"
	CatalogREST   = "rest"
	CatalogGlue   = "glue"
	CatalogHive   = "hive"
	CatalogHadoop = "hadoop"
)

// Lock backends accepted in lock.backend.
const (
	LockLocal = "local"
	LockRedis = "redis"
)

// Defaults applied when the file is silent.
const (
	DefaultCatalogName    = "default"
	DefaultLockTTL        = 60 * time.Second
	MinLockTTL            = 3 * time.Second
	DefaultRedisKeyPrefix = "iceberg-maintainer"
	DefaultListen         = ":8080"
	DefaultPollInterval   = 30 * time.Second
	MinPollInterval       = time.Second
	DefaultMaxConcurrent  = 2
	DefaultShutdownGrace  = 60 * time.Second
	DefaultMaxTables      = 200
	DefaultHealthInterval = 5 * time.Minute
)

// Config is a loaded, validated configuration. Its methods only read it, so
// one Config may be shared by concurrent goroutines.
type Config struct {
	Catalog   CatalogConfig   `yaml:"catalog"`
	Lock      LockConfig      `yaml:"lock"`
	Server    ServerConfig    `yaml:"server"`
	Scheduler SchedulerConfig `yaml:"scheduler"`
	Metrics   MetricsConfig   `yaml:"metrics"`
	// ObjectStore bounds every object-store request (objstore.Config).
	ObjectStore objstore.Config `yaml:"object_store"`
	Defaults    TaskSet         `yaml:"defaults"`
	Tables      []TableOverride `yaml:"tables"`
	// Path is the file the config was loaded from (the name given to Parse).
	Path string `yaml:"-"`

	pos   map[string]position // field path -> position of the key that set it
	specs []taskSpec          // what ForTable resolves, from the task registry
}

// CatalogConfig says which Iceberg catalog holds the tables.
type CatalogConfig struct {
	Name      string `yaml:"name"`
	Type      string `yaml:"type"`
	URI       string `yaml:"uri"`
	Warehouse string `yaml:"warehouse"`
	// Props is the properties block, passed to iceberg-go as it is.
	Props          map[string]string `yaml:"properties"`
	CredentialFile string            `yaml:"credential_file"`
	TokenFile      string            `yaml:"token_file"`
	// Credential and Token hold the trimmed contents of CredentialFile and
	// TokenFile.
	Credential Secret `yaml:"-"`
	Token      Secret `yaml:"-"`
	// Requests bound every catalog request: request_timeout, max_attempts.
	Requests catalogcall.Config `yaml:",inline"`
}

// Properties returns the properties for iceberg-go's catalog.Load: the
// properties block as it is, plus "type", "uri", "warehouse", "credential"
// and "token" from their own keys when those are non-empty. (A key given
// both ways is a validation error, so nothing is silently overridden.)
func (c CatalogConfig) Properties() map[string]string {
	p := make(map[string]string, len(c.Props)+5)
	maps.Copy(p, c.Props)
	for k, v := range map[string]string{
		"type":       c.Type,
		"uri":        c.URI,
		"warehouse":  c.Warehouse,
		"credential": string(c.Credential),
		"token":      string(c.Token),
	} {
		if v != "" {
			p[k] = v
		}
	}
	return p
}

// LockConfig says how tables are leased.
type LockConfig struct {
	Backend string        `yaml:"backend"` // LockLocal or LockRedis
	Redis   RedisConfig   `yaml:"redis"`
	TTL     time.Duration `yaml:"ttl"`
}

// RedisConfig is used when LockConfig.Backend is LockRedis.
type RedisConfig struct {
	Addrs        []string       `yaml:"addrs"`    // host:port; several for a redsync quorum
	Username     string         `yaml:"username"` // Redis 6 ACL user; empty = default user
	PasswordFile string         `yaml:"password_file"`
	Password     Secret         `yaml:"-"` // trimmed contents of PasswordFile
	DB           int            `yaml:"db"`
	KeyPrefix    string         `yaml:"key_prefix"`
	TLS          RedisTLSConfig `yaml:"tls"`
}

// RedisTLSConfig encrypts the connections to Redis (managed Redis with
// in-transit encryption).
type RedisTLSConfig struct {
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs to trust; empty = the system's.
	CAFile             string `yaml:"ca_file"`
	ServerName         string `yaml:"server_name"` // default: the host of each address
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
	// RootCAs holds CAFile's certificates, read and parsed by validation;
	// nil = the system's.
	RootCAs *x509.CertPool `yaml:"-"`
}

// ServerConfig is the HTTP side of `maintainer serve`.
type ServerConfig struct {
	Listen string `yaml:"listen"` // default ":8080"
	// TokenFile holds the bearer token that POST /v1/trigger,
	// /v1/alertmanager and GET /v1/status require; re-read when it changes.
	// Empty: no authentication (for a sidecar bound to localhost).
	TokenFile    string             `yaml:"token_file"`
	Alertmanager AlertmanagerConfig `yaml:"alertmanager"`
}

// AlertmanagerConfig names the alert labels that say which table (and
// optionally which task) a firing alert is about.
type AlertmanagerConfig struct {
	TableLabel     string `yaml:"table_label"`     // default "table"
	NamespaceLabel string `yaml:"namespace_label"` // default "namespace"; "" = off
	TaskLabel      string `yaml:"task_label"`      // default "task"; "" = off
}

// SchedulerConfig drives `serve` (and the trigger state of `run`).
type SchedulerConfig struct {
	PollInterval        time.Duration `yaml:"poll_interval"`         // default 30s, jittered by up to 10%
	MaxConcurrentTables int           `yaml:"max_concurrent_tables"` // default 2
	// StateFile keeps trigger state across restarts when lock.backend is
	// local (with redis, the state lives in Redis and is shared). Empty:
	// state lives in memory, so every process starts "never run".
	StateFile string `yaml:"state_file"`
	// ShutdownGrace is how long SIGTERM lets running tasks finish before
	// cancelling them; default 60s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// LockWait is how long a run waits for a table another replica is
	// working on; default 0 (report busy at once).
	LockWait time.Duration `yaml:"lock_wait"`
	// ReplicaID names this serve replica among those sharing the tables;
	// empty: the host name plus a random suffix.
	ReplicaID string `yaml:"replica_id"`
}

// MetricsConfig bounds the per-table series.
type MetricsConfig struct {
	TableLabel *bool `yaml:"table_label"` // default true
	MaxTables  int   `yaml:"max_tables"`  // default 200; tables beyond share table="_other"
	// HealthInterval is how often serve re-measures a table's health gauges
	// from its manifests (after a run they are measured at once); default 5m.
	HealthInterval time.Duration `yaml:"health_interval"`
}

// TableLabelOn reports whether metrics carry the table label.
func (m MetricsConfig) TableLabelOn() bool { return m.TableLabel == nil || *m.TableLabel }

// Secret is a string that prints as "<redacted>" so it does not leak into
// logs; convert it with string(s) to use it.
type Secret string

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "<redacted>"
}

// MarshalText hides the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Load reads the file at path and returns its validated config. Every
// problem, including an unreadable file, is returned as one
// *ValidationError. Environment variables come from the process.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		ps := &problems{file: path}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		ps.add(position{}, "", "cannot read config file: %v", err)
		return nil, ps.err()
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse parses, expands, defaults and validates a config file's contents.
// name is the file's name, used in problems and to resolve relative *_file
// paths. env looks up environment variables (nil means os.LookupEnv). The
// error, if any, is a *ValidationError listing every problem.
func Parse(name string, data []byte, env func(string) (string, bool)) (*Config, error) {
	return parse(name, data, env, tasks)
}

// parse is Parse with the task blocks that defaults and tables[] accept.
func parse(name string, data []byte, env func(string) (string, bool), tasks []task) (*Config, error) {
	if env == nil {
		env = os.LookupEnv
	}
	ps := &problems{file: name}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		var se *yaml.SyntaxError
		if errors.As(err, &se) && se.Token != nil && se.Token.Position != nil {
			ps.add(position{line: se.Token.Position.Line, col: se.Token.Position.Column}, "", "%s", se.Message)
		} else {
			ps.add(position{}, "", "%v", err)
		}
		return nil, ps.err()
	}
	var root ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if root != nil {
			ps.add(tokenPos(doc.Body), "", "only one YAML document is allowed")
			break
		}
		root = doc.Body
	}
	d := newDecoder(ps, env, root, tasks)
	d.pos[""] = position{line: 1, col: 1}
	if root != nil {
		d.pos[""] = tokenPos(root)
	}
	c := &Config{Path: name, specs: specsOf(tasks)}
	d.decode("", d.pos[""], root, reflect.ValueOf(c).Elem())
	c.pos = d.pos
	v := &validator{d: d, ps: ps, dir: filepath.Dir(name)}
	v.validate(c)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

//go:embed default.yaml
var defaultFS embed.FS

// DefaultYAML is the configuration `maintainer demo` uses, with ${DEMO_DIR}
// standing for the demo's directory.
func DefaultYAML() []byte {
	b, err := defaultFS.ReadFile("default.yaml")
	if err != nil {
		panic(err)
	}
	return b
}

// Default returns the configuration `maintainer demo` uses: a SQL catalog
// over SQLite (driver sqliteshim, which the caller must import) at
// dir/catalog.db, a warehouse in dir/warehouse, a local lock, and every
// table maintained with the default settings.
func Default(dir string) *Config {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	env := func(k string) (string, bool) {
		if k == "DEMO_DIR" {
			return filepath.ToSlash(abs), true
		}
		return "", false
	}
	c, err := Parse("default.yaml", DefaultYAML(), env)
	if err != nil {
		panic(fmt.Sprintf("config: embedded default config: %v", err))
	}
	return c
}

package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/catalogcall"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/lock/redislock"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

var catalogTypes = []string{CatalogSQL, CatalogREST, CatalogGlue, CatalogHive, CatalogHadoop}

// validator applies defaults and checks a decoded Config, reporting into
// the same problems as the decoder.
type validator struct {
	d   *decoder
	ps  *problems
	dir string // relative *_file paths are resolved against it
}

func (v *validator) problem(path, format string, args ...any) {
	v.d.problem(v.d.at(path), path, format, args...)
}

// checkable reports whether path was decoded without problems, so that a
// bad value is not reported twice.
func (v *validator) checkable(path string) bool { return !v.d.isBad(path) }

func (v *validator) validate(c *Config) {
	v.catalog(&c.Catalog)
	v.lock(&c.Lock)
	v.server(&c.Server)
	v.scheduler(&c.Scheduler)
	if c.Lock.Backend == LockRedis && v.d.isSet("scheduler.state_file") && v.checkable("scheduler.state_file") {
		v.problem("scheduler.state_file", "not used with lock.backend redis: trigger state lives in Redis, shared by every replica; remove it")
	}
	v.metrics(&c.Metrics)
	v.objectStore(&c.ObjectStore)
	v.tables(c)
	v.tasks(c)
}

// catalogRequests applies the defaults of the keys left out and reports
// the values catalogcall refuses, at their keys.
func (v *validator) catalogRequests(r *catalogcall.Config) {
	def := catalogcall.DefaultConfig()
	if !v.d.isSet("catalog.request_timeout") {
		r.RequestTimeout = def.RequestTimeout
	}
	if !v.d.isSet("catalog.max_attempts") {
		r.MaxAttempts = def.MaxAttempts
	}
	for _, fp := range asFieldProblems(r.Validate()) {
		if path := "catalog." + fp.field; v.checkable(path) {
			v.problem(path, "%s (got %v)", fp.msg, fp.value)
		}
	}
}

func (v *validator) catalog(cat *CatalogConfig) {
	set := v.d.isSet
	if !v.checkable("catalog") {
		return
	}
	v.catalogRequests(&cat.Requests)
	if !set("catalog.name") {
		cat.Name = DefaultCatalogName
	} else if strings.TrimSpace(cat.Name) == "" && v.checkable("catalog.name") {
		v.problem("catalog.name", "must not be empty")
	}
	typeOK := false
	switch {
	case !v.checkable("catalog.type"):
	case !set("catalog.type"):
		v.problem("catalog.type", "required (one of %s)", strings.Join(catalogTypes, ", "))
	case !slices.Contains(catalogTypes, cat.Type):
		v.problem("catalog.type", "unknown catalog type %q (want one of %s)", cat.Type, strings.Join(catalogTypes, ", "))
	default:
		typeOK = true
	}
	if set("catalog.credential_file") && v.checkable("catalog.credential_file") {
		cat.Credential = v.readSecret("catalog.credential_file", cat.CredentialFile)
	}
	if set("catalog.token_file") && v.checkable("catalog.token_file") {
		cat.Token = v.readSecret("catalog.token_file", cat.TokenFile)
	}
	for _, k := range []struct{ prop, key string }{
		{"type", "type"}, {"uri", "uri"}, {"warehouse", "warehouse"},
		{"credential", "credential_file"}, {"token", "token_file"},
	} {
		if _, ok := cat.Props[k.prop]; ok && set("catalog."+k.key) {
			v.problem(fmt.Sprintf("catalog.properties[%q]", k.prop), "conflicts with catalog.%s; set it in one place", k.key)
		}
	}
	if !typeOK || !v.checkable("catalog.properties") {
		return
	}
	props := cat.Properties()
	need := func(key, prop string) {
		if props[prop] == "" && v.checkable("catalog."+key) {
			v.problem("catalog."+key, "required for a %s catalog", cat.Type)
		}
	}
	switch cat.Type {
	case CatalogSQL:
		need("uri", "uri")
		for _, k := range []struct{ prop, example string }{{"sql.driver", "sqliteshim"}, {"sql.dialect", "sqlite"}} {
			if props[k.prop] == "" {
				v.problem("catalog.properties", "a sql catalog needs %q (for SQLite: %s)", k.prop, k.example)
			}
		}
	case CatalogREST, CatalogHive:
		need("uri", "uri")
	case CatalogHadoop:
		need("warehouse", "warehouse")
	}
	v.catalogChecks(cat, props)
}

// readSecret reads a *_file secret, relative to the config's directory.
func (v *validator) readSecret(path, file string) Secret {
	if strings.TrimSpace(file) == "" {
		v.problem(path, "must not be empty")
		return ""
	}
	p := file
	if !filepath.IsAbs(p) {
		p = filepath.Join(v.dir, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		v.problem(path, "cannot read %q: %v", p, err)
		return ""
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		v.problem(path, "file %q is empty", p)
	}
	return Secret(s)
}

func (v *validator) lock(l *LockConfig) {
	set := v.d.isSet
	if !v.checkable("lock") {
		return
	}
	switch {
	case !set("lock.backend"):
		l.Backend = LockLocal
	case !v.checkable("lock.backend"):
	case l.Backend != LockLocal && l.Backend != LockRedis:
		v.problem("lock.backend", "must be %s or %s (got %q)", LockLocal, LockRedis, l.Backend)
	}
	switch {
	case !set("lock.ttl"):
		l.TTL = DefaultLockTTL
	case !v.checkable("lock.ttl"):
	case l.TTL < MinLockTTL:
		v.problem("lock.ttl", "must be at least %s (got %s)", MinLockTTL, l.TTL)
	}
	r := &l.Redis
	switch {
	case !set("lock.redis.key_prefix"):
		r.KeyPrefix = DefaultRedisKeyPrefix
	case !v.checkable("lock.redis.key_prefix"):
	case strings.TrimSpace(r.KeyPrefix) == "":
		v.problem("lock.redis.key_prefix", "must not be empty")
	}
	// The lock package's own rules (host:port, port range, no node twice,
	// db), reported here at their line rather than when serve starts.
	for _, fp := range asFieldProblems(redislock.Config{Addrs: r.Addrs, DB: r.DB}.Validate()) {
		p := "lock.redis." + fp.field
		if fp.field == "addrs" || !v.checkable(p) {
			continue // an empty list is reported below, and only for redis
		}
		if s, ok := fp.value.(string); ok {
			v.problem(p, "%s (got %q)", fp.msg, s)
		} else {
			v.problem(p, "%s (got %v)", fp.msg, fp.value)
		}
	}
	if l.Backend != LockRedis {
		return // the redis block is checked but not used, and its password not read
	}
	if len(r.Addrs) == 0 && v.checkable("lock.redis.addrs") {
		v.problem("lock.redis.addrs", "required when lock.backend is redis")
	}
	if set("lock.redis.password_file") && v.checkable("lock.redis.password_file") {
		r.Password = v.readSecret("lock.redis.password_file", r.PasswordFile)
	}
	// go-redis authenticates only with a password: a user alone would
	// silently connect as the default user.
	if set("lock.redis.username") && !set("lock.redis.password_file") && v.checkable("lock.redis.username") {
		v.problem("lock.redis.username", "needs lock.redis.password_file: Redis ACL users authenticate with a password")
	}
	t := &r.TLS
	if !t.Enabled && (t.CAFile != "" || t.ServerName != "" || t.InsecureSkipVerify) && v.checkable("lock.redis.tls") {
		v.problem("lock.redis.tls.enabled", "must be true when other tls settings are given")
	}
	if set("lock.redis.tls.ca_file") && v.checkable("lock.redis.tls.ca_file") {
		if pem := v.readSecret("lock.redis.tls.ca_file", t.CAFile); pem != "" {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(pem)) {
				v.problem("lock.redis.tls.ca_file", "%q holds no PEM certificate", t.CAFile)
			} else {
				t.RootCAs = pool
			}
		}
	}
}

func (v *validator) server(s *ServerConfig) {
	set := v.d.isSet
	if !v.checkable("server") {
		return
	}
	switch {
	case !set("server.listen"):
		s.Listen = DefaultListen
	case !v.checkable("server.listen"):
	default:
		if _, port, err := net.SplitHostPort(s.Listen); err != nil || port == "" {
			v.problem("server.listen", "must be [host]:port, e.g. :8080 or 127.0.0.1:8080 (got %q)", s.Listen)
		}
	}
	if set("server.token_file") && v.checkable("server.token_file") {
		// Read now so a missing secret fails before serving; the server
		// re-reads the file when it changes.
		v.readSecret("server.token_file", s.TokenFile)
		if !filepath.IsAbs(s.TokenFile) {
			s.TokenFile = filepath.Join(v.dir, s.TokenFile)
		}
	}
	for _, l := range []struct {
		key      string
		val      *string
		def      string
		optional bool // "" turns the label off
	}{
		{"table_label", &s.Alertmanager.TableLabel, "table", false},
		{"namespace_label", &s.Alertmanager.NamespaceLabel, "namespace", true},
		{"task_label", &s.Alertmanager.TaskLabel, "task", true},
	} {
		p := "server.alertmanager." + l.key
		switch {
		case !set(p):
			*l.val = l.def
		case !v.checkable(p):
		case *l.val == "" && l.optional:
		case !metrics.ValidLabelName(*l.val):
			v.problem(p, "must be a Prometheus label name (got %q)", *l.val)
		}
	}
	am := s.Alertmanager
	for _, other := range []struct{ key, val string }{{"namespace_label", am.NamespaceLabel}, {"task_label", am.TaskLabel}} {
		if other.val != "" && other.val == am.TableLabel {
			v.problem("server.alertmanager."+other.key, "must differ from table_label (both %q)", am.TableLabel)
		}
	}
	if am.NamespaceLabel != "" && am.NamespaceLabel == am.TaskLabel {
		v.problem("server.alertmanager.task_label", "must differ from namespace_label (both %q)", am.TaskLabel)
	}
}

func (v *validator) scheduler(s *SchedulerConfig) {
	set := v.d.isSet
	if !v.checkable("scheduler") {
		return
	}
	switch {
	case !set("scheduler.poll_interval"):
		s.PollInterval = DefaultPollInterval
	case !v.checkable("scheduler.poll_interval"):
	case s.PollInterval < MinPollInterval:
		v.problem("scheduler.poll_interval", "must be at least %s (got %s)", MinPollInterval, s.PollInterval)
	}
	switch {
	case !set("scheduler.max_concurrent_tables"):
		s.MaxConcurrentTables = DefaultMaxConcurrent
	case !v.checkable("scheduler.max_concurrent_tables"):
	case s.MaxConcurrentTables < 1:
		v.problem("scheduler.max_concurrent_tables", "must be at least 1 (got %d)", s.MaxConcurrentTables)
	}
	switch {
	case !set("scheduler.shutdown_grace"):
		s.ShutdownGrace = DefaultShutdownGrace
	case !v.checkable("scheduler.shutdown_grace"):
	case s.ShutdownGrace < 0:
		v.problem("scheduler.shutdown_grace", "must not be negative (got %s)", s.ShutdownGrace)
	}
	if s.LockWait < 0 && v.checkable("scheduler.lock_wait") {
		v.problem("scheduler.lock_wait", "must not be negative (got %s)", s.LockWait)
	}
	if set("scheduler.replica_id") && v.checkable("scheduler.replica_id") && strings.TrimSpace(s.ReplicaID) == "" {
		v.problem("scheduler.replica_id", "must not be empty (leave it out for the host name plus a random suffix)")
	}
	if set("scheduler.state_file") && v.checkable("scheduler.state_file") {
		switch {
		case strings.TrimSpace(s.StateFile) == "":
			v.problem("scheduler.state_file", "must not be empty (leave it out to keep state in memory)")
		case !filepath.IsAbs(s.StateFile):
			s.StateFile = filepath.Join(v.dir, s.StateFile)
		}
	}
}

func (v *validator) metrics(m *MetricsConfig) {
	set := v.d.isSet
	if !v.checkable("metrics") {
		return
	}
	switch {
	case !set("metrics.max_tables"):
		m.MaxTables = DefaultMaxTables
	case !v.checkable("metrics.max_tables"):
	case m.MaxTables < 1:
		v.problem("metrics.max_tables", "must be at least 1 (got %d); set table_label: false to drop the label", m.MaxTables)
	}
	switch {
	case !set("metrics.health_interval"):
		m.HealthInterval = DefaultHealthInterval
	case !v.checkable("metrics.health_interval"):
	case m.HealthInterval < time.Second:
		v.problem("metrics.health_interval", "must be at least 1s (got %s)", m.HealthInterval)
	}
}

// objectStore fills the keys the file leaves out with objstore's defaults
// and reports objstore's own checks under object_store.
func (v *validator) objectStore(o *objstore.Config) {
	if !v.checkable("object_store") {
		return
	}
	def := objstore.DefaultConfig()
	if !v.d.isSet("object_store.request_timeout") {
		o.RequestTimeout = def.RequestTimeout
	}
	if !v.d.isSet("object_store.max_attempts") {
		o.MaxAttempts = def.MaxAttempts
	}
	for _, fp := range asFieldProblems(o.Validate()) {
		if p := "object_store." + fp.field; v.checkable(p) {
			v.problem(p, "%s (got %v)", fp.msg, fp.value)
		}
	}
}

func (v *validator) tables(c *Config) {
	for i, t := range c.Tables {
		p := fmt.Sprintf("tables[%d]", i)
		switch {
		case !v.checkable(p) || !v.checkable(p+".match"):
		case !v.d.isSet(p + ".match"):
			v.problem(p+".match", "required (a glob over ns.table, e.g. db.events_*)")
		default:
			if err := ValidGlob(t.Match); err != nil {
				v.problem(p+".match", "%v", err)
			}
		}
	}
}

// tasks validates each task block the way it will be used: defaults alone,
// then defaults with each override in isolation. A problem is reported at
// the key that set the value, and once. A key whose value did not decode is
// left out, so its problem is not reported a second time.
func (v *validator) tasks(c *Config) {
	set := v.d.decoded
	defaults := layer{path: "defaults", set: c.Defaults}
	for _, t := range c.specs {
		alone := map[string]bool{}
		for _, fp := range t.validate(t.resolve([]layer{defaults}, set)) {
			alone[fp.field+"\x00"+fp.msg+"\x00"+fmt.Sprint(fp.value)] = true
			v.ps.list = append(v.ps.list, c.locate(v.ps.file, t, []layer{defaults}, set, "defaults", fp, ""))
		}
		for i, o := range c.Tables {
			if _, ok := t.part(o.TaskSet); !ok {
				continue // defaults alone, already checked
			}
			override := layer{path: fmt.Sprintf("tables[%d]", i), set: o.TaskSet}
			layers := []layer{defaults, override}
			for _, fp := range t.validate(t.resolve(layers, set)) {
				if !t.sets(override, fp.field, set) && alone[fp.field+"\x00"+fp.msg+"\x00"+fmt.Sprint(fp.value)] {
					continue // the same problem in defaults, reported there
				}
				v.ps.list = append(v.ps.list, c.locate(v.ps.file, t, layers, set, override.path, fp, ""))
			}
		}
	}
}

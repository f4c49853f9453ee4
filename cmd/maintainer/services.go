package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/fleet"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
	"github.com/iceberg-maintainer/maintainer/lock/redislock"
	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// services are the lock, trigger-state and fleet-membership backends the
// config chose: Redis for all three (shared between replicas), or an
// in-process lock with the state in a local file (or in memory when no
// state_file is set) and a fleet of one.
type services struct {
	locker  lock.Locker
	lockKey func(table string) string
	state   trigger.Store
	// membership is the fleet membership whose index key is key.
	membership func(key string) fleet.Backend
	backend    string
	close      func()
	// assist is the board where replicas ask each other to help compact a
	// large table (Redis only: one process has nobody to ask).
	assist *maintenance.AssistBoard
}

func openServices(cfg *config.Config, log *slog.Logger) (*services, error) {
	prefix := cfg.Lock.Redis.KeyPrefix
	catalog := cfg.Catalog.Name
	s := &services{
		backend: cfg.Lock.Backend,
		lockKey: func(table string) string { return lock.Key(prefix, catalog, table) },
		close:   func() {},
	}
	switch cfg.Lock.Backend {
	case config.LockRedis:
		redislock.RouteClientLogs(log)
		rc := redislock.DefaultConfig()
		rc.Addrs, rc.Username = cfg.Lock.Redis.Addrs, cfg.Lock.Redis.Username
		rc.Password, rc.DB = string(cfg.Lock.Redis.Password), cfg.Lock.Redis.DB
		rc.TLS = redisTLS(cfg.Lock.Redis.TLS)
		rl, err := redislock.New(rc)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s: lock.redis: %w", cfg.Path, err)}
		}
		s.locker = rl
		s.state = trigger.NewKVStore(rl, prefix, catalog)
		s.membership = func(key string) fleet.Backend { return rl.Membership(key) }
		s.assist = maintenance.NewAssistBoard(rl, prefix+":assist:"+catalog, cfg.Lock.TTL, nil)
		s.close = func() {
			if err := rl.Close(); err != nil {
				log.Warn("close redis connections", "err", err)
			}
		}
	default:
		s.locker = memlock.New()
		s.membership = func(string) fleet.Backend { return fleet.NewLocal(nil) }
		if cfg.Scheduler.StateFile != "" {
			fs, err := trigger.NewFileStore(cfg.Scheduler.StateFile)
			if err != nil {
				return nil, usageError{fmt.Errorf("%s: scheduler.state_file: %w", cfg.Path, err)}
			}
			s.state = fs
		} else {
			s.state = trigger.NewMemStore()
		}
	}
	return s, nil
}

// fleetMember is serve's membership of the fleet of replicas that share
// the lock backend and maintain the same selection: its heartbeat lives
// lock.ttl, so a replica that dies gives up its tables as its leases
// expire.
//
// The membership key holds a digest of the selection (the config's
// tables[].match and the --table flags): replicas that select different
// tables (during a rolling update that changes them) form separate fleets,
// so each divides only what all its members select. Two fleets over one
// table both try it, and the lease decides; one fleet over members that do
// not all select a table would leave the table to a member that never
// maintains it.
func (s *services) fleetMember(cfg *config.Config, tableFlags []string, reg prometheus.Registerer, log *slog.Logger) (*fleet.Member, error) {
	fc := fleet.DefaultConfig()
	fc.TTL = cfg.Lock.TTL
	if cfg.Scheduler.ReplicaID != "" {
		fc.ID = cfg.Scheduler.ReplicaID
	}
	m, err := fleet.New(fc, fleet.Deps{Backend: s.membership(fleetKey(cfg, tableFlags)), Metrics: fleet.NewMetrics(reg), Logger: log})
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: scheduler: %w", cfg.Path, err)}
	}
	return m, nil
}

// fleetKey is the membership key of the fleet of processes with cfg's
// prefix, catalog and selection: "PREFIX:fleet:CATALOG:DIGEST".
func fleetKey(cfg *config.Config, tableFlags []string) string {
	var globs []string
	for _, t := range cfg.Tables {
		globs = append(globs, "match="+t.Match)
	}
	for _, t := range tableFlags {
		globs = append(globs, "flag="+t)
	}
	slices.Sort(globs)
	h := fnv.New32a()
	for _, g := range slices.Compact(globs) {
		h.Write([]byte(g))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s:fleet:%s:%08x", cfg.Lock.Redis.KeyPrefix, cfg.Catalog.Name, h.Sum32())
}

// redisTLS turns the validated tls block into a client TLS config.
func redisTLS(t config.RedisTLSConfig) *tls.Config {
	if !t.Enabled {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: t.RootCAs, ServerName: t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify}
}

// ping checks the lock backend, before any work.
func (s *services) ping(ctx context.Context) error {
	if err := s.locker.Ping(ctx); err != nil {
		return fmt.Errorf("lock backend %s: %w", s.backend, err)
	}
	return nil
}

// objectStore builds the S3 settings of the catalog's properties over the
// object_store transport and returns ctx carrying them as iceberg-go's
// ambient AWS config: every table IO opened under it (metadata read at load
// time, data files later) and objstore.NewStore use that transport, so no
// object-store request of the run can hang. A bad S3 property is bad
// configuration, and so is a broken AWS environment (AWS_PROFILE naming a
// missing profile) when the catalog properties say the catalog is on S3
// (objstore.UsesS3). When they do not, that environment must not stop a
// local warehouse: the run goes on without the settings, and a table that
// is on S3 after all fails on the same environment when iceberg-go opens
// its IO.
func objectStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (context.Context, objstore.S3, error) {
	props := cfg.Catalog.Properties()
	s3, err := objstore.S3Settings(ctx, objstore.NewTransport(cfg.ObjectStore, log), props)
	if errors.Is(err, objstore.ErrAWSEnvironment) && !objstore.UsesS3(props) {
		log.Debug("no S3 settings: the catalog properties name no S3 location", "err", err)
		return ctx, objstore.S3{TableIO: cfg.Catalog.Type == config.CatalogREST}, nil
	}
	if err != nil {
		return nil, objstore.S3{}, usageError{fmt.Errorf("%s: catalog.properties: %w", cfg.Path, err)}
	}
	// A REST server's s3.* properties reach only iceberg-go's IO.
	s3.TableIO = cfg.Catalog.Type == config.CatalogREST
	return s3.Context(ctx), s3, nil
}

// unreachable watches a pass's outcomes, one at a time as they are printed
// (the pass does not keep them), for the case where every task failed
// because an object store could not be reached (refused, unresolvable, no
// connection) and none had changed anything before it failed: nothing was
// done, a dependency was unreachable (exit 3, as for the catalog). A task
// that committed or deleted before the store went away is a task failed
// part way (exit 1).
type unreachable struct {
	first *maintenance.Outcome
	other bool // some outcome was not such a failure
}

func (u *unreachable) add(o maintenance.Outcome) {
	switch {
	case o.Status != maintenance.StatusFailed || !errors.Is(o.Err(), objstore.ErrUnreachable) || o.Changed():
		u.other = true
	case u.first == nil:
		u.first = &o
	}
}

// err names the first table when every outcome added was such a failure;
// otherwise nil.
func (u *unreachable) err() error {
	if u.other || u.first == nil {
		return nil
	}
	return fmt.Errorf("before any work, on table %s: %w", u.first.Table, u.first.Err())
}

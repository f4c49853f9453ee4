package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
	"github.com/iceberg-maintainer/maintainer/lock/redislock"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// services are the lock and trigger-state backends the config chose: Redis
// for both (shared between replicas), or an in-process lock with the state
// in a local file (or in memory when no state_file is set).
type services struct {
	locker  lock.Locker
	lockKey func(table string) string
	state   trigger.Store
	backend string
	close   func()
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
		s.close = func() {
			if err := rl.Close(); err != nil {
				log.Warn("close redis connections", "err", err)
			}
		}
	default:
		s.locker = memlock.New()
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

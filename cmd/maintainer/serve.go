package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/metrics"
	"github.com/iceberg-maintainer/maintainer/server"
)

func newServeCmd(ctx context.Context, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "serve",
		Annotations: honours("config", "table", "log-level"),
		Short:       "Watch the selected tables and maintain them when due; serve the trigger API, the Alertmanager webhook and /metrics",
		Long: "Polls the selected tables (scheduler.poll_interval), queues those with due tasks, and runs up\n" +
			"to scheduler.max_concurrent_tables at a time, each under its lease. HTTP on server.listen:\n" +
			"POST /v1/trigger, POST /v1/alertmanager, GET /v1/status, /metrics, /healthz, /readyz.\n" +
			"SIGTERM stops taking work, lets running tasks finish within scheduler.shutdown_grace,\n" +
			"releases every lease and exits 0.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return g.serve(ctx) },
	}
}

func (g *globals) serve(ctx context.Context) error {
	reg := metrics.NewRegistry()
	ctx, e, err := g.setup(ctx, setupOptions{lock: true, registry: reg})
	if err != nil {
		return err
	}
	defer e.close()
	sc := maintenance.DefaultSchedulerConfig()
	sc.PollInterval = e.cfg.Scheduler.PollInterval
	sc.MaxConcurrentTables = e.cfg.Scheduler.MaxConcurrentTables
	sc.ShutdownGrace = e.cfg.Scheduler.ShutdownGrace
	sc.HealthInterval = e.cfg.Metrics.HealthInterval
	member, err := e.svc.fleetMember(e.cfg, g.tables, reg, e.log)
	if err != nil {
		return err
	}
	sched, err := maintenance.NewScheduler(sc, maintenance.SchedulerDeps{Runner: e.runner, Fleet: member, Metrics: e.metrics, Logger: e.log,
		Assist: e.svc.assist})
	if err != nil {
		return usageError{err}
	}
	srvCfg := server.DefaultConfig()
	srvCfg.Listen = e.cfg.Server.Listen
	srvCfg.TokenFile = e.cfg.Server.TokenFile
	srvCfg.AlertTableLabel = e.cfg.Server.Alertmanager.TableLabel
	srvCfg.AlertNamespaceLabel = e.cfg.Server.Alertmanager.NamespaceLabel
	srvCfg.AlertTaskLabel = e.cfg.Server.Alertmanager.TaskLabel
	srv, err := newServer(srvCfg, sched, server.Deps{
		Ready: map[string]func(context.Context) error{
			"catalog": func(ctx context.Context) error {
				_, err := e.cat.ListNamespaces(ctx, nil)
				return err
			},
			"lock": e.svc.ping,
			"fleet": func(context.Context) error {
				v := member.View()
				if !v.Valid {
					return fmt.Errorf("replica %s owns no table: its view of the fleet is not valid (%s)", v.Self, cmp.Or(v.Err, "no heartbeat yet"))
				}
				if v.Conflict != "" {
					// It goes on under the tables' leases; the fleet does not divide.
					return errors.New(v.Conflict)
				}
				return nil
			},
			"scheduler": func(context.Context) error {
				if sched.Stopping() {
					return errors.New("shutting down: finishing running tasks")
				}
				return nil
			},
		},
		Gatherer:   reg,
		Registerer: reg,
		Logger:     e.log,
	})
	if err != nil {
		return usageError{fmt.Errorf("%s: server: %w", e.cfg.Path, err)}
	}
	e.log.Info("serving", "listen", srvCfg.Listen, "catalog", e.cfg.Catalog.Name, "lock", e.svc.backend,
		"replica", member.ID(), "poll_interval", sc.PollInterval, "max_concurrent_tables", sc.MaxConcurrentTables)
	// The HTTP side outlives SIGTERM until the scheduler is done: during
	// the grace period /metrics and the probes still answer, /readyz and
	// the trigger endpoints say 503 (the scheduler is stopping). A server
	// that fails (port taken) stops the scheduler.
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	var grp errgroup.Group
	grp.Go(func() error {
		err := srv.Run(srvCtx)
		stopSched()
		return err
	})
	go func() {
		select {
		case <-srv.Listening():
			e.log.Info("listening", "addr", srv.Addr())
		case <-srvCtx.Done():
		}
	}()
	grp.Go(func() error {
		err := sched.Run(schedCtx)
		stopSrv()
		return err
	})
	// The member leaves the fleet at SIGTERM, while running tasks finish:
	// the others take this replica's tables at their next poll.
	grp.Go(func() error { return member.Run(schedCtx) })
	err = grp.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serve: %w", err)
	}
	e.log.Info("stopped: every lease released")
	return nil
}

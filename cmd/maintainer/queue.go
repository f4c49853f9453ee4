package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/server"
)

// newServer is the HTTP server over the scheduler: d with the scheduler as
// its queue and the registry's task names.
func newServer(cfg server.Config, sched *maintenance.Scheduler, d server.Deps) (*server.Server, error) {
	d.Queue, d.Tasks = schedulerQueue{sched}, maintenance.TaskNames()
	return server.New(cfg, d)
}

// schedulerQueue adapts the scheduler to server.Queue. It lives here because
// server sits below maintenance and must not import it.
type schedulerQueue struct{ s *maintenance.Scheduler }

var _ server.Queue = schedulerQueue{}

func (q schedulerQueue) Enqueue(ctx context.Context, r server.Request) (server.Enqueued, error) {
	enq, err := q.s.Enqueue(ctx, maintenance.TableRequest{Table: r.Table, Tasks: r.Tasks, Reason: r.Reason,
		Force: r.Force, Source: r.Source, Where: r.Where})
	if err != nil {
		return server.Enqueued{}, serverError(err)
	}
	out := server.Enqueued{Table: enq.Table, Tasks: enq.Tasks, Duplicate: enq.Duplicate, State: serverState(enq.State),
		Position: enq.Position, Held: make([]server.Held, len(enq.Held))}
	if out.State == "" {
		return server.Enqueued{}, fmt.Errorf("enqueue %s: the scheduler answered state %q, which the API does not know", r.Table, enq.State)
	}
	for i, h := range enq.Held {
		out.Held[i] = server.Held{Task: h.Task, Until: h.Until}
	}
	return out, nil
}

// serverState names each scheduler state as the API documents it, so a
// rename on either side cannot change the API's values unnoticed; "" for a
// state the API does not know.
func serverState(st string) string {
	switch st {
	case maintenance.EnqueueQueued:
		return server.StateQueued
	case maintenance.EnqueueMerged:
		return server.StateMerged
	case maintenance.EnqueueHeld:
		return server.StateHeld
	}
	return ""
}

func (q schedulerQueue) Known(table string) bool { return q.s.Known(table) }

func (q schedulerQueue) Status() any { return q.s.Status() }

// serverError makes the scheduler's sentinels the server's, which pick the
// HTTP status (400, 503), keeping the scheduler's message for the client.
func serverError(err error) error {
	for _, m := range []struct{ from, to error }{
		{maintenance.ErrUnknownTable, server.ErrUnknownTable},
		{maintenance.ErrUnknownTask, server.ErrUnknownTask},
		{maintenance.ErrStopping, server.ErrStopping},
		{maintenance.ErrBadScope, server.ErrBadRequest},
	} {
		if errors.Is(err, m.from) {
			return classified{err: err, class: m.to}
		}
	}
	return err
}

// classified is err, also matching class with errors.Is.
type classified struct{ err, class error }

func (c classified) Error() string   { return c.err.Error() }
func (c classified) Unwrap() []error { return []error{c.err, c.class} }

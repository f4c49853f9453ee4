// Package server is the HTTP face of `maintainer serve`: the trigger API, the
// Alertmanager webhook receiver, status, health, readiness and /metrics.
//
// It only enqueues work. Maintenance runs in the scheduler (package
// maintenance, a layer above this one), which the binary adapts to Queue and
// whose task names it passes in Deps.Tasks. Keeping the HTTP layer free of
// catalog, lock and table code keeps a slow or hostile client from holding a
// lease or a table open. The one read behind an answer is the queue's look-up
// of a table's rate limits (to say when a run happens), bounded by
// enqueueBudget per request: past it a request is queued and its run applies
// the limits.
//
// Endpoints:
//
//	POST /v1/trigger       one Request as JSON (where scopes compaction); 202 {"queued": [Enqueued]}: when the run happens
//	POST /v1/alertmanager  Alertmanager webhook (version "4"); 202 {"queued": [...]}
//	GET  /v1/status        Queue.Status() as JSON (queue, running tables and tasks, held, recent)
//	GET  /metrics          Prometheus exposition of Deps.Gatherer
//	GET  /healthz          200 "ok" while the process serves
//	GET  /readyz           200 when every Deps.Ready check passes, else 503 naming each failure
//
// A task stuck past its max_run_time shows in /v1/status (running_tasks[].stuck)
// and in /metrics, never in the probes: the process still serves its other
// tables, and restarting it is an operator's decision (see the runbooks).
//
// With Config.TokenFile set, the three /v1 endpoints need "Authorization:
// Bearer <token>"; /v1/status too, because it lists the managed tables and
// their failures. Probes and /metrics never need it: kubelets and Prometheus
// scrape without secrets. Errors are {"error": "..."} with 400 (bad input,
// nothing queued), 401, 405, 413, 500 or 503 (shutting down; retry).
package server

import (
	"context"
	"errors"
	"time"
)

// Queue is what the server needs from the scheduler. It is declared here, on
// the consumer side, so the scheduler's other methods stay out of reach.
type Queue interface {
	// Enqueue adds or merges a request for one table; it must be quick.
	// Errors wrap ErrUnknownTable or ErrUnknownTask (answered 400) or
	// ErrStopping (answered 503); anything else is answered 500.
	Enqueue(ctx context.Context, r Request) (Enqueued, error)
	// Known reports whether table is one of the managed tables. The
	// Alertmanager receiver checks every alert with it before enqueuing any,
	// so one bad alert does not leave a half-applied notification.
	Known(table string) bool
	// Status is the JSON document of GET /v1/status (queue, running, recent
	// runs); the server only encodes it, so it need not know its type.
	Status() any
}

// enqueueBudget bounds the queue calls behind one answer (a trigger request,
// or every table of an Alertmanager notification together).
const enqueueBudget = 5 * time.Second

// Sentinels a Queue wraps so the server can pick the HTTP status.
var (
	ErrUnknownTable = errors.New("unknown table")
	ErrUnknownTask  = errors.New("unknown task")
	ErrStopping     = errors.New("shutting down")
	// ErrBadRequest: the queue refuses the request as it stands (a where
	// on tasks it does not scope); answered 400.
	ErrBadRequest = errors.New("bad request")
)

// Sources of a Request, also the values of the source metric label.
const (
	SourceHTTP         = "http"
	SourceAlertmanager = "alertmanager"
)

// Request asks for maintenance of one table.
type Request struct {
	Table  string   `json:"table"`           // "ns.table" (dotted)
	Tasks  []string `json:"tasks,omitempty"` // some of Deps.Tasks; empty = all
	Reason string   `json:"reason,omitempty"`
	// Force skips the trigger thresholds, the rate limit and the window.
	Force bool `json:"force,omitempty"`
	// Where scopes compaction to the files that may hold matching rows,
	// in the syntax of compact.where (relative dates allowed, resolved when
	// the run starts), on top of the config's where. A bad filter is
	// answered 400 and nothing is queued.
	Where string `json:"where,omitempty"`
	// Source is set by the server ("http" or "alertmanager"), never by the
	// client, so metrics and logs cannot be spoofed.
	Source string `json:"-"`
}

// States of an Enqueued: when the requested run happens.
const (
	StateQueued = "queued" // a new queue entry, at Position
	StateMerged = "merged" // merged into the table's queued entry
	// StateHeld: every task asked for is held by its rate_limit or
	// window and is queued when both let it run (Held).
	StateHeld = "held"
)

// Enqueued is the queue's answer for one table: what is queued and when
// the run will happen.
type Enqueued struct {
	Table string `json:"table"`
	// Tasks are all that is now queued for the table; [] when every task
	// asked for is held.
	Tasks []string `json:"tasks"`
	// Duplicate: the request was merged into one already queued for the
	// table, so no extra run will happen.
	Duplicate bool   `json:"duplicate"`
	State     string `json:"state"` // StateQueued, StateMerged or StateHeld
	// Position is the table's place in the queue, 1 starting next; 0 when
	// nothing is queued now or a worker took it already.
	Position int `json:"position"`
	// Held are the tasks asked for that their rate_limit or window holds
	// back (never on a forced request), each queued at its until time.
	Held []Held `json:"held"`
}

// Held is a requested task the rate limit holds back until Until.
type Held struct {
	Task  string    `json:"task"`
	Until time.Time `json:"until"`
}

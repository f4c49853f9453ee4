package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/server"
)

// heldRunner is a maintenance.TableRunner with one table and nothing due
// whose runs last until release is closed, so that requests made meanwhile
// queue up behind the running one. Its tasks in holds are held by their
// rate limit until the time given.
type heldRunner struct {
	release chan struct{}
	started chan struct{}
	holds   map[string]time.Time
}

func (heldRunner) Tables(context.Context) ([]table.Identifier, error) {
	return []table.Identifier{{"demo", "events"}}, nil
}

func (heldRunner) DueTasks(context.Context, table.Identifier, bool) ([]string, []string, error) {
	return nil, nil, nil
}

func (heldRunner) Running() []maintenance.RunningTask { return []maintenance.RunningTask{} }

func (h heldRunner) HeldUntil(context.Context, table.Identifier, []string) (map[string]time.Time, error) {
	return h.holds, nil
}

func (h heldRunner) RunTable(ctx context.Context, _ table.Identifier, _ maintenance.Request) []maintenance.Outcome {
	select {
	case h.started <- struct{}{}:
	default:
	}
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil
}

// startScheduler runs a scheduler over a heldRunner until the test ends and
// returns it with the HTTP handler serve puts in front of it.
func startScheduler(t *testing.T) (*maintenance.Scheduler, http.Handler, heldRunner, context.CancelFunc) {
	t.Helper()
	return startSchedulerOver(t, heldRunner{release: make(chan struct{}), started: make(chan struct{}, 1)})
}

// startSchedulerOver is startScheduler over the given runner.
func startSchedulerOver(t *testing.T, runner heldRunner) (*maintenance.Scheduler, http.Handler, heldRunner, context.CancelFunc) {
	t.Helper()
	cfg := maintenance.DefaultSchedulerConfig()
	cfg.PollInterval, cfg.MaxConcurrentTables = time.Hour, 1
	sched, err := maintenance.NewScheduler(cfg, maintenance.SchedulerDeps{Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(server.DefaultConfig(), sched, server.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		close(runner.release)
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); sched.Status().Tables != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the scheduler never polled")
		}
	}
	return sched, srv.Handler(), runner, cancel
}

// postTrigger posts body to /v1/trigger and returns the status and the body.
func postTrigger(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/trigger", strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

func queuedTasks(t *testing.T, body string) ([]string, bool) {
	t.Helper()
	var resp struct {
		Queued []server.Enqueued `json:"queued"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Queued) != 1 {
		t.Fatalf("trigger answer %s: %v", body, err)
	}
	return resp.Queued[0].Tasks, resp.Queued[0].Duplicate
}

// The registry's order is the one order everywhere: the --task flag's help
// and error, the HTTP API's validation, and the scheduler's merge of
// requests named in any order. A task added to the registry shows up in all
// of them; one added anywhere else fails here.
func TestTaskOrderEverywhere(t *testing.T) {
	names := maintenance.TaskNames()
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	asJSON := func(tasks []string) string {
		b, _ := json.Marshal(map[string]any{"table": "demo.events", "tasks": tasks})
		return string(b)
	}

	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"--help"}, &out, &errOut, nil); err != nil {
		t.Fatalf("--help: %v", err)
	}
	if want := "only this task (" + strings.Join(names, "|") + ")"; !strings.Contains(out.String(), want) {
		t.Errorf("--help lacks %q:\n%s", want, out.String())
	}
	err := run(t.Context(), []string{"run", "--task", "vacuum"}, &out, &errOut, nil)
	if want := "tasks: " + strings.Join(names, ", "); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("--task vacuum: %v; want an error naming %q", err, want)
	}

	sched, h, runner, _ := startScheduler(t)
	code, body := postTrigger(t, h, asJSON([]string{"vacuum"}))
	if want := "must be one of " + strings.Join(names, ", "); code != http.StatusBadRequest || !strings.Contains(body, want) {
		t.Errorf("unknown task: %d %s; want 400 naming %q", code, body, want)
	}
	code, body = postTrigger(t, h, asJSON(reversed))
	if tasks, _ := queuedTasks(t, body); code != http.StatusAccepted || !slices.Equal(tasks, names) {
		t.Errorf("tasks %q answered %d %q; want 202 %q", reversed, code, tasks, names)
	}
	select { // the table is running; what follows queues behind it
	case <-runner.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the queued table never started")
	}

	// Requests merged one task at a time, last task first.
	for i, task := range reversed {
		code, body := postTrigger(t, h, asJSON([]string{task}))
		tasks, dup := queuedTasks(t, body)
		if want := names[len(names)-1-i:]; code != http.StatusAccepted || !slices.Equal(tasks, want) || dup != (i > 0) {
			t.Errorf("after %q: %d %q (duplicate %v); want 202 %q", reversed[:i+1], code, tasks, dup, want)
		}
	}
	enq, err := sched.Enqueue(t.Context(), maintenance.TableRequest{Table: "demo.events", Tasks: reversed, Source: "test"})
	if err != nil || !enq.Duplicate || !slices.Equal(enq.Tasks, names) {
		t.Errorf("scheduler merge of %q: %+v, %v; want %q", reversed, enq, err, names)
	}
	if q := sched.Status().Queue; len(q) != 1 || !slices.Equal(q[0].Tasks, names) {
		t.Errorf("queue %+v; want one entry of %q", q, names)
	}
}

// The adapter keeps the scheduler's messages and answers with the statuses
// serve always gave: 400 for an unknown table or task or a where the
// scheduler refuses, 503 when stopping.
func TestSchedulerQueueErrors(t *testing.T) {
	sched, h, _, stop := startScheduler(t)
	q := schedulerQueue{sched}
	_, err := q.Enqueue(t.Context(), server.Request{Table: "demo.events", Tasks: []string{"vacuum"}})
	if !errors.Is(err, server.ErrUnknownTask) || !errors.Is(err, maintenance.ErrUnknownTask) ||
		err.Error() != `unknown task "vacuum" (want one of `+strings.Join(maintenance.TaskNames(), ", ")+")" {
		t.Errorf("unknown task: %v", err)
	}
	code, body := postTrigger(t, h, `{"table": "demo.nope"}`)
	if want := `unknown table \"demo.nope\": not one of the 1 managed tables of the last poll`; code != http.StatusBadRequest || !strings.Contains(body, want) {
		t.Errorf("unknown table: %d %s; want 400 with %s", code, body, want)
	}
	code, body = postTrigger(t, h, `{"table": "demo.events", "tasks": ["expire"], "where": "dt = current_date - 1"}`)
	if want := `it scopes compaction only, and the tasks asked for (expire) do not include compact`; code != http.StatusBadRequest || !strings.Contains(body, want) {
		t.Errorf("where on expire alone: %d %s; want 400 with %s", code, body, want)
	}
	stop()
	for !sched.Stopping() {
		time.Sleep(5 * time.Millisecond)
	}
	code, body = postTrigger(t, h, `{"table": "demo.events"}`)
	if want := `table \"demo.events\": shutting down`; code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
		t.Errorf("stopping: %d %s; want 503 with %s", code, body, want)
	}
}

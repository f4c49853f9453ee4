package maintenance

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/lock/memlock"
)

// memKV is the key-value part of redislock.Locker, in memory.
type memKV struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (k *memKV) Get(_ context.Context, key string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.m[key]), nil
}

func (k *memKV) Put(_ context.Context, key string, val []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[key] = slices.Clone(val)
	return nil
}

// A request for help is seen until it is withdrawn or runs out, and other
// tables' requests are kept when one is written.
func TestAssistBoard(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewAssistBoard(&memKV{m: map[string][]byte{}}, "p:assist:default", time.Minute, func() time.Time { return now })
	a, c := table.Identifier{"db", "a"}, table.Identifier{"db", "c"}
	if err := b.ask(ctx, a, "host1/run1"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(30 * time.Second)
	if err := b.ask(ctx, c, "host2/run2"); err != nil {
		t.Fatal(err)
	}
	open, err := b.Open(ctx)
	if err != nil || len(open) != 2 {
		t.Fatalf("open %+v, %v; want both tables", open, err)
	}
	now = now.Add(45 * time.Second) // a's request ran out, c's not
	if open, _ = b.Open(ctx); len(open) != 1 || !slices.Equal(open[0].Table, c) {
		t.Fatalf("open %+v; want only db.c once db.a's request ran out", open)
	}
	if err := b.withdraw(ctx, c, "someone else"); err != nil {
		t.Fatal(err)
	}
	if open, _ = b.Open(ctx); len(open) != 1 {
		t.Fatalf("another run withdrew db.c's request: %+v", open)
	}
	if err := b.withdraw(ctx, c, "host2/run2"); err != nil {
		t.Fatal(err)
	}
	if open, _ = b.Open(ctx); len(open) != 0 {
		t.Fatalf("open %+v after withdrawal", open)
	}
}

// The poll queues a forced compaction of a table another replica asks help
// for, and nothing once the request is gone.
func TestPollQueuesTablesAskingForHelp(t *testing.T) {
	e := newEnv(t, 3) // not due by its own trigger
	board := NewAssistBoard(&memKV{m: map[string][]byte{}}, "p:assist:default", time.Minute, nil)
	r := e.runner(t, memlock.New(), nil)
	cfg := DefaultSchedulerConfig()
	cfg.PollInterval = time.Hour
	s, err := NewScheduler(cfg, SchedulerDeps{Runner: r, Metrics: r.metrics, Assist: board})
	if err != nil {
		t.Fatal(err)
	}
	s.poll(t.Context())
	if st := s.Status(); len(st.Queue) != 0 {
		t.Fatalf("queued %+v with no request for help", st.Queue)
	}
	if err := board.ask(t.Context(), e.opt.Identifier(), "host1/run1"); err != nil {
		t.Fatal(err)
	}
	s.poll(t.Context())
	st := s.Status()
	if len(st.Queue) != 1 || !slices.Equal(st.Queue[0].Tasks, []string{TaskCompact}) || !st.Queue[0].Force ||
		!slices.Contains(st.Queue[0].Sources, "assist") {
		t.Fatalf("queue %+v; want a forced compaction from assist", st.Queue)
	}
	if got := counter(t, s.metrics.triggers.WithLabelValues("assist", "queued")); got != 1 {
		t.Errorf("trigger_requests_total{assist,queued} = %v", got)
	}
}

// A request for help with a table this replica does not manage (outside its
// selection, or gone from the catalog) is not queued: the board is the
// catalog's, shared by replicas whose selections differ.
func TestPollHelpsOnlyManagedTables(t *testing.T) {
	e := newEnv(t, 3)
	board := NewAssistBoard(&memKV{m: map[string][]byte{}}, "p:assist:default", time.Minute, nil)
	r := e.runner(t, memlock.New(), nil)
	r.selected = func(string) bool { return false } // this replica selects no table
	cfg := DefaultSchedulerConfig()
	cfg.PollInterval = time.Hour
	s, err := NewScheduler(cfg, SchedulerDeps{Runner: r, Metrics: r.metrics, Assist: board})
	if err != nil {
		t.Fatal(err)
	}
	if err := board.ask(t.Context(), e.opt.Identifier(), "host1/run1"); err != nil {
		t.Fatal(err)
	}
	s.poll(t.Context())
	if st := s.Status(); len(st.Queue) != 0 {
		t.Fatalf("queued %+v for a table outside the selection", st.Queue)
	}
}

package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iceberg-maintainer/maintainer/fleet"
	"github.com/iceberg-maintainer/maintainer/metrics"
)

// fleetRunner is a TableRunner over n tables that are always due; it
// records which tables each call saw.
type fleetRunner struct {
	idents []table.Identifier
	mu     sync.Mutex
	due    map[string]int // DueTasks calls by table
	ran    map[string]int
}

func newFleetRunner(n int) *fleetRunner {
	r := &fleetRunner{due: map[string]int{}, ran: map[string]int{}}
	for i := range n {
		r.idents = append(r.idents, table.Identifier{"db", fmt.Sprintf("t%03d", i)})
	}
	return r
}

func (r *fleetRunner) Tables(context.Context) ([]table.Identifier, error) { return r.idents, nil }
func (r *fleetRunner) DueTasks(_ context.Context, ident table.Identifier, _ bool) ([]string, []string, error) {
	r.mu.Lock()
	r.due[strings.Join(ident, ".")]++
	r.mu.Unlock()
	return []string{TaskCompact}, []string{"due"}, nil
}
func (r *fleetRunner) RunTable(_ context.Context, ident table.Identifier, req Request) []Outcome {
	r.mu.Lock()
	r.ran[strings.Join(ident, ".")]++
	r.mu.Unlock()
	return []Outcome{{Table: strings.Join(ident, "."), Task: TaskCompact, Status: StatusSucceeded}}
}
func (r *fleetRunner) HeldUntil(context.Context, table.Identifier, []string) (map[string]time.Time, error) {
	return nil, nil
}
func (r *fleetRunner) Running() []RunningTask { return nil }

// switchable is a fleet backend that can be made to fail.
type switchable struct {
	fleet.Backend
	mu   sync.Mutex
	down bool
}

func (b *switchable) fail(down bool) { b.mu.Lock(); b.down = down; b.mu.Unlock() }
func (b *switchable) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return errors.New("redis: connection refused")
	}
	return nil
}
func (b *switchable) Heartbeat(ctx context.Context, id, instance string, ttl time.Duration) (string, error) {
	if err := b.err(); err != nil {
		return "", err
	}
	return b.Backend.Heartbeat(ctx, id, instance, ttl)
}

// fleetClock is the tests' time, moved by hand.
type fleetClock struct{ ns atomic.Int64 }

func newFleetClock() *fleetClock {
	c := &fleetClock{}
	c.ns.Store(time.Unix(1_000_000, 0).UnixNano())
	return c
}

func (c *fleetClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fleetClock) add(d time.Duration) { c.ns.Add(int64(d)) }

func fleetScheduler(t *testing.T, r TableRunner, id string, b fleet.Backend, c *fleetClock, m *Metrics) *Scheduler {
	t.Helper()
	mb, err := fleet.New(fleet.Config{ID: id, TTL: 30 * time.Second}, fleet.Deps{Backend: b, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultSchedulerConfig()
	cfg.PollInterval = time.Hour
	s, err := NewScheduler(cfg, SchedulerDeps{Runner: r, Fleet: mb, Metrics: m, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// measuredScheduler is replica "a" over n tables, after a poll, with a
// health gauge set for every table it owns.
func measuredScheduler(t *testing.T, n int, b fleet.Backend, c *fleetClock) (*Scheduler, *fleetRunner, *Metrics) {
	t.Helper()
	r := newFleetRunner(n)
	m := NewMetrics(prometheus.NewRegistry(), metrics.NewTables(true, 100))
	a := fleetScheduler(t, r, "a", b, c, m)
	a.poll(t.Context())
	for _, id := range r.idents {
		if name := strings.Join(id, "."); a.owns(name) {
			m.health(Health{Table: name, DataFiles: 3}, c.now())
		}
	}
	return a, r, m
}

func queued(s *Scheduler) map[string]bool {
	out := map[string]bool{}
	for _, e := range s.Status().Queue {
		out[e.Table] = true
	}
	return out
}

// Two replicas divide the tables: each table is decided (loaded) and queued
// by exactly one of them; the status says who owns how many.
func TestSchedulersDivideTables(t *testing.T) {
	c := newFleetClock()
	b := fleet.NewLocal(c.now)
	ra, rz := newFleetRunner(60), newFleetRunner(60)
	a := fleetScheduler(t, ra, "a", b, c, nil)
	z := fleetScheduler(t, rz, "z", b, c, nil)
	_ = z.fleet.Refresh(t.Context()) // both members joined before the polls
	a.poll(t.Context())
	z.poll(t.Context())
	qa, qz := queued(a), queued(z)
	if len(qa) == 0 || len(qz) == 0 || len(qa)+len(qz) != 60 {
		t.Fatalf("queued %d by a and %d by z; want a share each, 60 in all", len(qa), len(qz))
	}
	for name := range qa {
		if qz[name] {
			t.Errorf("%s queued by both replicas", name)
		}
		if rz.due[name] != 0 {
			t.Errorf("%s (a's) was loaded by z", name)
		}
	}
	for name := range qz {
		if ra.due[name] != 0 {
			t.Errorf("%s (z's) was loaded by a", name)
		}
	}
	st := a.Status()
	if st.Fleet == nil || st.Fleet.Replica != "a" || st.Fleet.OwnedTables != len(qa) || len(st.Fleet.Members) != 2 || !st.Fleet.Valid {
		t.Errorf("a's fleet status %+v; want replica a, 2 members, %d owned", st.Fleet, len(qa))
	}
	if st.Tables != 60 {
		t.Errorf("a knows %d tables; want all 60 (for requests over HTTP)", st.Tables)
	}
}

// A table that moved to another replica while queued by a poll is dropped
// from the queue; a requested one runs here anyway (under its lease).
func TestQueuedTableThatMovedIsDropped(t *testing.T) {
	c := newFleetClock()
	b := fleet.NewLocal(c.now)
	r := newFleetRunner(40)
	a := fleetScheduler(t, r, "a", b, c, nil)
	a.poll(t.Context()) // alone: every table queued
	if n := len(queued(a)); n != 40 {
		t.Fatalf("a alone queued %d tables; want 40", n)
	}
	mz, err := fleet.New(fleet.Config{ID: "z", TTL: 30 * time.Second}, fleet.Deps{Backend: b, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	_ = mz.Refresh(t.Context())
	_ = a.fleet.Refresh(t.Context())
	var zs []string
	for name := range queued(a) {
		if !a.owns(name) {
			zs = append(zs, name)
		}
	}
	if len(zs) == 0 {
		t.Fatal("z took no table")
	}
	if _, err := a.Enqueue(t.Context(), TableRequest{Table: zs[0], Source: "http"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var got []string
	for range 40 - len(zs) + 1 {
		e := a.next(ctx)
		got = append(got, e.Table)
		a.mu.Lock()
		delete(a.running, e.Table)
		a.mu.Unlock()
	}
	cancel()
	if e := a.next(ctx); e != nil { // drops what is left, then sees ctx done
		t.Errorf("a took %s once its own tables were done", e.Table)
	}
	for _, name := range got {
		if !a.owns(name) && name != zs[0] {
			t.Errorf("a took %s from its queue: z owns it and nobody asked for it here", name)
		}
	}
	if len(a.Status().Queue) != 0 {
		t.Errorf("left in the queue: %+v", a.Status().Queue)
	}
}

// A replica whose view of the fleet is no longer valid (the backend
// unreachable for longer than a TTL) polls nothing and drops its health
// gauges: it never maintains everything on its own; once the backend is
// back it takes its share again.
func TestInvalidViewOwnsNothing(t *testing.T) {
	c := newFleetClock()
	b := &switchable{Backend: fleet.NewLocal(c.now)}
	a, r, m := measuredScheduler(t, 10, b, c)
	a.mu.Lock()
	a.queue = nil
	a.mu.Unlock()
	b.fail(true)
	c.add(10 * time.Second)
	a.poll(t.Context())
	if n := len(queued(a)); n != 10 {
		t.Fatalf("within the TTL the last view holds: %d queued; want 10", n)
	}
	a.mu.Lock()
	a.queue = nil
	a.mu.Unlock()
	c.add(25 * time.Second)
	before := r.due["db.t000"]
	a.poll(t.Context())
	if n := len(queued(a)); n != 0 || r.due["db.t000"] != before {
		t.Fatalf("past the TTL with the backend down: %d queued, %d loads; want nothing", n, r.due["db.t000"]-before)
	}
	if n := testutil.CollectAndCount(m.healthFiles); n != 0 {
		t.Errorf("%d health series left; want none", n)
	}
	if got := testutil.ToFloat64(m.owned); got != 0 {
		t.Errorf("owned_tables %v; want 0", got)
	}
	if st := a.Status().Fleet; st.Valid || st.OwnedTables != 0 || !strings.Contains(st.Error, "connection refused") {
		t.Errorf("status %+v; want not valid, 0 owned, the error", st)
	}
	b.fail(false)
	a.poll(t.Context())
	if n := len(queued(a)); n != 10 || testutil.ToFloat64(m.owned) != 10 {
		t.Errorf("backend back: %d queued; want 10", n)
	}
}

// Health gauges of tables another replica took are dropped at the next
// poll; those still owned stay.
func TestHealthOfMovedTablesDropped(t *testing.T) {
	c := newFleetClock()
	b := fleet.NewLocal(c.now)
	a, r, m := measuredScheduler(t, 30, b, c)
	mz, _ := fleet.New(fleet.Config{ID: "z", TTL: 30 * time.Second}, fleet.Deps{Backend: b, Now: c.now})
	_ = mz.Refresh(t.Context())
	// One of the tables that move to z ran here just now (a request over
	// HTTP): its counters stay for a while, its health gauges go.
	var moved string
	for _, id := range r.idents {
		if name := strings.Join(id, "."); fleet.Owner([]string{"a", "z"}, name) == "z" {
			moved = name
			break
		}
	}
	m.outcome(Outcome{Table: moved, Task: TaskCompact, Status: StatusSucceeded}, c.now())
	a.mu.Lock()
	a.queue = nil
	a.ranAt[moved] = c.now()
	a.mu.Unlock()
	a.poll(t.Context())
	if got := testutil.ToFloat64(m.runs.WithLabelValues(moved, TaskCompact, ResultSuccess)); got != 1 {
		t.Errorf("runs_total of %s, which ran here before it moved: %v; want 1 (kept for a while)", moved, got)
	}
	owned := a.Status().Fleet.OwnedTables
	if owned == 0 || owned == 30 {
		t.Fatalf("a owns %d of 30 after z joined", owned)
	}
	if n := testutil.CollectAndCount(m.healthFiles); n != owned {
		t.Errorf("%d table_data_files series; want %d (the owned tables')", n, owned)
	}
	for _, id := range r.idents {
		name := strings.Join(id, ".")
		_, has := a.healthAt[name]
		if has != a.owns(name) {
			t.Errorf("%s: health tracked %v, owned %v", name, has, a.owns(name))
		}
	}
	if got := testutil.ToFloat64(m.owned); got != float64(owned) {
		t.Errorf("owned_tables %v; want %d", got, owned)
	}
	// Past seriesGrace the moved table's series are gone too.
	c.add(seriesGrace + time.Second)
	_ = mz.Refresh(t.Context())
	a.poll(t.Context())
	if n := testutil.CollectAndCount(m.runs); n != 0 {
		t.Errorf("%d runs_total series after the grace; want 0", n)
	}
}

package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func tables(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("db.t%04d", i)
	}
	return out
}

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("maintainer-%d-7f3a%d", i, i)
	}
	return out
}

// Every member gets about 1/n of the tables.
func TestOwnerSpreadsTables(t *testing.T) {
	const n = 4
	ms, ts := members(n), tables(4000)
	count := map[string]int{}
	for _, tb := range ts {
		count[Owner(ms, tb)]++
	}
	for _, m := range ms {
		if got, want := count[m], len(ts)/n; math.Abs(float64(got-want)) > 0.1*float64(want) {
			t.Errorf("%s owns %d of %d tables; want about %d", m, got, len(ts), want)
		}
	}
}

// Adding a member moves about 1/(n+1) of the tables, all of them to the new
// member; removing one moves only its own tables.
func TestOwnerStableUnderMembership(t *testing.T) {
	ts := tables(4000)
	for n := 1; n <= 5; n++ {
		before := members(n)
		after := members(n + 1)
		newcomer := after[n]
		moved := 0
		for _, tb := range ts {
			a, b := Owner(before, tb), Owner(after, tb)
			if a == b {
				continue
			}
			moved++
			if b != newcomer {
				t.Fatalf("n=%d: %s moved from %s to %s, not to the new member", n, tb, a, b)
			}
		}
		want := float64(len(ts)) / float64(n+1)
		if math.Abs(float64(moved)-want) > 0.15*want {
			t.Errorf("adding member %d moved %d of %d tables; want about %.0f", n+1, moved, len(ts), want)
		}
		// And removing it again moves back exactly those.
		for _, tb := range ts {
			if Owner(after, tb) != newcomer && Owner(after, tb) != Owner(before, tb) {
				t.Fatalf("n=%d: %s changed owner among the old members", n, tb)
			}
		}
	}
	// Order of the list does not matter.
	ms := members(3)
	rev := []string{ms[2], ms[0], ms[1]}
	for _, tb := range ts[:200] {
		if Owner(ms, tb) != Owner(rev, tb) {
			t.Fatalf("owner of %s depends on the order of members", tb)
		}
	}
	if Owner(nil, "db.x") != "" {
		t.Error("no members: want no owner")
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newMember(t *testing.T, id string, b Backend, c *clock, m *Metrics) *Member {
	t.Helper()
	mb, err := New(Config{ID: id, TTL: 30 * time.Second}, Deps{Backend: b, Now: c.now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return mb
}

// Two members over one backend divide the tables exactly; one that stops
// heartbeating is gone once its TTL ran out, and the other owns everything.
func TestMembersDivideAndExpire(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	b := NewLocal(c.now)
	ctx := t.Context()
	a, z := newMember(t, "a", b, c, nil), newMember(t, "z", b, c, nil)
	for _, m := range []*Member{a, z, a} {
		if err := m.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ts := tables(500)
	for _, tb := range ts {
		if a.Owns(tb) == z.Owns(tb) {
			t.Fatalf("%s: owned by a=%v, z=%v; want exactly one", tb, a.Owns(tb), z.Owns(tb))
		}
	}
	// z dies: after its TTL a's next round sees only itself.
	c.add(29 * time.Second)
	_ = a.Refresh(ctx)
	if got := a.View().Members; len(got) != 2 {
		t.Fatalf("before z's TTL ran out a sees %v", got)
	}
	c.add(2 * time.Second)
	_ = a.Refresh(ctx)
	if got := a.View().Members; len(got) != 1 || got[0] != "a" {
		t.Fatalf("after z's TTL a sees %v; want [a]", got)
	}
	for _, tb := range ts {
		if !a.Owns(tb) {
			t.Fatalf("a does not own %s alone", tb)
		}
	}
	// z's own view expired too: it owns nothing without a new round.
	if z.View().Valid || z.Owns(ts[0]) {
		t.Error("z kept owning tables past its TTL")
	}
}

// A member that leaves is gone at once for the others, and owns nothing.
func TestLeaveHandsOverAtOnce(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	b := NewLocal(c.now)
	a, z := newMember(t, "a", b, c, nil), newMember(t, "z", b, c, nil)
	_ = a.Refresh(t.Context())
	_ = z.Refresh(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := z.Run(ctx); err != nil {
		t.Fatal(err)
	}
	_ = a.Refresh(t.Context())
	if got := a.View().Members; len(got) != 1 {
		t.Fatalf("after z left a sees %v", got)
	}
	if z.View().Valid || z.Refresh(t.Context()) == nil {
		t.Error("z still in the fleet after leaving")
	}
}

// failing wraps a backend; while down, every call fails.
type failing struct {
	Backend
	mu   sync.Mutex
	down bool
}

var errDown = errors.New("connection refused")

func (f *failing) set(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }
func (f *failing) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	return nil
}
func (f *failing) Heartbeat(ctx context.Context, id, instance string, ttl time.Duration) (string, error) {
	if err := f.err(); err != nil {
		return "", err
	}
	return f.Backend.Heartbeat(ctx, id, instance, ttl)
}
func (f *failing) Members(ctx context.Context) ([]string, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Backend.Members(ctx)
}

// A member that cannot reach the backend keeps its last view for at most one
// TTL after its last good round, then owns nothing (never everything), says
// so in its view and metrics, and owns its share again once it reaches the
// backend.
func TestUnreachableBackendOwnsNothingAfterTTL(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	f := &failing{Backend: NewLocal(c.now)}
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	a := newMember(t, "a", f, c, met)
	if err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !a.Owns("db.t0001") {
		t.Fatal("a fleet of one does not own its table")
	}
	f.set(true)
	c.add(10 * time.Second)
	if err := a.Refresh(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("Refresh with the backend down: %v", err)
	}
	if v := a.View(); !v.Valid || !a.Owns("db.t0001") || !strings.Contains(v.Err, "connection refused") {
		t.Fatalf("within the TTL the last view should hold, with the error: %+v", v)
	}
	c.add(21 * time.Second) // 31s after the last good round, TTL 30s
	_ = a.Refresh(t.Context())
	v := a.View()
	if v.Valid || len(v.Members) != 0 {
		t.Fatalf("past the TTL: %+v; want not valid, no members", v)
	}
	for _, tb := range tables(100) {
		if a.Owns(tb) {
			t.Fatalf("owns %s with no valid view", tb)
		}
	}
	if got := testutil.ToFloat64(met.errors); got != 2 {
		t.Errorf("membership errors %v; want 2", got)
	}
	if got := testutil.ToFloat64(met.seen); got != 0 {
		t.Errorf("members seen %v with no valid view; want 0", got)
	}
	f.set(false)
	if err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !a.Owns("db.t0001") || testutil.ToFloat64(met.seen) != 1 {
		t.Error("did not recover once the backend was back")
	}
}

// Before its first round a member owns nothing.
func TestNoRoundNoTables(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	a := newMember(t, "a", NewLocal(c.now), c, nil)
	if a.Owns("db.x") || a.View().Valid {
		t.Error("owns a table before joining")
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{ID: " ", TTL: 0}.Validate()
	if err == nil || !strings.Contains(err.Error(), "replica_id") || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("Validate: %v; want both fields", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	a, b := DefaultID(), DefaultID()
	if a == b {
		t.Errorf("two default ids are equal: %s", a)
	}
}

// listFails wraps a backend whose listing fails while its heartbeats work
// (a server that refuses the listing's script).
type listFails struct{ Backend }

func (listFails) Members(context.Context) ([]string, error) { return nil, errDown }

// A member that cannot list the members owns nothing once its view expires,
// and then it must not be counted by the others either: every table has an
// owner a TTL after its last good round.
func TestMemberThatCannotListIsNotCounted(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	b := NewLocal(c.now)
	a, z := newMember(t, "a", b, c, nil), newMember(t, "z", listFails{b}, c, nil)
	ctx := t.Context()
	for i := 0; i < 7; i++ { // rounds every TTL/3 for over two TTLs
		_ = z.Refresh(ctx)
		if err := a.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		c.add(10 * time.Second)
	}
	_ = z.Refresh(ctx)
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if z.View().Valid {
		t.Fatal("z's view is valid without a listing")
	}
	for _, tb := range tables(200) {
		if !a.Owns(tb) && !z.Owns(tb) {
			t.Fatalf("%s is nobody's: a sees %v, z cannot list", tb, a.View().Members)
		}
	}
}

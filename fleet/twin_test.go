package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iceberg-maintainer/maintainer/fleet"
	"github.com/iceberg-maintainer/maintainer/internal/redistest"
	"github.com/iceberg-maintainer/maintainer/lock/redislock"
)

// twin is one process's member of the fleet: its own metrics and log.
type twin struct {
	m   *fleet.Member
	met *fleet.Metrics
	reg *prometheus.Registry
	log *bytes.Buffer // Refresh logs on the test's goroutine
}

func newTwin(t *testing.T, id string, b fleet.Backend, ttl time.Duration, now func() time.Time) *twin {
	t.Helper()
	tw := &twin{reg: prometheus.NewRegistry(), log: &bytes.Buffer{}}
	tw.met = fleet.NewMetrics(tw.reg)
	m, err := fleet.New(fleet.Config{ID: id, TTL: ttl}, fleet.Deps{Backend: b, Metrics: tw.met, Now: now,
		Logger: slog.New(slog.NewTextHandler(tw.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tw.m = m
	return tw
}

func (tw *twin) conflicts(t *testing.T) float64 {
	t.Helper()
	mfs, err := tw.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "iceberg_maintainer_fleet_replica_id_conflicts_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no iceberg_maintainer_fleet_replica_id_conflicts_total")
	return 0
}

// expectTwins checks that every member says its id is shared: the view's
// conflict names the id, the counter counted it, and one error was logged.
func expectTwins(t *testing.T, id string, ts ...*twin) {
	t.Helper()
	for i, tw := range ts {
		v := tw.m.View()
		if !strings.Contains(v.Conflict, "replica id "+id+" is heartbeated by another process") {
			t.Errorf("process %d: view conflict %q; want it to name the shared id %s", i, v.Conflict, id)
		}
		if n := tw.conflicts(t); n < 1 {
			t.Errorf("process %d: %v conflicts counted; want at least 1", i, n)
		}
		if n := strings.Count(tw.log.String(), "level=ERROR msg=\"another process heartbeats this replica's id"); n != 1 {
			t.Errorf("process %d: %d error lines for the shared id; want one:\n%s", i, n, tw.log)
		}
		// The twins count as one member and keep working under the
		// tables' leases: each owns that member's share.
		if !v.Valid || len(v.Members) != 1 || !v.Owns("db.t") {
			t.Errorf("process %d: view %+v; want valid, one member, owning the table", i, v)
		}
	}
}

// Two processes given one replica_id over a real redis-server: each finds
// the other's instance in the id's heartbeat at its second round and says
// so; a process that restarts under its id (its predecessor's heartbeat
// still alive) does not.
func TestSharedReplicaIDDetectedOnRealRedis(t *testing.T) {
	addr := redistest.Need(t)
	l, err := redislock.New(redislock.Config{Addrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	b := l.Membership(fmt.Sprintf("fleettest:%s:%d:fleet", t.Name(), time.Now().UnixNano()))
	ctx := t.Context()
	const ttl = 30 * time.Second

	a1, a2 := newTwin(t, "same", b, ttl, nil), newTwin(t, "same", b, ttl, nil)
	for range 3 {
		for _, tw := range []*twin{a1, a2} {
			if err := tw.m.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	expectTwins(t, "same", a1, a2)

	// A restart: the first process stops without leaving (its heartbeat
	// lives on) and a new one takes its id.
	r1 := newTwin(t, "restarted", b, ttl, nil)
	if err := r1.m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := newTwin(t, "restarted", b, ttl, nil)
	for range 3 {
		if err := r2.m.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if v := r2.m.View(); v.Conflict != "" || r2.conflicts(t) != 0 || strings.Contains(r2.log.String(), "ERROR") {
		t.Errorf("a restarted process sees a conflict %q (%v counted):\n%s", v.Conflict, r2.conflicts(t), r2.log)
	}
}

// In process, with a clock: the conflict is seen by both twins, holds while
// the other keeps heartbeating, and clears a TTL after the other stopped;
// distinct ids never conflict.
func TestSharedReplicaIDClearsOnceTheOtherStops(t *testing.T) {
	var mu sync.Mutex
	at := time.Unix(1_000_000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
	add := func(d time.Duration) { mu.Lock(); at = at.Add(d); mu.Unlock() }
	b := fleet.NewLocal(now)
	ctx := context.Background()
	const ttl = 30 * time.Second
	x, y, other := newTwin(t, "r", b, ttl, now), newTwin(t, "r", b, ttl, now), newTwin(t, "s", b, ttl, now)
	for range 4 {
		for _, tw := range []*twin{x, y, other} {
			if err := tw.m.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		add(ttl / 3)
	}
	for _, tw := range []*twin{x, y} {
		if v := tw.m.View(); !strings.Contains(v.Conflict, "replica id r ") {
			t.Errorf("conflict %q; want it to name r", v.Conflict)
		}
		if n := tw.conflicts(t); n < 3 {
			t.Errorf("%v conflicts counted over 4 rounds; want at least 3", n)
		}
	}
	if v := other.m.View(); v.Conflict != "" || other.conflicts(t) != 0 {
		t.Errorf("a replica with its own id sees a conflict: %q", v.Conflict)
	}
	// y stops; x's conflict lasts until a TTL after it was last seen.
	for range 4 {
		if err := x.m.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		add(ttl / 3)
	}
	if v := x.m.View(); v.Conflict != "" {
		t.Errorf("a TTL after the other process stopped: conflict %q; want none", v.Conflict)
	}
}

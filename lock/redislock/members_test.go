package redislock

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/lock"
)

// On a real redis-server: heartbeats, listing, leaving, and a heartbeat that
// expires with its TTL on the server's clock.
func TestMembershipRealRedis(t *testing.T) {
	t.Parallel()
	addr := needRedis(t)
	m := newLocker(t, addr).Membership(testKey(t, ":fleet"))
	ctx := ctxFor(t)
	for _, id := range []string{"b", "a"} {
		if _, err := m.Heartbeat(ctx, id, "i1", 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Heartbeat(ctx, "short", "i1", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// A heartbeat says which instance wrote the one it replaced.
	for _, step := range []struct{ instance, prev string }{{"i1", "i1"}, {"i2", "i1"}, {"i2", "i2"}} {
		if prev, err := m.Heartbeat(ctx, "a", step.instance, 10*time.Second); err != nil || prev != step.prev {
			t.Fatalf("heartbeat of a by %s: replaced %q, %v; want %q", step.instance, prev, err, step.prev)
		}
	}
	if prev, err := m.Heartbeat(ctx, "new", "i1", 10*time.Second); err != nil || prev != "" {
		t.Fatalf("first heartbeat of new: replaced %q, %v; want none", prev, err)
	}
	if err := m.Leave(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	got, err := m.Members(ctx)
	if err != nil || !slices.Equal(got, []string{"a", "b", "short"}) {
		t.Fatalf("Members: %v, %v; want [a b short]", got, err)
	}
	time.Sleep(500 * time.Millisecond) // the server expires "short"
	if err := m.Leave(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	got, err = m.Members(ctx)
	if err != nil || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Members after expiry and leave: %v, %v; want [a]", got, err)
	}
}

// On miniredis (whose clock the test moves): a member that stops
// heartbeating is gone after its TTL, one that keeps heartbeating stays.
func TestMembershipExpiry(t *testing.T) {
	ms, addrs := miniNodes(t, 1)
	m := newLocker(t, addrs...).Membership("p:fleet:default")
	ctx := ctxFor(t)
	for _, id := range []string{"alive", "dead"} {
		if _, err := m.Heartbeat(ctx, id, "i1", 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		ms[0].FastForward(20 * time.Second)
		if _, err := m.Heartbeat(ctx, "alive", "i1", 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Members(ctx)
	if err != nil || !slices.Equal(got, []string{"alive"}) {
		t.Fatalf("Members: %v, %v; want [alive]", got, err)
	}
	// The index was cleaned of the dead member.
	if ids, _ := ms[0].Members("p:fleet:default"); !slices.Equal(ids, []string{"alive"}) {
		t.Errorf("index holds %v; want [alive]", ids)
	}
}

// Three nodes: one down changes nothing; a member that reaches only a
// minority of nodes does not count while every node answers; with a quorum
// down every call fails with ErrUnavailable.
func TestMembershipQuorum(t *testing.T) {
	ms, addrs := miniNodes(t, 3)
	m := newLocker(t, addrs...).Membership("p:fleet:default")
	ctx := ctxFor(t)
	if _, err := m.Heartbeat(ctx, "a", "i1", time.Minute); err != nil {
		t.Fatal(err)
	}
	ms[0].SetError("LOADING")
	if _, err := m.Heartbeat(ctx, "b", "i1", time.Minute); err != nil {
		t.Fatalf("heartbeat with 1 of 3 nodes down: %v", err)
	}
	got, err := m.Members(ctx)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Members with 1 of 3 down: %v, %v; want [a b]", got, err)
	}
	ms[0].SetError("")
	// "c" reached only node 2 (planted behind the Locker's back).
	if err := ms[2].Set("p:fleet:default:member:c", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := ms[2].SAdd("p:fleet:default", "c"); err != nil {
		t.Fatal(err)
	}
	got, err = m.Members(ctx)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Members with c on a minority: %v, %v; want [a b]", got, err)
	}
	ms[0].SetError("LOADING")
	ms[1].SetError("LOADING")
	if _, err := m.Heartbeat(ctx, "a", "i1", time.Minute); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("heartbeat with 2 of 3 down: %v; want ErrUnavailable", err)
	}
	if _, err := m.Members(ctx); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("members with 2 of 3 down: %v; want ErrUnavailable", err)
	}
	if err := m.Leave(ctx, "a"); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("leave with 2 of 3 down: %v; want ErrUnavailable", err)
	}
}

// On several nodes, a heartbeat names another instance only when a quorum
// of them held one: a pod restarted under its old id whose first heartbeat
// missed a node finds its dead predecessor's heartbeat there at the next
// one, which is no twin (a live twin writes every node it reaches).
func TestMembershipTwinNeedsAQuorum(t *testing.T) {
	ms, addrs := miniNodes(t, 3)
	m := newLocker(t, addrs...).Membership("p:fleet:default")
	ctx := ctxFor(t)
	if _, err := m.Heartbeat(ctx, "a", "dead", time.Minute); err != nil {
		t.Fatal(err)
	}
	ms[2].SetError("LOADING")
	if prev, err := m.Heartbeat(ctx, "a", "new", time.Minute); err != nil || prev != "dead" {
		t.Fatalf("first heartbeat of the restarted process: replaced %q, %v; want its predecessor", prev, err)
	}
	ms[2].SetError("")
	if prev, err := m.Heartbeat(ctx, "a", "new", time.Minute); err != nil || prev != "new" {
		t.Fatalf("second heartbeat, the predecessor's left on 1 of 3 nodes: replaced %q, %v; want its own", prev, err)
	}
	// A live twin writes every node: found.
	if _, err := m.Heartbeat(ctx, "a", "twin", time.Minute); err != nil {
		t.Fatal(err)
	}
	if prev, err := m.Heartbeat(ctx, "a", "new", time.Minute); err != nil || prev != "twin" {
		t.Fatalf("after a twin's heartbeat: replaced %q, %v; want the twin", prev, err)
	}
	// A twin that reached only 2 of 3 nodes (a quorum): found.
	ms[0].SetError("LOADING")
	if _, err := m.Heartbeat(ctx, "a", "twin", time.Minute); err != nil {
		t.Fatal(err)
	}
	ms[0].SetError("")
	if prev, err := m.Heartbeat(ctx, "a", "new", time.Minute); err != nil || prev != "twin" {
		t.Fatalf("after a twin's heartbeat on 2 of 3 nodes: replaced %q, %v; want the twin", prev, err)
	}
}

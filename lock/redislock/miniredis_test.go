package redislock

// Fast unit tests on miniredis (an in-process Redis): error replies, which
// a real redis-server is hard to make give on demand, and the error shapes
// redsync returns, which classify depends on.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/iceberg-maintainer/maintainer/lock"
)

func miniNodes(t *testing.T, n int) ([]*miniredis.Miniredis, []string) {
	ms := make([]*miniredis.Miniredis, n)
	addrs := make([]string, n)
	for i := range ms {
		ms[i] = miniredis.RunT(t)
		addrs[i] = ms[i].Addr()
	}
	return ms, addrs
}

// A node answering with errors (loading, read-only replica, bad password)
// counts as unreachable, not as a holder.
func TestErrorRepliesAreUnavailable(t *testing.T) {
	ms, addrs := miniNodes(t, 1)
	l := newLocker(t, addrs...)
	ms[0].SetError("LOADING Redis is loading the dataset in memory")
	_, err := l.TryLock(ctxFor(t), "k", time.Second)
	if !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrBusy) || !strings.Contains(err.Error(), "LOADING") {
		t.Fatalf("TryLock on a loading node: %v, want ErrUnavailable with the reply", err)
	}
	if err := l.Ping(ctxFor(t)); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Ping on a loading node: %v, want ErrUnavailable", err)
	}
	if _, err := l.Get(ctxFor(t), "kv"); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Get on a loading node: %v, want ErrUnavailable", err)
	}
	ms[0].SetError("")
	if _, err := l.TryLock(ctxFor(t), "k", time.Second); err != nil {
		t.Errorf("TryLock once the node recovered: %v", err)
	}
}

func TestErrorRepliesOnMinorityAndMajority(t *testing.T) {
	ms, addrs := miniNodes(t, 3)
	l := newLocker(t, addrs...)
	ms[0].SetError("READONLY You can't write against a read only replica.")
	h, err := l.TryLock(ctxFor(t), "k", time.Second)
	if err != nil {
		t.Fatalf("TryLock with 1 of 3 nodes failing: %v", err)
	}
	ms[1].SetError("READONLY You can't write against a read only replica.")
	err = h.Extend(ctxFor(t))
	if !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrLost) {
		t.Fatalf("Extend with 2 of 3 nodes failing: %v, want ErrUnavailable (not lost: nothing says another holder has it)", err)
	}
	for _, a := range addrs[:2] {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("Extend error %q does not name failing node %s", err, a)
		}
	}
}

// Release of a lock whose key expired on every node: ErrLost, from redsync's
// ErrLockAlreadyExpired.
func TestReleaseAfterExpiryIsLost(t *testing.T) {
	ms, addrs := miniNodes(t, 3)
	l := newLocker(t, addrs...)
	h, err := l.TryLock(ctxFor(t), "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		m.FastForward(2 * time.Second) // miniredis expires keys on its own clock
	}
	if err := h.Release(ctxFor(t)); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release after expiry: %v, want ErrLost", err)
	}
}

// The shapes classify relies on, from redsync itself: per-node errors joined
// with errors.Join, and *ErrTaken / *ErrNodeTaken / *RedisError as pointers
// whose value types do not match errors.As.
func TestRedsyncErrorShapes(t *testing.T) {
	ms, addrs := miniNodes(t, 3)
	var rs []*redis.Client
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		rs = append(rs, c)
	}
	r := redsync.New(goredis.NewPool(rs[0]), goredis.NewPool(rs[1]), goredis.NewPool(rs[2]))
	for _, c := range rs {
		c.Set(ctxFor(t), "k", "other", time.Minute)
	}
	err := r.NewMutex("k", redsync.WithTries(1)).TryLockContext(ctxFor(t))
	var taken *redsync.ErrTaken
	if !errors.As(err, &taken) || len(taken.Nodes) != 3 {
		t.Fatalf("take of a key held on all nodes: %#v, want *redsync.ErrTaken on 3 nodes", err)
	}
	var takenValue redsync.ErrTaken
	if errors.As(err, &takenValue) {
		t.Error("errors.As matched the value type redsync.ErrTaken; classify's pointer handling is no longer needed")
	}

	ms[0].Close()
	ms[1].Close()
	rs[2].Del(ctxFor(t), "k")
	err = r.NewMutex("k", redsync.WithTries(1)).TryLockContext(ctxFor(t))
	var nodeErr *redsync.RedisError
	if !errors.As(err, &nodeErr) {
		t.Fatalf("take with 2 of 3 nodes down: %#v, want a joined *redsync.RedisError", err)
	}
	if _, ok := err.(interface{ Unwrap() []error }); !ok {
		t.Errorf("per-node errors are no longer joined with errors.Join: %T", err)
	}
	if o := inspect(err); len(o.unreachable) != 2 {
		t.Errorf("inspect found %d unreachable nodes in %v, want 2", len(o.unreachable), err)
	}
}

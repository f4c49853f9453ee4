package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/lock/locktest"
)

// breakable lets the conformance suite delete a lock behind its holder's
// back, on every node that answers, as an operator or a node restart would.
type breakable struct {
	*Locker
	raw []*redis.Client
}

func (b breakable) Break(ctx context.Context, key string) error {
	var errs []error
	for _, c := range b.raw {
		if err := c.Del(ctx, key).Err(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(b.raw) {
		return errors.Join(errs...)
	}
	return nil
}

func newLocker(t *testing.T, addrs ...string) *Locker {
	t.Helper()
	l, err := New(Config{Addrs: addrs})
	if err != nil {
		t.Fatalf("New(%v): %v", addrs, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func newBreakable(t *testing.T, addrs ...string) lock.Locker {
	b := breakable{Locker: newLocker(t, addrs...)}
	for _, a := range addrs {
		b.raw = append(b.raw, rawClient(t, a))
	}
	return b
}

// testKey is a key unique to this run and test, so runs sharing one Redis
// never collide.
func testKey(t *testing.T, suffix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return lock.Key("redislock-test-"+hex.EncodeToString(b[:]), "default", strings.ReplaceAll(t.Name(), "/", ".")+suffix)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConformanceSingleNode(t *testing.T) {
	t.Parallel()
	addr := needRedis(t)
	locktest.Run(t, func(t *testing.T) lock.Locker { return newBreakable(t, addr) })
}

func TestConformanceThreeNodes(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	locktest.Run(t, func(t *testing.T) lock.Locker { return newBreakable(t, addrsOf(nodes)...) })
}

// With one of three nodes dead, everything works on the other two.
func TestConformanceThreeNodesOneDown(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	nodes[1].Stop()
	locktest.Run(t, func(t *testing.T) lock.Locker { return newBreakable(t, addrsOf(nodes)...) })
}

// A node dying under a held lock changes nothing: the other two still
// hold it, extend it and release it.
func TestQuorumSurvivesNodeLossWhileHeld(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	l := newLocker(t, addrsOf(nodes)...)
	key := testKey(t, "")
	h, err := l.TryLock(ctxFor(t), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].Stop()
	if err := l.Ping(ctxFor(t)); err != nil {
		t.Errorf("Ping with 2 of 3 nodes up: %v", err)
	}
	if st := l.NodeStatus(ctxFor(t)); len(st) != 1 || st[nodes[0].Addr] == nil {
		t.Errorf("NodeStatus = %v, want only %s down", st, nodes[0].Addr)
	}
	if _, err := l.TryLock(ctxFor(t), key, 30*time.Second); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("TryLock of the held key: %v, want ErrBusy", err)
	}
	if err := h.Extend(ctxFor(t)); err != nil {
		t.Errorf("Extend with 2 of 3 nodes up: %v", err)
	}
	if err := h.Release(ctxFor(t)); err != nil {
		t.Errorf("Release with 2 of 3 nodes up: %v", err)
	}
	h2, err := l.TryLock(ctxFor(t), key, 30*time.Second)
	if err != nil {
		t.Fatalf("TryLock after Release: %v", err)
	}
	_ = h2.Release(ctxFor(t))
}

// With two of three nodes dead there is no quorum: nothing can be taken or
// vouched for, and the errors say which nodes are down.
func TestQuorumLostWithTwoNodesDown(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	l := newLocker(t, addrsOf(nodes)...)
	h, err := l.TryLock(ctxFor(t), testKey(t, "-held"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].Stop()
	nodes[2].Stop()
	down := []string{nodes[0].Addr, nodes[2].Addr}

	wantUnavailable := func(what string, err error, namesDown bool) {
		t.Helper()
		if !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrBusy) || errors.Is(err, lock.ErrLost) {
			t.Errorf("%s: %v, want ErrUnavailable only", what, err)
			return
		}
		if !namesDown {
			return
		}
		for _, a := range down {
			if !strings.Contains(err.Error(), a) {
				t.Errorf("%s: error %q does not name the dead node %s", what, err, a)
			}
		}
		if strings.Contains(err.Error(), nodes[1].Addr) {
			t.Errorf("%s: error %q names the live node %s", what, err, nodes[1].Addr)
		}
		if !strings.Contains(err.Error(), "1 of 3 redis nodes answered, 2 needed") {
			t.Errorf("%s: error %q does not give the quorum count", what, err)
		}
	}

	_, err = l.TryLock(ctxFor(t), testKey(t, "-new"), 30*time.Second)
	wantUnavailable("TryLock", err, true)
	wantUnavailable("Ping", l.Ping(ctxFor(t)), true)
	// The held lock can no longer be vouched for, but it was not lost
	// either: the lease retries until its Until passes.
	wantUnavailable("Extend", h.Extend(ctxFor(t)), true)
	wantUnavailable("Release", h.Release(ctxFor(t)), true)
	_, err = l.Get(ctxFor(t), testKey(t, "-kv"))
	wantUnavailable("Get", err, true)
	wantUnavailable("Put", l.Put(ctxFor(t), testKey(t, "-kv"), []byte("x")), true)
	if st := l.NodeStatus(ctxFor(t)); len(st) != 2 {
		t.Errorf("NodeStatus = %v, want 2 nodes down", st)
	}
}

// A lock held by someone else on a minority of nodes does not block; on a
// majority it does.
func TestQuorumTakeNeedsMajority(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	l := newLocker(t, addrsOf(nodes)...)

	minority := testKey(t, "-minority")
	plant(t, nodes[0].Addr, minority)
	h, err := l.TryLock(ctxFor(t), minority, 30*time.Second)
	if err != nil {
		t.Fatalf("TryLock with another value on 1 of 3 nodes: %v", err)
	}
	if err := h.Release(ctxFor(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
	// Release removed only our value: the stranger keeps node 0.
	if v, _ := rawClient(t, nodes[0].Addr).Get(ctxFor(t), minority).Result(); v != "stranger" {
		t.Errorf("node 0 holds %q after our Release, want the stranger's value kept", v)
	}

	majority := testKey(t, "-majority")
	plant(t, nodes[0].Addr, majority)
	plant(t, nodes[2].Addr, majority)
	_, err = l.TryLock(ctxFor(t), majority, 30*time.Second)
	if !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("TryLock with another value on 2 of 3 nodes: %v, want ErrBusy", err)
	}
	// The failed take must not leave our value on node 1.
	if n, _ := rawClient(t, nodes[1].Addr).Exists(ctxFor(t), majority).Result(); n != 0 {
		t.Errorf("a failed take left its value on node 1")
	}
}

// plant sets key to another holder's value on one node, directly.
func plant(t *testing.T, addr, key string) {
	t.Helper()
	if err := rawClient(t, addr).Set(ctxFor(t), key, "stranger", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

// A lock deleted on a majority of nodes is lost; on a minority it is not.
func TestQuorumExtendAfterDelete(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	l := newLocker(t, addrsOf(nodes)...)
	key := testKey(t, "")
	h, err := l.TryLock(ctxFor(t), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rawClient(t, nodes[0].Addr).Del(ctxFor(t), key)
	if err := h.Extend(ctxFor(t)); err != nil {
		t.Fatalf("Extend with the key deleted on 1 of 3 nodes: %v", err)
	}
	rawClient(t, nodes[1].Addr).Del(ctxFor(t), key)
	if err := h.Extend(ctxFor(t)); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Extend with the key deleted on 2 of 3 nodes: %v, want ErrLost", err)
	}
	if err := h.Release(ctxFor(t)); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release with the key deleted on 2 of 3 nodes: %v, want ErrLost", err)
	}
}

// Redis down entirely: a clear ErrUnavailable naming the address, from the
// client itself (not from the test's deadline).
func TestRedisDown(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		var addrs []string
		for range n {
			addrs = append(addrs, closedAddr(t))
		}
		l := newLocker(t, addrs...)
		_, err := l.TryLock(ctxFor(t), testKey(t, ""), 10*time.Second)
		for what, err := range map[string]error{"TryLock": err, "Ping": l.Ping(ctxFor(t))} {
			if !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%d nodes, %s: %v, want ErrUnavailable from the client itself", n, what, err)
				continue
			}
			for _, a := range addrs {
				if !strings.Contains(err.Error(), a) {
					t.Errorf("%d nodes, %s: error %q does not name %s", n, what, err, a)
				}
			}
		}
		if _, err := lock.Acquire(ctxFor(t), l, testKey(t, "-acq"), lock.Options{TTL: time.Second, Wait: time.Minute}); !errors.Is(err, lock.ErrUnavailable) {
			t.Errorf("%d nodes, Acquire with Wait: %v, want ErrUnavailable at once (only busy is waited on)", n, err)
		}
	}
}

func TestTryLockRejectsBadInput(t *testing.T) {
	l := newLocker(t, closedAddr(t))
	if _, err := l.TryLock(t.Context(), "", time.Second); err == nil || errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("TryLock with an empty key: %v, want a usage error", err)
	}
	if _, err := l.TryLock(t.Context(), "k", time.Microsecond); err == nil || errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("TryLock with a sub-millisecond ttl: %v, want a usage error", err)
	}
}

func TestTryLockCancelled(t *testing.T) {
	addr := needRedis(t)
	l := newLocker(t, addr)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := l.TryLock(ctx, testKey(t, ""), time.Second)
	if !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrBusy) {
		t.Fatalf("TryLock with a cancelled context: %v, want context.Canceled only", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"one node", Config{Addrs: []string{"localhost:6379"}}, nil},
		{"three nodes, all set", Config{Addrs: []string{"a:1", "b:1", "c:1"}, DB: 2, DialTimeout: time.Second, DriftFactor: 0.02}, nil},
		{"no addrs", Config{}, []string{"addrs"}},
		{"bad addrs", Config{Addrs: []string{"nohost", ":6379", "h:0", "h:x"}},
			[]string{"addrs[0]", "addrs[1]", "addrs[2]", "addrs[3]"}},
		{"duplicate node", Config{Addrs: []string{"a:1", "b:1", "A:1"}}, []string{"addrs[2]", "listed twice"}},
		{"everything wrong", Config{Addrs: []string{"a:1"}, DB: -1, ReadTimeout: -1, DriftFactor: 0.5},
			[]string{"db", "read_timeout", "drift_factor"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]string(nil), tc.cfg.Addrs...)
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted an invalid config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if _, err := New(tc.cfg); err == nil {
				t.Error("New accepted an invalid config")
			}
			if strings.Join(before, ",") != strings.Join(tc.cfg.Addrs, ",") {
				t.Error("Validate changed the config")
			}
		})
	}
}

// New does not dial: a node that is down at start may come back.
func TestNewDoesNotDial(t *testing.T) {
	l, err := New(Config{Addrs: []string{closedAddr(t)}})
	if err != nil {
		t.Fatalf("New with an unreachable node: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Until is redsync's conservative validity: start + ttl - drift.
func TestUntilAllowsForDrift(t *testing.T) {
	addr := needRedis(t)
	l, err := New(Config{Addrs: []string{addr}, DriftFactor: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const ttl = 10 * time.Second
	h, err := l.TryLock(ctxFor(t), testKey(t, ""), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if limit := time.Now().Add(ttl - ttl/10); h.Until().After(limit) {
		t.Errorf("Until() = %s, later than now + ttl - 10%% drift = %s", h.Until(), limit)
	}
	if err := h.Extend(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if limit := time.Now().Add(ttl - ttl/10); h.Until().After(limit) {
		t.Errorf("Until() after Extend = %s, later than now + ttl - 10%% drift = %s", h.Until(), limit)
	}
	_ = h.Release(ctxFor(t))
}

// Contenders racing on several nodes split the vote; exactly one must still
// win every time, and the losers must leave no value behind (a stray value
// of a loser blocks the key for a TTL with nobody holding it).
func TestQuorumContention(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	l := newLocker(t, addrsOf(nodes)...)
	const contenders = 12
	for round := range 50 {
		key := testKey(t, fmt.Sprintf("-%d", round))
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			hs    = make([]lock.Handle, contenders)
			errs  = make([]error, contenders)
		)
		for i := range contenders {
			wg.Go(func() {
				<-start
				hs[i], errs[i] = l.TryLock(ctxFor(t), key, time.Minute)
			})
		}
		close(start)
		wg.Wait()
		var winner lock.Handle
		for i, err := range errs {
			switch {
			case err == nil && winner != nil:
				t.Fatalf("round %d: two winners", round)
			case err == nil:
				winner = hs[i]
			case !errors.Is(err, lock.ErrBusy):
				t.Fatalf("round %d: TryLock: %v", round, err)
			}
		}
		if winner == nil {
			t.Fatalf("round %d: none of %d contenders won: %v", round, contenders, errs[0])
		}
		if err := winner.Release(ctxFor(t)); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
		for _, n := range nodes {
			if v, err := rawClient(t, n.Addr).Get(ctxFor(t), key).Result(); err != redis.Nil {
				t.Fatalf("round %d: node %s still holds %q (%v) after the winner released", round, n.Addr, v, err)
			}
		}
	}
}

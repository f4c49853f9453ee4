package memlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/lock/locktest"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
)

// breakable gives the suite its Breaker through memlock's ForceRelease.
type breakable struct{ *memlock.Locker }

func (b breakable) Break(_ context.Context, key string) error {
	if !b.ForceRelease(key) {
		return errors.New("nothing to break: key not held")
	}
	return nil
}

func TestConformance(t *testing.T) {
	locktest.Run(t, func(*testing.T) lock.Locker { return breakable{memlock.New()} })
}

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// With an injected clock, expiry is exact: held up to ttl, free at ttl.
func TestExpiryFollowsInjectedClock(t *testing.T) {
	ctx := t.Context()
	clk := &fakeClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := memlock.NewWithClock(clk.Now)
	const ttl = time.Minute

	h, err := l.TryLock(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().Add(ttl); !h.Until().Equal(want) {
		t.Errorf("Until() = %s, want %s (no drift in-process)", h.Until(), want)
	}

	clk.Advance(ttl - time.Nanosecond)
	if _, err := l.TryLock(ctx, "k", ttl); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("TryLock 1ns before expiry: %v, want ErrBusy", err)
	}
	if err := h.Extend(ctx); err != nil {
		t.Fatalf("Extend 1ns before expiry: %v", err)
	}
	if want := clk.Now().Add(ttl); !h.Until().Equal(want) {
		t.Errorf("Until() after Extend = %s, want %s", h.Until(), want)
	}

	clk.Advance(ttl)
	if err := h.Extend(ctx); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Extend at expiry: %v, want ErrLost", err)
	}
	h2, err := l.TryLock(ctx, "k", ttl)
	if err != nil {
		t.Fatalf("TryLock at expiry: %v", err)
	}
	if err := h.Release(ctx); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release of the expired holder: %v, want ErrLost", err)
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatalf("Release of the new holder: %v", err)
	}
}

func TestRejectsBadInput(t *testing.T) {
	ctx := t.Context()
	l := memlock.New()
	if _, err := l.TryLock(ctx, "", time.Second); err == nil {
		t.Error("TryLock with an empty key succeeded")
	}
	if _, err := l.TryLock(ctx, "k", 0); err == nil {
		t.Error("TryLock with ttl 0 succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.TryLock(cctx, "k", time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("TryLock with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := l.TryLock(ctx, "k", time.Second); err != nil {
		t.Errorf("TryLock after the cancelled attempt: %v (the cancelled one must not have taken it)", err)
	}
}

// A lease on the injected clock loses its lock when the clock passes Until
// and someone else takes it: the extension fails with ErrLost.
func TestLeaseLostOnInjectedClock(t *testing.T) {
	clk := &fakeClock{now: time.Now()}
	l := memlock.NewWithClock(clk.Now)
	le, err := lock.Acquire(t.Context(), l, "k", lock.Options{TTL: 300 * time.Millisecond, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if _, err := l.TryLock(t.Context(), "k", time.Hour); err != nil {
		t.Fatalf("TryLock after the clock passed the lease's TTL: %v", err)
	}
	select {
	case <-le.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease context alive although its lock was taken")
	}
	if err := le.Lost(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Lost() = %v, want ErrLost", err)
	}
	if err := le.Release(context.Background()); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Release of the lost lease: %v, want ErrLost", err)
	}
}

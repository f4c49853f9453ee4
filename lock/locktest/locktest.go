// Package locktest is the conformance suite of lock.Locker implementations:
// every behaviour lock.Acquire and the maintenance runner rely on, checked
// against the real backend. Run it from each implementation's tests.
package locktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/lock"
)

// Breaker is implemented by a test's Locker (usually a wrapper around the
// real one) that can delete a lock behind its holder's back, as an operator
// or a Redis restart would. Without it the lease-loss test is skipped.
type Breaker interface {
	Break(ctx context.Context, key string) error
}

// Durations of the suite. Short, because several tests wait for a lock to
// expire; but the tests assert outcomes only, never that something took less
// than some time, so a slow machine makes them slower, not red.
const (
	shortTTL = 400 * time.Millisecond // locks meant to expire during a test
	longTTL  = 30 * time.Second       // locks that must outlive a test
	leaseTTL = 1200 * time.Millisecond
	patience = 20 * time.Second // how long to wait for an expected outcome
)

// Run runs the suite. newLocker is called once per subtest, which run in
// parallel; every subtest uses its own random key prefix, so a shared
// backend (one Redis for many runs) is fine.
func Run(t *testing.T, newLocker func(t *testing.T) lock.Locker) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l lock.Locker, key string)
	}{
		{"TryLockIsExclusive", testExclusive},
		{"ReacquireAfterRelease", testReacquire},
		{"ExpiryLetsAnotherHolderIn", testExpiry},
		{"ExtendKeepsItHeld", testExtendKeepsHeld},
		{"ExtendAfterTakeoverIsLost", testExtendAfterTakeover},
		{"ExtendAfterExpiryIsLost", testExtendAfterExpiry},
		{"ReleaseOfLostLockKeepsNewHolder", testReleaseLost},
		{"ConcurrentTryLockOneWins", testConcurrent},
		{"AcquireWaitsForRelease", testAcquireWaits},
		{"AcquireWaitTimesOutBusy", testAcquireTimesOut},
		{"LeaseExtendsInBackground", testLeaseExtends},
		{"LeaseCancelledWhenBroken", testLeaseBroken},
		{"LeaseReleaseIdempotent", testLeaseRelease},
		{"LeaseParentCancelled", testLeaseParentCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLocker(t)
			tc.fn(t, l, uniqueKey(t))
		})
	}
}

// uniqueKey is a table key under a random prefix, unique per run and test.
func uniqueKey(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.ReplaceAll(t.Name(), "/", ".")
	return lock.Key("locktest-"+hex.EncodeToString(b[:]), "default", name)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*patience)
	t.Cleanup(cancel)
	return ctx
}

func mustLock(t *testing.T, l lock.Locker, key string, ttl time.Duration) lock.Handle {
	t.Helper()
	h, err := l.TryLock(ctxFor(t), key, ttl)
	if err != nil {
		t.Fatalf("TryLock(%q, %s): %v", key, ttl, err)
	}
	return h
}

func wantErr(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: got error %v, want one wrapping %q", what, err, sentinel)
	}
}

func wantBusy(t *testing.T, l lock.Locker, key string) {
	t.Helper()
	h, err := l.TryLock(ctxFor(t), key, longTTL)
	if err == nil {
		_ = h.Release(ctxFor(t))
		t.Fatalf("TryLock(%q) succeeded while another holder has it", key)
	}
	wantErr(t, "TryLock of a held lock", err, lock.ErrBusy)
	if !strings.Contains(err.Error(), key) {
		t.Errorf("TryLock error %q does not name the key %q", err, key)
	}
}

// eventually polls cond until it holds, failing the test after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %s", what, patience)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// takeOver waits until the lock (held by someone with a short TTL) expires
// and another holder gets it.
func takeOver(t *testing.T, l lock.Locker, key string) lock.Handle {
	t.Helper()
	var h lock.Handle
	eventually(t, "taken over after expiry", func() bool {
		var err error
		h, err = l.TryLock(ctxFor(t), key, longTTL)
		if err != nil && !errors.Is(err, lock.ErrBusy) {
			t.Fatalf("TryLock while waiting for expiry: %v", err)
		}
		return err == nil
	})
	return h
}

func testExclusive(t *testing.T, l lock.Locker, key string) {
	if err := l.Ping(ctxFor(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	before := time.Now()
	h := mustLock(t, l, key, longTTL)
	after := time.Now()
	// Until is start + ttl - drift: not after the call's end + ttl, and
	// not before its start + ttl/2 (no sane drift allowance is that big).
	if u := h.Until(); u.Before(before.Add(longTTL/2)) || u.After(after.Add(longTTL)) {
		t.Errorf("Until() = %s, want in [%s, %s]", u, before.Add(longTTL/2), after.Add(longTTL))
	}
	wantBusy(t, l, key)
	wantBusy(t, l, key) // a failed take must not disturb the holder

	// Other keys are independent.
	other := mustLock(t, l, key+"-other", longTTL)
	if err := other.Release(ctxFor(t)); err != nil {
		t.Errorf("Release of another key: %v", err)
	}
	if err := h.Extend(ctxFor(t)); err != nil {
		t.Errorf("holder's Extend after failed takes: %v", err)
	}
	if err := h.Release(ctxFor(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
}

func testReacquire(t *testing.T, l lock.Locker, key string) {
	h1 := mustLock(t, l, key, longTTL)
	if err := h1.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	h2 := mustLock(t, l, key, longTTL)
	// The first handle is gone: releasing it again frees nothing.
	wantErr(t, "second Release of a released handle", h1.Release(ctxFor(t)), lock.ErrLost)
	wantErr(t, "Extend of a released handle", h1.Extend(ctxFor(t)), lock.ErrLost)
	wantBusy(t, l, key)
	if err := h2.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release of the second holder: %v", err)
	}
}

func testExpiry(t *testing.T, l lock.Locker, key string) {
	mustLock(t, l, key, shortTTL)
	wantBusy(t, l, key)
	h2 := takeOver(t, l, key)
	if err := h2.Release(ctxFor(t)); err != nil {
		t.Errorf("Release of the new holder: %v", err)
	}
}

func testExtendKeepsHeld(t *testing.T, l lock.Locker, key string) {
	const ttl = time.Second
	h := mustLock(t, l, key, ttl)
	first := h.Until()
	// Extend every ttl/5 for three TTLs: the lock must stay ours well
	// past its original expiry.
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); {
		time.Sleep(ttl / 5)
		if err := h.Extend(ctxFor(t)); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		wantBusy(t, l, key)
	}
	if !h.Until().After(first.Add(ttl)) {
		t.Errorf("Until() = %s after extensions over 3 TTLs, want after original %s + ttl", h.Until(), first)
	}
	if err := h.Release(ctxFor(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
	mustLock(t, l, key, longTTL)
}

func testExtendAfterTakeover(t *testing.T, l lock.Locker, key string) {
	h1 := mustLock(t, l, key, shortTTL)
	h2 := takeOver(t, l, key)
	err := h1.Extend(ctxFor(t))
	wantErr(t, "Extend after takeover", err, lock.ErrLost)
	if !strings.Contains(err.Error(), key) {
		t.Errorf("Extend error %q does not name the key", err)
	}
	wantBusy(t, l, key) // the new holder still has it
	if err := h2.Extend(ctxFor(t)); err != nil {
		t.Errorf("new holder's Extend: %v", err)
	}
}

func testExtendAfterExpiry(t *testing.T, l lock.Locker, key string) {
	h := mustLock(t, l, key, shortTTL)
	// Let it expire with nobody taking it over.
	time.Sleep(time.Until(h.Until()) + shortTTL)
	wantErr(t, "Extend after expiry", h.Extend(ctxFor(t)), lock.ErrLost)
	// A failed extension must not have revived it.
	h2 := mustLock(t, l, key, longTTL)
	if err := h2.Release(ctxFor(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
}

func testReleaseLost(t *testing.T, l lock.Locker, key string) {
	h1 := mustLock(t, l, key, shortTTL)
	h2 := takeOver(t, l, key)
	wantErr(t, "Release of a lost lock", h1.Release(ctxFor(t)), lock.ErrLost)
	wantBusy(t, l, key) // h2 keeps it
	if err := h2.Release(ctxFor(t)); err != nil {
		t.Errorf("new holder's Release: %v", err)
	}
}

func testConcurrent(t *testing.T, l lock.Locker, key string) {
	const n = 12
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		won   atomic.Int32
		busy  atomic.Int32
		other = make(chan error, n)
	)
	for range n {
		wg.Go(func() {
			<-start
			_, err := l.TryLock(ctxFor(t), key, longTTL)
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, lock.ErrBusy):
				busy.Add(1)
			default:
				other <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(other)
	for err := range other {
		t.Errorf("TryLock: %v", err)
	}
	if won.Load() != 1 || busy.Load() != n-1 {
		t.Fatalf("%d of %d concurrent TryLocks won and %d were busy, want exactly 1 and %d", won.Load(), n, busy.Load(), n-1)
	}
}

// counting wraps a Locker to count TryLock calls and signal the first busy one.
type counting struct {
	lock.Locker
	calls     atomic.Int32
	busyOnce  sync.Once
	firstBusy chan struct{}
}

func (c *counting) TryLock(ctx context.Context, key string, ttl time.Duration) (lock.Handle, error) {
	c.calls.Add(1)
	h, err := c.Locker.TryLock(ctx, key, ttl)
	if errors.Is(err, lock.ErrBusy) {
		c.busyOnce.Do(func() { close(c.firstBusy) })
	}
	return h, err
}

func testAcquireWaits(t *testing.T, l lock.Locker, key string) {
	holder := mustLock(t, l, key, longTTL)
	c := &counting{Locker: l, firstBusy: make(chan struct{})}
	type result struct {
		lease *lock.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		le, err := lock.Acquire(ctxFor(t), c, key, lock.Options{TTL: leaseTTL, Wait: patience, RetryDelay: 20 * time.Millisecond})
		done <- result{le, err}
	}()
	select {
	case <-c.firstBusy:
	case r := <-done:
		t.Fatalf("Acquire returned (%v, %v) while the lock was held", r.lease, r.err)
	}
	if err := holder.Release(ctxFor(t)); err != nil {
		t.Fatalf("holder's Release: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Acquire with Wait after the holder released: %v", r.err)
	}
	defer r.lease.Release(ctxFor(t))
	if r.lease.Waited() <= 0 {
		t.Errorf("Waited() = %s after waiting for a busy lock, want > 0", r.lease.Waited())
	}
	if c.calls.Load() < 2 {
		t.Errorf("TryLock called %d times, want at least 2", c.calls.Load())
	}
	if r.lease.Key() != key {
		t.Errorf("Key() = %q, want %q", r.lease.Key(), key)
	}
	wantBusy(t, l, key)
}

func testAcquireTimesOut(t *testing.T, l lock.Locker, key string) {
	holder := mustLock(t, l, key, longTTL)

	c := &counting{Locker: l, firstBusy: make(chan struct{})}
	_, err := lock.Acquire(ctxFor(t), c, key, lock.Options{TTL: leaseTTL})
	wantErr(t, "Acquire without Wait of a held lock", err, lock.ErrBusy)
	if n := c.calls.Load(); n != 1 {
		t.Errorf("Acquire without Wait called TryLock %d times, want 1", n)
	}

	c = &counting{Locker: l, firstBusy: make(chan struct{})}
	_, err = lock.Acquire(ctxFor(t), c, key, lock.Options{TTL: leaseTTL, Wait: 300 * time.Millisecond, RetryDelay: 30 * time.Millisecond})
	wantErr(t, "Acquire with Wait of a lock that stays held", err, lock.ErrBusy)
	if !strings.Contains(err.Error(), key) {
		t.Errorf("Acquire error %q does not name the key", err)
	}
	if n := c.calls.Load(); n < 2 {
		t.Errorf("Acquire with Wait called TryLock %d times, want retries", n)
	}
	if err := holder.Extend(ctxFor(t)); err != nil {
		t.Errorf("holder's Extend after the waiter gave up: %v", err)
	}
}

func acquire(t *testing.T, ctx context.Context, l lock.Locker, key string) *lock.Lease {
	t.Helper()
	le, err := lock.Acquire(ctx, l, key, lock.Options{TTL: leaseTTL})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return le
}

func testLeaseExtends(t *testing.T, l lock.Locker, key string) {
	le := acquire(t, ctxFor(t), l, key)
	first := le.Until()
	// Outlive several TTLs: the background extender must keep it.
	time.Sleep(4 * leaseTTL)
	if err := le.Context().Err(); err != nil {
		t.Fatalf("lease context done after 4 TTLs: %v (cause %v)", err, context.Cause(le.Context()))
	}
	if !le.Until().After(first.Add(leaseTTL)) {
		t.Errorf("Until() = %s, want it pushed well past the first %s", le.Until(), first)
	}
	wantBusy(t, l, key)
	if err := le.Release(ctxFor(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
}

func testLeaseBroken(t *testing.T, l lock.Locker, key string) {
	b, ok := l.(Breaker)
	if !ok {
		t.Skipf("%T does not implement locktest.Breaker", l)
	}
	le := acquire(t, ctxFor(t), l, key)
	if err := b.Break(ctxFor(t), key); err != nil {
		t.Fatalf("Break: %v", err)
	}
	// Someone else takes the broken lock before the lease notices.
	thief := mustLock(t, l, key, longTTL)
	select {
	case <-le.Context().Done():
	case <-time.After(patience):
		t.Fatalf("lease context still alive %s after its lock was deleted and taken", patience)
	}
	cause := context.Cause(le.Context())
	wantErr(t, "cause of the lease context", cause, lock.ErrLost)
	wantErr(t, "Lost()", le.Lost(), lock.ErrLost)
	wantErr(t, "Release of the lost lease", le.Release(ctxFor(t)), lock.ErrLost)
	wantBusy(t, l, key) // the thief keeps it
	if err := thief.Release(ctxFor(t)); err != nil {
		t.Errorf("thief's Release: %v", err)
	}
}

func testLeaseRelease(t *testing.T, l lock.Locker, key string) {
	le := acquire(t, ctxFor(t), l, key)
	ctx := le.Context()
	if err := ctx.Err(); err != nil {
		t.Fatalf("fresh lease context: %v", err)
	}
	if err := le.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if ctx.Err() == nil {
		t.Fatal("lease context alive after Release")
	}
	if cause := context.Cause(ctx); errors.Is(cause, lock.ErrLost) || !errors.Is(cause, context.Canceled) {
		t.Errorf("cause after Release = %v, want context.Canceled and not ErrLost", cause)
	}
	if err := le.Lost(); err != nil {
		t.Errorf("Lost() after Release = %v, want nil", err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := le.Release(ctxFor(t)); err != nil {
				t.Errorf("repeated Release: %v", err)
			}
		})
	}
	wg.Wait()
	// Released for real. A late Release by the old lease must not free the
	// new holder's lock (Release also waits for the extender to exit, so no
	// late extension reaches it either).
	h := mustLock(t, l, key, longTTL)
	if err := le.Release(ctxFor(t)); err != nil {
		t.Errorf("late Release of the old lease: %v", err)
	}
	if err := h.Extend(ctxFor(t)); err != nil {
		t.Errorf("new holder's Extend after the old lease's late Release: %v", err)
	}
	wantBusy(t, l, key)
	if err := h.Release(ctxFor(t)); err != nil {
		t.Errorf("new holder's Release: %v", err)
	}
}

func testLeaseParentCancelled(t *testing.T, l lock.Locker, key string) {
	parent, cancel := context.WithCancel(ctxFor(t))
	le := acquire(t, parent, l, key)
	cancel()
	<-le.Context().Done()
	if err := le.Lost(); err != nil {
		t.Errorf("Lost() after the parent was cancelled = %v, want nil", err)
	}
	// Release must still give the lock back, though its ctx is done.
	if err := le.Release(parent); err != nil {
		t.Fatalf("Release with a cancelled context: %v", err)
	}
	mustLock(t, l, key, longTTL)
}

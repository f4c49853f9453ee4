package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeLocker is a Locker whose behaviour each test scripts: TryLock is busy
// a number of times, and the n-th Extend does what extendFn says (succeed,
// fail, hang).
type fakeLocker struct {
	mu       sync.Mutex
	busy     int   // TryLock answers ErrBusy this many times (-1: always)
	tryErr   error // TryLock answers this instead, when set
	validity time.Duration
	extendFn func(ctx context.Context, n int) error
	tries    int
	extends  []time.Time
	releases int
}

func (f *fakeLocker) TryLock(_ context.Context, key string, ttl time.Duration) (Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	if f.tryErr != nil {
		return nil, f.tryErr
	}
	if f.busy != 0 {
		if f.busy > 0 {
			f.busy--
		}
		return nil, fmt.Errorf("lock %q: take: %w", key, ErrBusy)
	}
	valid := ttl
	if f.validity > 0 {
		valid = f.validity
	}
	return &fakeHandle{f: f, ttl: ttl, until: time.Now().Add(valid)}, nil
}

func (f *fakeLocker) Ping(context.Context) error { return nil }

func (f *fakeLocker) counts() (tries, extends, releases int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries, len(f.extends), f.releases
}

func (f *fakeLocker) extendTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.extends...)
}

type fakeHandle struct {
	f   *fakeLocker
	ttl time.Duration

	mu    sync.Mutex
	until time.Time
}

func (h *fakeHandle) Extend(ctx context.Context) error {
	start := time.Now()
	h.f.mu.Lock()
	h.f.extends = append(h.f.extends, start)
	n, fn := len(h.f.extends), h.f.extendFn
	h.f.mu.Unlock()
	if fn != nil {
		if err := fn(ctx, n); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.until = start.Add(h.ttl)
	h.mu.Unlock()
	return nil
}

func (h *fakeHandle) Until() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

func (h *fakeHandle) Release(context.Context) error {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.f.releases++
	return nil
}

const (
	testKey  = "test:lock:default:db.t"
	patience = 20 * time.Second
)

func waitDone(t *testing.T, le *Lease) {
	t.Helper()
	select {
	case <-le.Context().Done():
	case <-time.After(patience):
		t.Fatalf("lease context still alive after %s", patience)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %s", what, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustAcquire(t *testing.T, ctx context.Context, f *fakeLocker, opts Options) *Lease {
	t.Helper()
	le, err := Acquire(ctx, f, testKey, opts)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { _ = le.Release(context.Background()) })
	return le
}

func TestLeaseExtendsEveryThirdOfTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	f := &fakeLocker{}
	start := time.Now()
	le := mustAcquire(t, t.Context(), f, Options{TTL: ttl})
	first := le.Until()

	eventually(t, "extended 4 times", func() bool { _, n, _ := f.counts(); return n >= 4 })
	if err := le.Context().Err(); err != nil {
		t.Fatalf("lease context done while extensions succeed: %v", context.Cause(le.Context()))
	}
	if !le.Until().After(first) {
		t.Errorf("Until() = %s, not advanced past the first %s", le.Until(), first)
	}
	// Timers never fire early, so each extension comes at least TTL/3
	// after the previous one started: the extender does not hammer.
	prev := start
	for i, at := range f.extendTimes() {
		if gap := at.Sub(prev); gap < ttl/3-time.Millisecond {
			t.Errorf("extension %d came %s after the previous one, want >= ttl/3 = %s", i+1, gap, ttl/3)
		}
		prev = at
	}

	if err := le.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	_, afterRelease, releases := f.counts()
	if releases != 1 {
		t.Errorf("handle released %d times, want 1", releases)
	}
	if le.Context().Err() == nil {
		t.Error("lease context alive after Release")
	}
	time.Sleep(ttl) // time for three more extensions, were the extender alive
	if _, n, _ := f.counts(); n != afterRelease {
		t.Errorf("%d extensions after Release, want none", n-afterRelease)
	}
	if err := le.Release(t.Context()); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if _, _, releases := f.counts(); releases != 1 {
		t.Errorf("handle released %d times after a second Release, want 1", releases)
	}
}

func TestLeaseCancelledWhenExtensionFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"lost", fmt.Errorf("lock %q: extend: %w: taken", testKey, ErrLost)},
		{"unclassified", errors.New("boom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLocker{extendFn: func(_ context.Context, n int) error {
				if n == 2 {
					return tc.err
				}
				return nil
			}}
			le := mustAcquire(t, t.Context(), f, Options{TTL: 300 * time.Millisecond})
			waitDone(t, le)
			cause := context.Cause(le.Context())
			if !errors.Is(cause, ErrLost) || !errors.Is(cause, tc.err) {
				t.Fatalf("cause = %v, want one wrapping ErrLost and %v", cause, tc.err)
			}
			if !strings.Contains(cause.Error(), testKey) {
				t.Errorf("cause %q does not name the key", cause)
			}
			if le.Lost() != cause {
				t.Errorf("Lost() = %v, want the cause %v", le.Lost(), cause)
			}
			if _, n, _ := f.counts(); n != 2 {
				t.Errorf("%d extensions, want 2 (none after the failed one)", n)
			}
			// Releasing a lost lease still releases the handle.
			_ = le.Release(t.Context())
			if _, _, r := f.counts(); r != 1 {
				t.Errorf("handle released %d times, want 1", r)
			}
		})
	}
}

// A backend blip (ErrUnavailable) is retried while the lock is still known
// to be ours; a recovery keeps the lease.
func TestLeaseRetriesUnavailableExtension(t *testing.T) {
	f := &fakeLocker{extendFn: func(_ context.Context, n int) error {
		if n <= 2 {
			return fmt.Errorf("lock %q: extend: %w: connection refused", testKey, ErrUnavailable)
		}
		return nil
	}}
	le := mustAcquire(t, t.Context(), f, Options{TTL: 900 * time.Millisecond, RetryDelay: 20 * time.Millisecond})
	eventually(t, "extended 5 times", func() bool { _, n, _ := f.counts(); return n >= 5 })
	if err := le.Context().Err(); err != nil {
		t.Fatalf("lease lost although the backend recovered in time: %v", context.Cause(le.Context()))
	}
	if err := le.Lost(); err != nil {
		t.Errorf("Lost() = %v, want nil", err)
	}
}

func TestLeaseLostWhenUnavailableUntilExpiry(t *testing.T) {
	unavailable := fmt.Errorf("lock %q: extend: %w: connection refused", testKey, ErrUnavailable)
	f := &fakeLocker{extendFn: func(context.Context, int) error { return unavailable }}
	le := mustAcquire(t, t.Context(), f, Options{TTL: 300 * time.Millisecond, RetryDelay: 20 * time.Millisecond})
	waitDone(t, le)
	cause := context.Cause(le.Context())
	if !errors.Is(cause, ErrLost) || !errors.Is(cause, ErrUnavailable) {
		t.Fatalf("cause = %v, want one wrapping ErrLost and the last ErrUnavailable", cause)
	}
	if _, n, _ := f.counts(); n < 2 {
		t.Errorf("%d extension attempts, want retries before giving up", n)
	}
}

// A hung backend call must not keep a stale lease alive: the Until timer
// cancels it, and Release does not wait for the hung call.
func TestLeaseLostWhenExtensionHangs(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	f := &fakeLocker{extendFn: func(context.Context, int) error {
		<-hang // ignores ctx, like a stuck socket without deadlines
		return nil
	}}
	le := mustAcquire(t, t.Context(), f, Options{TTL: 300 * time.Millisecond})
	waitDone(t, le)
	cause := context.Cause(le.Context())
	if !errors.Is(cause, ErrLost) || !strings.Contains(cause.Error(), "pending") {
		t.Fatalf("cause = %v, want ErrLost saying an extension is pending", cause)
	}
	if _, n, _ := f.counts(); n != 1 {
		t.Errorf("%d extensions started, want 1 (no second call while one hangs)", n)
	}
	released := make(chan error, 1)
	go func() { released <- le.Release(context.Background()) }()
	select {
	case err := <-released:
		if err != nil {
			t.Errorf("Release: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("Release blocked behind the hung extension")
	}
	if _, _, r := f.counts(); r != 1 {
		t.Errorf("handle released %d times, want 1", r)
	}
}

// The deadline is the handle's Until, not TTL: a handle valid for less than
// TTL (drift allowance, slow take) is given up before its first extension.
func TestLeaseDeadlineIsHandleUntil(t *testing.T) {
	f := &fakeLocker{validity: 50 * time.Millisecond}
	le := mustAcquire(t, t.Context(), f, Options{TTL: time.Hour})
	waitDone(t, le)
	if cause := context.Cause(le.Context()); !errors.Is(cause, ErrLost) || !strings.Contains(cause.Error(), "not extended before") {
		t.Fatalf("cause = %v, want ErrLost: not extended before Until", cause)
	}
	if _, n, _ := f.counts(); n != 0 {
		t.Errorf("%d extensions, want 0 (the first is due after TTL/3 = 20m)", n)
	}
}

func TestLeaseParentCancelStopsExtender(t *testing.T) {
	const ttl = 300 * time.Millisecond
	f := &fakeLocker{}
	ctx, cancel := context.WithCancel(t.Context())
	le := mustAcquire(t, ctx, f, Options{TTL: ttl})
	cancel()
	waitDone(t, le)
	if err := le.Lost(); err != nil {
		t.Errorf("Lost() after parent cancel = %v, want nil", err)
	}
	_, before, _ := f.counts()
	time.Sleep(ttl)
	if _, n, _ := f.counts(); n != before {
		t.Errorf("%d extensions after the parent was cancelled, want none", n-before)
	}
	if err := le.Release(ctx); err != nil {
		t.Errorf("Release with the cancelled ctx: %v", err)
	}
	if _, _, r := f.counts(); r != 1 {
		t.Errorf("handle released %d times, want 1", r)
	}
}

// stepClock returns a clock that moves 1ms on every reading, so Waited is
// exact whatever the machine's speed.
func stepClock(start time.Time) func() time.Time {
	var mu sync.Mutex
	now := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
}

func TestAcquireRetriesWhileBusy(t *testing.T) {
	f := &fakeLocker{busy: 3}
	le := mustAcquire(t, t.Context(), f, Options{TTL: time.Minute, Wait: time.Minute, RetryDelay: time.Millisecond, Now: stepClock(time.Now())})
	if tries, _, _ := f.counts(); tries != 4 {
		t.Errorf("TryLock called %d times, want 4 (3 busy + 1)", tries)
	}
	// Clock readings: start, after each of 3 busy answers, at success.
	if le.Waited() != 4*time.Millisecond {
		t.Errorf("Waited() = %s, want 4ms on the stepping clock", le.Waited())
	}

	f = &fakeLocker{}
	le = mustAcquire(t, t.Context(), f, Options{TTL: time.Minute, Wait: time.Minute})
	if le.Waited() != 0 {
		t.Errorf("Waited() = %s when the first attempt succeeded, want 0", le.Waited())
	}
}

func TestAcquireWaitTimesOut(t *testing.T) {
	f := &fakeLocker{busy: -1}
	_, err := Acquire(t.Context(), f, testKey, Options{TTL: time.Minute, Wait: 100 * time.Millisecond, RetryDelay: 10 * time.Millisecond})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), testKey) {
		t.Fatalf("Acquire of an always-busy lock: %v, want ErrBusy naming the key", err)
	}
	if tries, _, _ := f.counts(); tries < 2 {
		t.Errorf("TryLock called %d times, want retries", tries)
	}

	f = &fakeLocker{busy: -1}
	if _, err := Acquire(t.Context(), f, testKey, Options{TTL: time.Minute}); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire without Wait: %v, want ErrBusy", err)
	}
	if tries, _, _ := f.counts(); tries != 1 {
		t.Errorf("TryLock called %d times without Wait, want 1", tries)
	}
}

func TestAcquireDoesNotRetryUnavailable(t *testing.T) {
	f := &fakeLocker{tryErr: fmt.Errorf("lock %q: take: %w", testKey, ErrUnavailable)}
	_, err := Acquire(t.Context(), f, testKey, Options{TTL: time.Minute, Wait: time.Hour})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Acquire: %v, want ErrUnavailable", err)
	}
	if tries, _, _ := f.counts(); tries != 1 {
		t.Errorf("TryLock called %d times, want 1: only busy is waited on", tries)
	}
}

func TestAcquireStopsWaitingWhenCancelled(t *testing.T) {
	f := &fakeLocker{busy: -1}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for n, _, _ := f.counts(); n < 2; n, _, _ = f.counts() {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err := Acquire(ctx, f, testKey, Options{TTL: time.Minute, Wait: time.Hour, RetryDelay: 5 * time.Millisecond})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire cancelled while waiting: %v, want context.Canceled", err)
	}
}

func TestAcquireRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		key  string
		opts Options
	}{
		{testKey, Options{}},
		{testKey, Options{TTL: time.Second, Wait: -time.Second}},
		{"", Options{TTL: time.Second}},
		{Key("p", "c", ""), Options{TTL: time.Second}},
	} {
		f := &fakeLocker{}
		if le, err := Acquire(t.Context(), f, tc.key, tc.opts); err == nil {
			_ = le.Release(t.Context())
			t.Errorf("Acquire(%q, %+v) succeeded", tc.key, tc.opts)
		}
		if tries, _, _ := f.counts(); tries != 0 {
			t.Errorf("Acquire(%q, %+v) called TryLock", tc.key, tc.opts)
		}
	}
}

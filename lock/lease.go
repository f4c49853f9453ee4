package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

const (
	// maxRetryDelay caps the default delay between attempts on a busy lock,
	// so a long TTL does not make a waiter sleep past a quick release.
	maxRetryDelay = time.Second
	// minRetryDelay keeps tiny TTLs from turning waiting into a busy loop.
	minRetryDelay = time.Millisecond
	// releaseTimeout bounds Lease.Release, which must also work after the
	// caller's context was cancelled (shutdown); a lock that cannot be
	// released in time expires by its TTL anyway.
	releaseTimeout = 5 * time.Second
)

// Options says how Acquire takes and keeps a lease.
type Options struct {
	// TTL is how long the lock lives without an extension; required, > 0.
	// It bounds how long a crashed holder blocks the table, and the lease
	// is extended every TTL/3.
	TTL time.Duration
	// Wait is how long Acquire retries while the lock is busy: 0 tries
	// once; > 0 retries (jittered by RetryDelay) until Wait has elapsed or
	// ctx is done.
	Wait time.Duration
	// RetryDelay is the mean delay between attempts while waiting; default
	// TTL/10, capped to 1s.
	RetryDelay time.Duration
	// Now is the clock (default time.Now); it must be the clock the Locker
	// computes Handle.Until with, since the lease's deadline timer is
	// derived from Until - Now.
	Now func() time.Time
	// Logger receives debug records of acquire/release and warnings of
	// failed extensions that are being retried; default: discard.
	Logger *slog.Logger
}

// Validate reports every problem of o at once; it never mutates o.
func (o Options) Validate() error {
	var errs []error
	if o.TTL <= 0 {
		errs = append(errs, fmt.Errorf("ttl must be > 0 (got %s)", o.TTL))
	}
	if o.Wait < 0 {
		errs = append(errs, fmt.Errorf("wait must not be negative (got %s)", o.Wait))
	}
	if o.RetryDelay < 0 {
		errs = append(errs, fmt.Errorf("retry delay must not be negative (got %s)", o.RetryDelay))
	}
	return errors.Join(errs...)
}

// retryDelay is the mean delay between attempts on a busy lock.
func (o Options) retryDelay() time.Duration {
	if o.RetryDelay > 0 {
		return o.RetryDelay
	}
	return max(min(o.TTL/10, maxRetryDelay), minRetryDelay)
}

// Lease is a lock held by Acquire and extended in the background until
// Release. Work done under the lease must use Context(), which is cancelled
// with a cause wrapping ErrLost as soon as the lock can no longer be vouched
// for. All methods are safe for concurrent use.
type Lease struct {
	key    string
	h      Handle
	now    func() time.Time
	log    *slog.Logger
	waited time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc
	exited chan struct{} // closed when the extender goroutine returns

	mu        sync.Mutex
	until     time.Time
	lost      error
	releasing bool

	releaseOnce sync.Once
	releaseErr  error
}

// Acquire takes the lease on key. The returned Lease's Context() derives
// from ctx and is cancelled with a cause (an error wrapping ErrLost) when an
// extension fails, or when Until() passes without a successful extension (a
// timer, so a hung backend call cannot keep a stale lease alive). A
// background goroutine extends the lock every TTL/3; it stops on Release or
// when ctx is done, after which the lock expires by its TTL unless Released.
//
// An extension that fails with ErrUnavailable (and not ErrLost) is retried
// every RetryDelay until Until passes: the lock is still known to be ours
// until then, so a short network blip need not kill a long compaction.
//
// Errors: ErrBusy when the lock stayed busy (after Wait, if any), whatever
// TryLock returned otherwise (e.g. ErrUnavailable), ctx's cause when ctx
// ended while waiting, and a plain error for invalid options or key.
func Acquire(ctx context.Context, l Locker, key string, opts Options) (*Lease, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("lock %q: acquire: invalid options: %w", key, err)
	}
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	start := now()
	var (
		h        Handle
		attempts int
		delay    = opts.retryDelay()
	)
	for {
		attempts++
		var err error
		h, err = l.TryLock(ctx, key, opts.TTL)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrBusy) || opts.Wait <= 0 {
			return nil, err
		}
		remaining := opts.Wait - now().Sub(start)
		if remaining <= 0 {
			return nil, fmt.Errorf("lock %q: acquire: gave up after waiting %s (%d attempts): %w",
				key, opts.Wait, attempts, ErrBusy)
		}
		// Jitter in [delay/2, 3*delay/2) so waiting replicas do not retry
		// in lock step; the last attempt lands at the end of Wait.
		d := min(delay/2+rand.N(delay), remaining)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lock %q: acquire: stopped waiting for the busy lock after %d attempts: %w",
				key, attempts, context.Cause(ctx))
		case <-t.C:
		}
	}

	var waited time.Duration
	if attempts > 1 {
		waited = now().Sub(start)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	le := &Lease{
		key: key, h: h, now: now, log: log, waited: waited,
		ctx: lctx, cancel: cancel, exited: make(chan struct{}),
		until: h.Until(),
	}
	log.Debug("lease acquired", "key", key, "waited", waited, "until", le.until)
	go le.extend(max(opts.TTL/3, minRetryDelay), delay)
	return le, nil
}

// Context is cancelled when the lease is lost (cause wraps ErrLost), when it
// is released (cause context.Canceled), or when the ctx given to Acquire is.
func (l *Lease) Context() context.Context { return l.ctx }

// Key is the lock key the lease holds.
func (l *Lease) Key() string { return l.key }

// Waited is the time Acquire spent waiting for a busy lock (0 when the first
// attempt succeeded).
func (l *Lease) Waited() time.Duration { return l.waited }

// Until is the conservative time until which the lock is known to be held,
// as of the last successful extension.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Lost is nil, or the cause (wrapping ErrLost) once the lease was lost. A
// lease that was released or whose parent context ended is not lost.
func (l *Lease) Lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Release cancels Context() first (so the work stops before another holder
// can start), stops the extender and releases the lock, with a timeout of
// its own so it also works after ctx was cancelled. It is idempotent and safe
// from any goroutine: every call returns the first call's result. The error
// wraps ErrLost when the lock was no longer ours (worth reporting, not
// failing on), ErrUnavailable when the backend could not be reached (the
// lock then expires by its TTL).
func (l *Lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() { l.releaseErr = l.release(ctx) })
	return l.releaseErr
}

func (l *Lease) release(ctx context.Context) error {
	l.mu.Lock()
	l.releasing = true
	l.mu.Unlock()
	l.cancel(nil)
	// The extender returns promptly on cancel; it does not wait for an
	// Extend in flight (Handles are safe for concurrent use), so a hung
	// backend call cannot hold Release up.
	<-l.exited

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := l.h.Release(rctx); err != nil {
		return err
	}
	l.log.Debug("lease released", "key", l.key)
	return nil
}

// lose records cause and cancels the lease's context with it, unless the
// lease is being released (then the loss no longer matters).
func (l *Lease) lose(cause error) {
	l.mu.Lock()
	if l.releasing || l.lost != nil {
		l.mu.Unlock()
		return
	}
	l.lost = cause
	l.mu.Unlock()
	// Returned through context.Cause and Lost(); the caller reports it.
	l.log.Debug("lease lost", "key", l.key, "err", cause)
	l.cancel(cause)
}

// extend is the background extender: every interval it extends the lock,
// and a deadline timer set to Until cancels the lease if no extension
// succeeds in time, however long a backend call hangs. One Extend is in
// flight at a time; it runs in its own goroutine so the timer and Release
// are never blocked by it.
func (l *Lease) extend(interval, retry time.Duration) {
	defer close(l.exited)
	deadline := time.NewTimer(l.Until().Sub(l.now()))
	defer deadline.Stop()
	next := time.NewTimer(interval)
	defer next.Stop()

	var (
		results   chan error // non-nil while an Extend is in flight
		stopCall  context.CancelFunc
		lastErr   error
		attempted int // failed attempts since the last success
	)
	defer func() {
		if stopCall != nil {
			stopCall()
		}
	}()
	for {
		select {
		case <-l.ctx.Done():
			return

		case <-deadline.C:
			until := l.Until()
			var cause error
			switch {
			case results != nil:
				cause = fmt.Errorf("lock %q: %w: not extended before %s: an extension is still pending (backend hung?)",
					l.key, ErrLost, until.Format(time.RFC3339Nano))
			case lastErr != nil:
				cause = fmt.Errorf("lock %q: %w: not extended before %s after %d failed attempts: %w",
					l.key, ErrLost, until.Format(time.RFC3339Nano), attempted, lastErr)
			default:
				cause = fmt.Errorf("lock %q: %w: not extended before %s",
					l.key, ErrLost, until.Format(time.RFC3339Nano))
			}
			l.lose(cause)
			return

		case <-next.C:
			// The call cannot outlive the lease: past Until a success
			// would come too late to matter.
			cctx, cancel := context.WithTimeout(l.ctx, l.Until().Sub(l.now()))
			stopCall = cancel
			res := make(chan error, 1)
			results = res
			go func() { res <- l.h.Extend(cctx) }()

		case err := <-results:
			results = nil
			stopCall()
			stopCall = nil
			if l.ctx.Err() != nil {
				return // released or parent cancelled; not a loss
			}
			if err == nil {
				until := l.h.Until()
				l.mu.Lock()
				l.until = until
				l.mu.Unlock()
				lastErr, attempted = nil, 0
				deadline.Reset(until.Sub(l.now()))
				next.Reset(interval)
				continue
			}
			if errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrLost) {
				lastErr = err
				attempted++
				l.log.Warn("lease extension failed; retrying until the lease runs out",
					"key", l.key, "err", err, "until", l.Until(), "attempt", attempted)
				next.Reset(retry)
				continue
			}
			if errors.Is(err, ErrLost) {
				l.lose(err)
			} else {
				l.lose(fmt.Errorf("lock %q: %w: extend: %w", l.key, ErrLost, err))
			}
			return
		}
	}
}

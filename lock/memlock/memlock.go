// Package memlock is an in-process lock.Locker: a map of expiring holders
// behind a mutex. It is the embedded default (lock.backend: local), where a
// single process is the only maintainer of its tables but a run, a trigger
// and the loop must still not work on one table at once. It honours expiry
// exactly like the Redis implementation, so code tested against it behaves
// the same in production.
package memlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iceberg-maintainer/maintainer/lock"
)

// Locker is an in-process lock.Locker. The zero value is not usable; use New.
type Locker struct {
	now func() time.Time

	mu   sync.Mutex
	held map[string]holder
	seq  uint64 // last token handed out
}

// holder is the current holding of a key. An entry past its expiry is free;
// it is removed when the key is next taken, extended or released, so the map
// is bounded by the number of keys (tables) ever locked.
type holder struct {
	token   uint64
	expires time.Time
}

var _ lock.Locker = (*Locker)(nil)

// New returns a Locker on the wall clock.
func New() *Locker { return NewWithClock(time.Now) }

// NewWithClock returns a Locker whose expiries follow now, so tests can
// expire a lock by moving a fake clock instead of sleeping. Give Acquire the
// same clock (lock.Options.Now).
func NewWithClock(now func() time.Time) *Locker {
	return &Locker{now: now, held: make(map[string]holder)}
}

// TryLock takes key for ttl unless an unexpired holder has it (ErrBusy).
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock %q: take: %w", key, context.Cause(ctx))
	}
	if key == "" {
		return nil, errors.New("lock \"\": take: empty key")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("lock %q: take: ttl must be > 0 (got %s)", key, ttl)
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.held[key]; ok && now.Before(cur.expires) {
		return nil, fmt.Errorf("lock %q: take: %w (expires in %s)", key, lock.ErrBusy, cur.expires.Sub(now).Round(time.Millisecond))
	}
	l.seq++
	until := now.Add(ttl)
	l.held[key] = holder{token: l.seq, expires: until}
	return &handle{l: l, key: key, token: l.seq, ttl: ttl, until: until}, nil
}

// Ping always succeeds: the backend is this process.
func (l *Locker) Ping(context.Context) error { return nil }

// ForceRelease deletes key whoever holds it, and reports whether it was
// held. It is the in-process "break the lock" for operators and tests; the
// former holder finds out at its next Extend (ErrLost).
func (l *Locker) ForceRelease(key string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.held[key]
	delete(l.held, key)
	return ok && now.Before(cur.expires)
}

// handle is one holding, identified by its token so that a stale handle can
// never extend or release a later holder's lock.
type handle struct {
	l     *Locker
	key   string
	token uint64
	ttl   time.Duration

	mu    sync.Mutex
	until time.Time
}

// ours checks, under l.mu, that the key is still held by h at now. An
// expired entry of ours is removed: it is free for anyone, and h must not
// revive it.
func (h *handle) ours(now time.Time) error {
	cur, ok := h.l.held[h.key]
	switch {
	case !ok:
		return errors.New("no longer held (released, expired or broken)")
	case cur.token != h.token:
		return errors.New("taken by another holder")
	case !now.Before(cur.expires):
		delete(h.l.held, h.key)
		return fmt.Errorf("expired %s ago", now.Sub(cur.expires).Round(time.Millisecond))
	}
	return nil
}

func (h *handle) Extend(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lock %q: extend: %w", h.key, context.Cause(ctx))
	}
	now := h.l.now()
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if err := h.ours(now); err != nil {
		return fmt.Errorf("lock %q: extend: %w: %w", h.key, lock.ErrLost, err)
	}
	until := now.Add(h.ttl)
	h.l.held[h.key] = holder{token: h.token, expires: until}
	h.mu.Lock()
	h.until = until
	h.mu.Unlock()
	return nil
}

// Until is exact: there is no clock drift within one process.
func (h *handle) Until() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

// Release ignores ctx: it cannot block, and must work after cancellation.
func (h *handle) Release(context.Context) error {
	now := h.l.now()
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if err := h.ours(now); err != nil {
		return fmt.Errorf("lock %q: release: %w: %w", h.key, lock.ErrLost, err)
	}
	delete(h.l.held, h.key)
	return nil
}

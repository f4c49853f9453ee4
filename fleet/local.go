package fleet

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Local is an in-process Backend: the membership of one process (the
// in-process lock's fleet of one), and of several members in tests.
type Local struct {
	now func() time.Time
	mu  sync.Mutex
	exp map[string]time.Time
	by  map[string]string // the instance of each id's last heartbeat
}

// NewLocal returns an empty membership on clock now (nil: time.Now).
func NewLocal(now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	return &Local{now: now, exp: map[string]time.Time{}, by: map[string]string{}}
}

var _ Backend = (*Local)(nil)

// Heartbeat marks id alive for ttl by instance, and returns the instance
// of the heartbeat it replaced ("" when none lived).
func (l *Local) Heartbeat(_ context.Context, id, instance string, ttl time.Duration) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	prev := ""
	if exp, ok := l.exp[id]; ok && now.Before(exp) {
		prev = l.by[id]
	}
	l.exp[id], l.by[id] = now.Add(ttl), instance
	return prev, nil
}

// Members lists the ids whose heartbeat has not expired, sorted.
func (l *Local) Members(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	out := []string{}
	for id, exp := range l.exp {
		if now.Before(exp) {
			out = append(out, id)
		} else {
			delete(l.exp, id)
			delete(l.by, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Leave removes id.
func (l *Local) Leave(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.exp, id)
	delete(l.by, id)
	return nil
}

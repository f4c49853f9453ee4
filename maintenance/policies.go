package maintenance

import (
	"sync"
	"time"
)

// lastLoads keeps a value per table from the table's last load for maxAge;
// maxAge 0 keeps none. Entries older than maxAge are dropped together, at
// most once per maxAge, so a catalog whose tables come and go does not grow
// it for ever and a pass over n tables does not walk it n times.
//
// The Runner keeps two: each table's policy for HeldUntil, so that the hold
// of a requested run, asked for every HTTP trigger and alert, does not load
// the table again to read its rate limit and window (serve's poll loads
// every table each poll interval anyway; the run a request queues loads the
// table and decides with what it finds then); and whether the table shares
// its compactions (mayShare).
type lastLoads[V any] struct {
	mu      sync.Mutex
	maxAge  time.Duration
	now     func() time.Time
	m       map[string]loaded[V]
	trimmed time.Time
}

type loaded[V any] struct {
	v  V
	at time.Time
}

func newLastLoads[V any](maxAge time.Duration, now func() time.Time) *lastLoads[V] {
	return &lastLoads[V]{maxAge: maxAge, now: now, m: map[string]loaded[V]{}}
}

func (l *lastLoads[V]) put(name string, v V) {
	if l.maxAge <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.trimmed) >= l.maxAge {
		for n, c := range l.m { // tables no longer loaded go
			if now.Sub(c.at) >= l.maxAge {
				delete(l.m, n)
			}
		}
		l.trimmed = now
	}
	l.m[name] = loaded[V]{v: v, at: now}
}

// get returns the value of the table's last load if it is younger than
// maxAge.
func (l *lastLoads[V]) get(name string) (V, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.m[name]
	if !ok || l.now().Sub(c.at) >= l.maxAge {
		var zero V
		return zero, false
	}
	return c.v, true
}

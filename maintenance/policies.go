package maintenance

import (
	"sync"
	"time"
)

// policies keeps each table's policy from its last load for maxAge, so that
// the hold of a requested run (Runner.HeldUntil), asked for every HTTP
// trigger and alert, does not load the table again to read its rate limit
// and window: serve's poll loads every table each poll interval anyway. A
// policy older than maxAge is loaded again; maxAge 0 keeps none. The run a
// request queues loads the table and decides with what it finds then.
type policies struct {
	mu     sync.Mutex
	maxAge time.Duration
	now    func() time.Time
	m      map[string]cachedPolicy
}

type cachedPolicy struct {
	pol Policy
	at  time.Time
}

func newPolicies(maxAge time.Duration, now func() time.Time) *policies {
	return &policies{maxAge: maxAge, now: now, m: map[string]cachedPolicy{}}
}

func (p *policies) put(name string, pol Policy) {
	if p.maxAge <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for n, c := range p.m { // tables no longer loaded go
		if now.Sub(c.at) >= p.maxAge {
			delete(p.m, n)
		}
	}
	p.m[name] = cachedPolicy{pol: pol, at: now}
}

// get returns the policy of the table's last load if it is younger than
// maxAge.
func (p *policies) get(name string) (Policy, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.m[name]
	if !ok || p.now().Sub(c.at) >= p.maxAge {
		return Policy{}, false
	}
	return c.pol, true
}

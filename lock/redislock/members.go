package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iceberg-maintainer/maintainer/lock"
)

// Membership is a set of live members on the lock's nodes (the `serve`
// replicas of one fleet): each member's heartbeat is a key with a TTL,
// "<key>:member:<id>", and the set "<key>" indexes them. Expiry is the
// nodes' own, so the members' clocks do not matter.
//
// With several nodes a heartbeat succeeds when a quorum stored it, and a
// listing needs a quorum of answers. A member counts when its heartbeat is
// on at least quorum-(nodes not answering) of the answering nodes: every
// member whose last heartbeat reached a quorum passes (two quorums share a
// node), and with every node answering, a member that reaches only a
// minority (which owns nothing, having no quorum) does not, so its share is
// not left unowned.
type Membership struct {
	l   *Locker
	key string
}

// Membership returns the membership whose index is key; key must not be a
// lock or state key (use a segment of its own: "<prefix>:fleet:<catalog>").
func (l *Locker) Membership(key string) *Membership { return &Membership{l: l, key: key} }

func (m *Membership) memberKey(id string) string { return m.key + ":member:" + id }

// beat stores a member's heartbeat (its key holds the writing instance,
// with the TTL) and indexes it, returning the instance it replaced (false
// when none lived), in one atomic step. KEYS: the heartbeat, the index;
// ARGV: the instance, the TTL in ms, the member id.
var beat = redis.NewScript(`
local prev = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return prev
`)

// Heartbeat marks id alive for ttl on every node, written by instance; it
// succeeds when a quorum stored it. It returns the instance whose
// heartbeat it replaced: another instance when a quorum of nodes held
// another one (the one most of them held), else instance when any node held
// it, else "". One node is not enough: a process restarted under its old id
// whose first heartbeat missed a node finds its dead predecessor's
// heartbeat there at its next one, while a live twin writes every node it
// reaches, a quorum of them when its heartbeats succeed.
func (m *Membership) Heartbeat(ctx context.Context, id, instance string, ttl time.Duration) (string, error) {
	if id == "" {
		return "", errors.New("redis membership: heartbeat: empty member id")
	}
	prevs := make([]string, len(m.l.clients))
	errs := m.l.each(ctx, func(ctx context.Context, i int, c *redis.Client) error {
		prev, err := beat.Run(ctx, c, []string{m.memberKey(id), m.key}, instance, max(ttl.Milliseconds(), 1), id).Text()
		if errors.Is(err, redis.Nil) {
			return nil // no live heartbeat before this one
		}
		prevs[i] = prev
		return err
	})
	if err := m.quorum(ctx, "heartbeat of "+id, errs); err != nil {
		return "", err
	}
	others, own := map[string]int{}, false
	for i, p := range prevs {
		switch {
		case errs[i] != nil || p == "":
		case p == instance:
			own = true
		default:
			others[p]++
		}
	}
	out, n, total := "", 0, 0
	for p, c := range others {
		total += c
		if c > n || c == n && p < out {
			out, n = p, c
		}
	}
	switch {
	case total >= m.l.quorum:
		return out, nil
	case own:
		return instance, nil
	}
	return "", nil
}

// listLive returns the members of the index whose heartbeat key exists, and
// drops the others from the index, in one atomic step. ARGV[1] is the
// prefix of the members' keys.
var listLive = redis.NewScript(`
local live = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. id) == 1 then
    live[#live + 1] = id
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return live
`)

// Members lists the live members, sorted.
func (m *Membership) Members(ctx context.Context) ([]string, error) {
	lists := make([][]string, len(m.l.clients))
	errs := m.l.each(ctx, func(ctx context.Context, i int, c *redis.Client) error {
		ids, err := listLive.Run(ctx, c, []string{m.key}, m.key+":member:").StringSlice()
		lists[i] = ids
		return err
	})
	if err := m.quorum(ctx, "list members", errs); err != nil {
		return nil, err
	}
	answered := 0
	seen := map[string]int{}
	for i, ids := range lists {
		if errs[i] != nil {
			continue
		}
		answered++
		for _, id := range ids {
			seen[id]++
		}
	}
	need := max(1, m.l.quorum-(len(m.l.addrs)-answered))
	out := []string{}
	for id, n := range seen {
		if n >= need {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Leave removes id from every node it can reach; it succeeds when a quorum
// removed it (the rest expire with their TTL).
func (m *Membership) Leave(ctx context.Context, id string) error {
	errs := m.l.each(ctx, func(ctx context.Context, _ int, c *redis.Client) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, m.memberKey(id))
			p.SRem(ctx, m.key, id)
			return nil
		})
		return err
	})
	return m.quorum(ctx, "leave of "+id, errs)
}

// quorum turns per-node errors into one error wrapping lock.ErrUnavailable
// when fewer than a quorum of nodes succeeded.
func (m *Membership) quorum(ctx context.Context, what string, errs []error) error {
	failed := m.l.failures(errs)
	ok := len(m.l.addrs) - len(failed)
	switch {
	case ok >= m.l.quorum:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("redis membership %q: %s: %w", m.key, what, context.Cause(ctx))
	}
	return fmt.Errorf("redis membership %q: %s: %w: %s", m.key, what, lock.ErrUnavailable, m.l.quorumMessage(ok, failed))
}

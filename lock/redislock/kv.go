package redislock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iceberg-maintainer/maintainer/lock"
)

// The key-value store keeps small values (trigger state) on the lock's
// nodes, so replicas share them and they survive a restart. Keys share the
// nodes' (and DB's) key space with the locks: callers must pass keys that
// cannot be lock keys (lock keys contain ":lock:"; use another segment,
// e.g. "<prefix>:state:<catalog>:<table>").
//
// With one node, Get and Put are plain GET and SET (Get drops the header of
// a value left from a multi-node configuration). With several, each value
// is stored with a version (see versionedPrefix) on every node; Put succeeds
// when a quorum stored it, and Get reads every node, needs a quorum of
// answers and returns the newest version. Since any two quorums share a
// node, a Get after a successful Put sees that Put or a newer one. Versions
// are writer wall-clock times, so with concurrent writers on skewed clocks
// the last writer may not win; for trigger state (counters since a task's
// last run) that costs at most one extra or late run.

// versionedPrefix starts every value stored on several nodes:
// "mkv1:" + 16 hex digits of the writer's UnixNano + 16 hex random digits
// (a tie-breaker between writers) + ":" + the value. Fixed-width hex makes
// versions compare as strings.
const (
	versionedPrefix = "mkv1:"
	versionLen      = 32
	headerLen       = len(versionedPrefix) + versionLen + 1
)

// Get returns the value of key, or (nil, nil) when no node has it. An empty
// stored value is returned as an empty, non-nil slice.
func (l *Locker) Get(ctx context.Context, key string) ([]byte, error) {
	if key == "" {
		return nil, errors.New(`redis kv "": get: empty key`)
	}
	if len(l.clients) == 1 {
		b, err := l.clients[0].Get(ctx, key).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			return nil, nil
		case err != nil:
			return nil, l.kvError(ctx, key, "get", 0, map[string]error{l.addrs[0]: err})
		}
		// A value left by a multi-node configuration keeps its header.
		_, val := decodeVersioned(b)
		return val, nil
	}

	vals := make([][]byte, len(l.clients))
	found := make([]bool, len(l.clients))
	errs := l.each(ctx, func(ctx context.Context, i int, c *redis.Client) error {
		b, err := c.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			return err
		}
		vals[i], found[i] = b, true
		return nil
	})
	failed := l.failures(errs)
	if answered := len(l.addrs) - len(failed); answered < l.quorum {
		return nil, l.kvError(ctx, key, "get", answered, failed)
	}
	var (
		newest   []byte
		newestV  string
		anyFound bool
	)
	for i, ok := range found {
		if !ok {
			continue
		}
		v, val := decodeVersioned(vals[i])
		if !anyFound || v > newestV {
			newest, newestV, anyFound = val, v, true
		}
	}
	if !anyFound {
		return nil, nil
	}
	if newest == nil {
		newest = []byte{}
	}
	return newest, nil
}

// Put stores val under key, without expiry. With several nodes it succeeds
// when a quorum stored it; the nodes that did not keep their older version,
// which Get outvotes.
func (l *Locker) Put(ctx context.Context, key string, val []byte) error {
	if key == "" {
		return errors.New(`redis kv "": put: empty key`)
	}
	if len(l.clients) == 1 {
		if err := l.clients[0].Set(ctx, key, val, 0).Err(); err != nil {
			return l.kvError(ctx, key, "put", 0, map[string]error{l.addrs[0]: err})
		}
		return nil
	}
	stored := encodeVersioned(l.nextVersion(), val)
	errs := l.each(ctx, func(ctx context.Context, _ int, c *redis.Client) error {
		return c.Set(ctx, key, stored, 0).Err()
	})
	failed := l.failures(errs)
	if ok := len(l.addrs) - len(failed); ok < l.quorum {
		return l.kvError(ctx, key, "put", ok, failed)
	}
	return nil
}

func (l *Locker) kvError(ctx context.Context, key, what string, answered int, failed map[string]error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("redis kv %q: %s: %w", key, what, context.Cause(ctx))
	}
	return fmt.Errorf("redis kv %q: %s: %w: %s", key, what, lock.ErrUnavailable, l.quorumMessage(answered, failed))
}

// nextVersion is the writer's clock in ns, strictly increasing within this
// process (so two Puts in one nanosecond, or across a clock step back, are
// still ordered), plus a random tie-breaker between processes.
func (l *Locker) nextVersion() string {
	ts := time.Now().UnixNano()
	l.mu.Lock()
	if ts <= l.lastVer {
		ts = l.lastVer + 1
	}
	l.lastVer = ts
	l.mu.Unlock()
	return fmt.Sprintf("%016x%016x", uint64(ts), rand.Uint64())
}

func encodeVersioned(version string, val []byte) []byte {
	b := make([]byte, 0, headerLen+len(val))
	b = append(b, versionedPrefix...)
	b = append(b, version...)
	b = append(b, ':')
	return append(b, val...)
}

// decodeVersioned splits a stored value into version and value. A value
// without a valid header (written while Addrs was a single node, or by hand)
// has version "", older than any versioned write, and is returned whole.
func decodeVersioned(b []byte) (version string, val []byte) {
	if len(b) < headerLen || !bytes.HasPrefix(b, []byte(versionedPrefix)) || b[headerLen-1] != ':' {
		return "", b
	}
	v := b[len(versionedPrefix) : headerLen-1]
	for _, c := range v {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", b
		}
	}
	return string(v), b[headerLen:]
}

// Package lock is the per-table lease that keeps two maintainers (replicas,
// a CronJob and a Deployment, a run and a manual trigger) from working on one
// table at the same time.
//
// The lock only avoids wasted work: Iceberg's optimistic commit requirements
// are what keep a table correct, so a holder that loses its lease stops before
// its next commit or delete rather than trusting the lock blindly. That is why
// a Lease is bound to a context: Acquire extends the lock in the background
// and cancels Lease.Context with a cause wrapping ErrLost as soon as it can no
// longer vouch for the lock.
//
// The package is the contract and the lease helper only (standard library
// only); lock/memlock is the in-process implementation and lock/redislock the
// Redis one, and lock/locktest is the conformance suite both pass.
package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinels that classify every error of this package and its
// implementations; test them with errors.Is.
var (
	// ErrBusy: another holder has the lock. Not a failure: the table is
	// being maintained elsewhere.
	ErrBusy = errors.New("lock is held by another holder")
	// ErrLost: the lock is no longer ours (it expired, was taken or
	// deleted), or can no longer be vouched for. Work under it must stop.
	ErrLost = errors.New("lease lost")
	// ErrUnavailable: the backend could not be reached, or fewer than a
	// quorum of its nodes answered. Nothing can be said about the holder.
	ErrUnavailable = errors.New("lock backend unavailable")
)

// Locker takes named, expiring locks. Implementations: memlock, redislock.
// A Locker is safe for concurrent use.
type Locker interface {
	// TryLock takes key for ttl, or fails at once: an error wrapping
	// ErrBusy when another holder has it, ErrUnavailable when the backend
	// cannot be reached (or no quorum answered).
	TryLock(ctx context.Context, key string, ttl time.Duration) (Handle, error)
	// Ping reports whether the backend is reachable (a quorum of nodes for
	// redis); the error wraps ErrUnavailable.
	Ping(ctx context.Context) error
}

// Handle is one holding of a lock. Its methods are safe for concurrent use:
// Lease.Release may run while a hung Extend is still pending.
type Handle interface {
	// Extend pushes the expiry to now+ttl. The error wraps ErrLost when the
	// lock is no longer ours (expired, taken, deleted), ErrUnavailable when
	// the backend can't be reached.
	Extend(ctx context.Context) error
	// Until is the conservative time until which the lock is known to be
	// held: the start of the acquiring or last successful extending call +
	// ttl - a clock drift allowance.
	Until() time.Time
	// Release gives the lock up. Releasing a lock that is no longer ours
	// frees nothing (a new holder keeps it) and returns an error wrapping
	// ErrLost, which callers should report rather than fail on.
	Release(ctx context.Context) error
}

// defaultCatalog names the catalog of a key whose catalog part is empty; it
// is the config's default catalog name.
const defaultCatalog = "default"

// Key returns the lock key of one table:
//
//	<prefix>:lock:<catalog>:<table>     e.g. iceberg-maintainer:lock:default:db.events
//
// The prefix separates deployments that share Redis; the catalog separates
// tables of the same name in different catalogs. Nothing is escaped, so
// names containing ':' can make two tables share a key; that only makes
// them exclude each other (more locking, never less), which is safe.
//
// Empty parts are handled rather than producing surprising keys: an empty
// prefix is left out ("lock:<catalog>:<table>"), an empty catalog is
// "default", and an empty table gives a key ending in ':' that ValidateKey,
// and so Acquire, rejects (a table with no name is a caller's bug, and it
// must not silently share one lock with every other such bug).
func Key(prefix, catalog, table string) string {
	if catalog == "" {
		catalog = defaultCatalog
	}
	k := "lock:" + catalog + ":" + table
	if prefix != "" {
		k = prefix + ":" + k
	}
	return k
}

// ValidateKey rejects keys no table could have: empty ones, and ones ending
// in ':' (Key with an empty table name).
func ValidateKey(key string) error {
	switch {
	case strings.TrimSpace(key) == "":
		return errors.New("lock key is empty")
	case strings.HasSuffix(key, ":"):
		return fmt.Errorf("lock key %q ends with ':' (empty table name?)", key)
	}
	return nil
}

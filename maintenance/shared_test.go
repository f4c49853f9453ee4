package maintenance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/lock"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
)

// events is an ordered record of what happened, from several goroutines.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) index(s string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, v := range e.log {
		if v == s {
			return i
		}
	}
	return -1
}

// claimHook is memlock that calls onClaim before the first partition claim
// is taken: the moment a shared compaction has given the table's lease back
// and starts its rewrites.
type claimHook struct {
	*memlock.Locker
	once    sync.Once
	onClaim func()
}

func (l *claimHook) TryLock(ctx context.Context, key string, ttl time.Duration) (lock.Handle, error) {
	if strings.Contains(key, ":part:") {
		l.once.Do(l.onClaim)
	}
	return l.Locker.TryLock(ctx, key, ttl)
}

// commitLog is the catalog with every commit recorded in events.
type commitLog struct {
	Catalog
	ev *events
}

func (c *commitLog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c *commitLog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	c.ev.add("commit")
	return c.Catalog.CommitTable(ctx, ident, reqs, ups)
}

// A compaction on group leases holds the table's lease only around its
// commits: while it rewrites, the lease is free (expiry can take it), and
// its commit waits until whoever took it (here an expiry) gives it back.
func TestSharedCompactionCommitWaitsForExpiry(t *testing.T) {
	e := newEnv(t, 6)
	e.policy.Compact.GroupLeases = true
	e.policy.Compact.CommitLeaseWait = time.Minute
	ev := &events{}
	e.cat = &commitLog{Catalog: e.cat, ev: ev}
	locker := &claimHook{Locker: memlock.New()}
	r := e.runner(t, locker, nil)
	locker.onClaim = func() {
		h, err := locker.Locker.TryLock(context.Background(), r.lockKey(tableName), time.Minute)
		if err != nil {
			t.Errorf("the table's lease is held during a shared compaction's rewrite: %v", err)
			return
		}
		ev.add("expiry holds the table")
		// The expiry ends once the compaction is seen waiting for its
		// commit, which /v1/status shows with how far it came.
		go func() {
			defer func() { ev.add("expiry done"); _ = h.Release(context.Background()) }()
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if rs := r.Running(); len(rs) == 1 && strings.Contains(rs[0].WaitingOn, "the table's lease for a commit") {
					if want := "1 partitions claimed here, 0 held by other replicas, of 1 planned"; rs[0].Progress != want {
						t.Errorf("progress %q while the commit waits; want %q", rs[0].Progress, want)
					}
					return
				}
			}
			t.Error("the compaction was never seen waiting for the table's lease")
		}()
	}
	o := one(t, r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact}, Force: true}), TaskCompact)
	if o.Status != StatusSucceeded || o.Compact.GroupsCommitted != 1 {
		t.Fatalf("compaction: %+v", o)
	}
	held, done, commit := ev.index("expiry holds the table"), ev.index("expiry done"), ev.index("commit")
	if held < 0 || commit < 0 || done < 0 || done > commit {
		t.Fatalf("events %q: the commit must wait for the expiry to end", ev.log)
	}
	if h, err := locker.TryLock(t.Context(), r.lockKey(tableName), time.Minute); err != nil {
		t.Errorf("the table's lease is left held after the run: %v", err)
	} else {
		_ = h.Release(t.Context())
	}
}

// othersHoldPartitions is memlock on which every partition lease is held by
// another replica.
type othersHoldPartitions struct{ *memlock.Locker }

func (l othersHoldPartitions) TryLock(ctx context.Context, key string, ttl time.Duration) (lock.Handle, error) {
	if strings.Contains(key, ":part:") {
		return nil, fmt.Errorf("lock %q: %w", key, lock.ErrBusy)
	}
	return l.Locker.TryLock(ctx, key, ttl)
}

// A partition another replica holds is left to it: the run succeeds, says
// so, and the table is unchanged.
func TestSharedCompactionSkipsLeasedPartition(t *testing.T) {
	e := newEnv(t, 6)
	e.policy.Compact.GroupLeases = true
	r := e.runner(t, othersHoldPartitions{memlock.New()}, nil)
	before := e.current(t).SnapshotID
	o := one(t, r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact}, Force: true}), TaskCompact)
	if o.Status != StatusSucceeded || o.Compact.GroupsClaimedElsewhere != 1 || o.Compact.GroupsCommitted != 0 {
		t.Fatalf("compaction: %+v", o)
	}
	if !strings.Contains(o.Reason, "1 left to other replicas") {
		t.Errorf("reason %q does not say the group was left", o.Reason)
	}
	if e.current(t).SnapshotID != before {
		t.Error("a partition leased elsewhere was compacted")
	}
}

// A table's lease held by someone else (another replica's commit, here) does
// not keep a shared compaction from starting: it plans and rewrites, and
// only its commit waits for the lease.
func TestSharedCompactionJoinsWhileTheTableLeaseIsHeld(t *testing.T) {
	e := newEnv(t, 6)
	e.policy.Compact.GroupLeases = true
	e.policy.Compact.CommitLeaseWait = time.Minute
	locker := memlock.New()
	r := e.runner(t, locker, nil)
	h, err := locker.TryLock(t.Context(), r.lockKey(tableName), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer func() { _ = h.Release(context.Background()) }()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if rs := r.Running(); len(rs) == 1 && strings.Contains(rs[0].WaitingOn, "the table's lease for a commit") {
				return
			}
		}
		t.Error("the compaction was never seen waiting for its commit")
	}()
	o := one(t, r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact}, Force: true}), TaskCompact)
	if o.Status != StatusSucceeded || o.Compact.GroupsCommitted != 1 {
		t.Fatalf("compaction beside a held table lease: %+v", o)
	}
}

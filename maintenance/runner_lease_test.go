package maintenance

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/lock/memlock"
)

// countingCatalog counts the table loads that reach the catalog.
type countingCatalog struct {
	Catalog
	loads atomic.Int64
}

func (c *countingCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	c.loads.Add(1)
	return c.Catalog.LoadTable(ctx, ident)
}

// A table whose lease another replica holds costs no catalog load when its
// compaction cannot be shared (group_leases off, as of the table's last
// load): serve's poll has just loaded it to decide it is due, and each busy
// pass after that is free. With group_leases on, the busy pass loads it to
// join the shared compaction.
func TestBusyTableWithoutGroupLeasesIsNotLoaded(t *testing.T) {
	for _, shared := range []bool{false, true} {
		e := newEnv(t, 6)
		e.policy.Compact.GroupLeases = shared
		e.policy.Compact.CommitLeaseWait = 10 * time.Millisecond // the joined run need not land
		cat := &countingCatalog{Catalog: e.cat}
		e.cat = cat
		locker := memlock.New()
		r := e.runner(t, locker, nil)
		h, err := locker.TryLock(t.Context(), r.lockKey(tableName), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.DueTasks(t.Context(), e.opt.Identifier(), false); err != nil {
			t.Fatal(err)
		}
		polled := cat.loads.Load()
		passes := 3
		if shared {
			passes = 1
		}
		for range passes {
			outs := r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact}})
			if o := one(t, outs, TaskCompact); !shared && o.Status != StatusBusy {
				t.Fatalf("group_leases off, lease held elsewhere: %+v; want busy", o)
			}
		}
		loads := cat.loads.Load() - polled
		switch {
		case !shared && loads != 0:
			t.Errorf("group_leases off: %d busy passes loaded the table %d times; want none", passes, loads)
		case shared && loads < int64(passes):
			t.Errorf("group_leases on: %d busy passes loaded the table %d times; want each to load it to join", passes, loads)
		}
		_ = h.Release(context.Background())
	}
}
